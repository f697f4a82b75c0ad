"""The capacity walk's policies, backoff, ledger and worker clamping (pure: no server)."""

from __future__ import annotations

import pytest

from trainworks.jobs.capacity_label import parse_capacity_label
from trainworks.submit.capacity import (
    Attempt,
    Backoff,
    CapacityExhausted,
    CapacityLedger,
    CapacityProblem,
    Policy,
    Preflight,
    clamp_workers,
    walk,
)


class Regions:
    """Answers attempts from a script: region -> list of outcomes ("ok", "stockout", "quota", "boom")."""

    def __init__(self, script: dict[str, list[str]]) -> None:
        self.script = {region: list(outcomes) for region, outcomes in script.items()}
        self.calls: list[tuple[str, int]] = []

    def __call__(self, region: str, try_number: int) -> str:
        self.calls.append((region, try_number))
        outcome = self.script[region].pop(0) if self.script[region] else "stockout"
        if outcome in ("stockout", "quota"):
            raise CapacityProblem(outcome, f"{region} said {outcome}")
        if outcome == "boom":
            raise RuntimeError("not a capacity problem")
        return f"job-in-{region}"


def run_walk(regions: Regions, order: list[str], policy: Policy, **kwargs: object) -> tuple[str, list[float]]:
    waits: list[float] = []
    ledger = kwargs.pop("ledger", CapacityLedger())
    result = walk(order, regions, policy=policy, ledger=ledger, sleep=waits.append, **kwargs)  # type: ignore[arg-type]
    return result, waits


def test_failover_retries_the_same_region_before_moving_on() -> None:
    regions = Regions({"a": ["stockout", "stockout", "stockout"], "b": ["ok"]})
    ledger = CapacityLedger()
    result, waits = run_walk(
        regions, ["a", "b"], Policy.FAILOVER, ledger=ledger, same_region_retries=2, backoff=Backoff(1, 10)
    )
    assert result == "job-in-b"
    assert regions.calls == [("a", 1), ("a", 2), ("a", 3), ("b", 1)]
    assert waits == [1.0, 2.0]  # backoff between tries in a region, none when moving on
    assert [(a.region, a.try_number, a.outcome) for a in ledger.attempts] == [
        ("a", 1, "stockout"),
        ("a", 2, "stockout"),
        ("a", 3, "stockout"),
    ]
    assert ledger.policy == "FAILOVER"


def test_failover_succeeds_on_a_retry_in_the_first_region() -> None:
    regions = Regions({"a": ["quota", "ok"], "b": ["ok"]})
    result, waits = run_walk(regions, ["a", "b"], Policy.FAILOVER, backoff=Backoff(3, 10))
    assert result == "job-in-a"
    assert regions.calls == [("a", 1), ("a", 2)]
    assert waits == [3.0]


def test_eager_next_region_moves_on_at_once_and_backs_off_between_passes() -> None:
    regions = Regions({"a": ["stockout", "stockout"], "b": ["quota", "ok"]})
    result, waits = run_walk(regions, ["a", "b"], Policy.EAGER_NEXT_REGION, rounds=2, backoff=Backoff(5, 60))
    assert result == "job-in-b"
    assert regions.calls == [("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    assert waits == [5.0]


def test_exhausted_walk_raises_with_the_whole_ledger() -> None:
    regions = Regions({"a": [], "b": []})
    ledger = CapacityLedger()
    with pytest.raises(CapacityExhausted) as info:
        run_walk(
            regions, ["a", "b"], Policy.EAGER_NEXT_REGION, ledger=ledger, rounds=3, backoff=Backoff(1, 3)
        )
    assert len(info.value.ledger.attempts) == 6
    assert "a (stockout" in str(info.value) and "b (stockout" in str(info.value)


def test_backoff_doubles_up_to_its_maximum() -> None:
    regions = Regions({"a": []})
    waits: list[float] = []
    with pytest.raises(CapacityExhausted):
        walk(
            ["a"],
            regions,
            policy=Policy.FAILOVER,
            ledger=CapacityLedger(),
            same_region_retries=5,
            backoff=Backoff(1, 6),
            sleep=waits.append,
        )
    assert waits == [1.0, 2.0, 4.0, 6.0, 6.0]


def test_other_errors_end_the_walk_at_once() -> None:
    regions = Regions({"a": ["boom"], "b": ["ok"]})
    with pytest.raises(RuntimeError, match="not a capacity problem"):
        run_walk(regions, ["a", "b"], Policy.EAGER_NEXT_REGION)
    assert regions.calls == [("a", 1)]


def test_no_regions_is_exhausted() -> None:
    with pytest.raises(CapacityExhausted):
        walk([], Regions({}), policy=Policy.FAILOVER, ledger=CapacityLedger(), sleep=lambda _s: None)


def test_clamp_to_the_granted_quota_with_a_warning() -> None:
    assert clamp_workers(3, None) == (3, None)
    assert clamp_workers(3, Preflight("r", max_replicas=None)) == (3, None)
    assert clamp_workers(3, Preflight("r", max_replicas=5)) == (3, None)
    granted, warning = clamp_workers(3, Preflight("r", max_replicas=2))
    assert granted == 2
    assert warning is not None and "2 of the 3 workers" in warning
    assert clamp_workers(3, Preflight("r", max_replicas=0))[0] == 1


def test_preflight_blocked_reasons() -> None:
    assert Preflight("r", stockout=True).why_blocked() == "stocked out"
    assert Preflight("r", served=False).blocked
    assert Preflight("r", max_replicas=0, quota_replicas=0).why_blocked() == "no quota left"
    assert Preflight("r", max_replicas=0, quota_replicas=4, capacity_replicas=0).why_blocked() == (
        "no free capacity"
    )
    assert not Preflight("r", max_replicas=None).blocked


def test_ledger_label_round_trips_and_keeps_the_latest_attempts() -> None:
    ledger = CapacityLedger()
    ledger.attempts.append(Attempt("us-east1", 1, "stockout"))
    value = ledger.label_value(Attempt("us-central1", 1, "submitted"))
    assert value == "us-east1_stockout__us-central1_submitted"
    assert parse_capacity_label(value) == [("us-east1", "stockout"), ("us-central1", "submitted")]
    for i in range(10):
        ledger.attempts.append(Attempt(f"europe-west{i}", 1, "quota"))
    long_value = ledger.label_value(Attempt("asia-east1", 1, "submitted"))
    assert len(long_value) <= 63
    assert long_value.startswith("more__") and long_value.endswith("asia-east1_submitted")


def test_ledger_json_names_the_chosen_region() -> None:
    ledger = CapacityLedger(policy="EAGER_NEXT_REGION")
    ledger.preflight.append(Preflight("a", stockout=True))
    ledger.attempts += [
        Attempt("a", 0, "skipped", "preflight: stocked out"),
        Attempt("b", 1, "submitted", "", 2),
    ]
    out = ledger.to_json()
    assert out["region"] == "b"
    assert out["attempts"][1] == {"region": "b", "try_number": 1, "outcome": "submitted", "workers": 2}
    assert out["preflight"][0]["stockout"] is True
