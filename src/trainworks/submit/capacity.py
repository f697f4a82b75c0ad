"""The capacity walk: try candidate regions in preference order, moving on after stock-outs and quota errors.

Pure but for the attempt and sleep functions it is given, so every policy is unit-tested without a server.
Every preflight answer and every attempt lands in a :class:`CapacityLedger`, which travels with the job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from trainworks.jobs.capacity_label import capacity_label

T = TypeVar("T")


class Policy(StrEnum):
    FAILOVER = "FAILOVER"  # retry the same region (with backoff) before moving on
    EAGER_NEXT_REGION = "EAGER_NEXT_REGION"  # move on at once; back off between passes


class CapacityProblem(Exception):
    """An attempt found no capacity: `kind` is "stockout" or "quota". Other exceptions end the walk."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class Preflight:
    """What a region said before any attempt: None counts mean unlimited (or unknown)."""

    region: str
    served: bool = True
    stockout: bool = False
    max_replicas: int | None = None
    quota_replicas: int | None = None
    capacity_replicas: int | None = None
    note: str = ""

    @property
    def blocked(self) -> bool:
        return not self.served or self.stockout or self.max_replicas == 0

    def why_blocked(self) -> str:
        if not self.served:
            return "region not served"
        if self.stockout:
            return "stocked out"
        if self.quota_replicas == 0:
            return "no quota left"
        return "no free capacity"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Attempt:
    region: str
    try_number: int  # 1-based within the region
    outcome: str  # submitted | stockout | quota | skipped | error
    detail: str = ""
    workers: int | None = None
    job_name: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in ("", None)}


@dataclass
class CapacityLedger:
    policy: str = Policy.FAILOVER.value
    preflight: list[Preflight] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def chosen(self) -> Attempt | None:
        return next((a for a in reversed(self.attempts) if a.outcome == "submitted"), None)

    def to_json(self) -> dict[str, Any]:
        chosen = self.chosen
        return {
            "policy": self.policy,
            "preflight": [p.to_dict() for p in self.preflight],
            "attempts": [a.to_dict() for a in self.attempts],
            "warnings": list(self.warnings),
            "region": chosen.region if chosen else None,
        }

    def label_value(self, pending: Attempt | None = None) -> str:
        """The attempts as the job's capacity label; the whole ledger is staged beside the run's config."""
        attempts = [*self.attempts, *([pending] if pending else [])]
        return capacity_label([(a.region, a.outcome) for a in attempts])


@dataclass(frozen=True)
class Backoff:
    initial: float = 2.0
    maximum: float = 60.0
    factor: float = 2.0

    def delay(self, n: int) -> float:
        """The wait before the n-th retry (n >= 1)."""
        return float(min(self.maximum, self.initial * self.factor ** max(n - 1, 0)))


class CapacityExhausted(Exception):
    """Every region and retry was tried without getting capacity."""

    def __init__(self, ledger: CapacityLedger) -> None:
        tried = ", ".join(f"{a.region} ({a.outcome}: {a.detail})" for a in ledger.attempts) or "none"
        super().__init__(f"no capacity in any candidate region; attempts: {tried}")
        self.ledger = ledger


def clamp_workers(requested: int, preflight: Preflight | None) -> tuple[int, str | None]:
    """The worker count a region's quota grants (never below 1), and a warning when it is fewer."""
    if preflight is None or preflight.max_replicas is None or preflight.max_replicas >= requested:
        return requested, None
    granted = max(1, preflight.max_replicas)
    return granted, (
        f"{preflight.region}: quota and free capacity allow {preflight.max_replicas} of the {requested} "
        f"workers asked for; submitting {granted}"
    )


def walk(
    regions: Sequence[str],
    attempt: Callable[[str, int], T],
    *,
    policy: Policy,
    ledger: CapacityLedger,
    same_region_retries: int = 2,
    rounds: int = 1,
    backoff: Backoff = Backoff(),
    sleep: Callable[[float], None],
    on_event: Callable[[str], None] = lambda _m: None,
) -> T:
    """Call `attempt(region, try_number)` until one returns; it raises CapacityProblem to move on.

    FAILOVER tries a region 1 + `same_region_retries` times (backing off between tries) before the next;
    EAGER_NEXT_REGION tries each region once per pass and backs off between passes. `rounds` passes in all.
    The attempt records its own outcome in the ledger when it succeeds; failures are recorded here.
    """
    if not regions:
        raise CapacityExhausted(ledger)
    ledger.policy = policy.value
    tries_per_visit = 1 + max(same_region_retries, 0) if policy == Policy.FAILOVER else 1
    waits = 0
    counts: dict[str, int] = {}
    for round_index in range(max(rounds, 1)):
        if round_index > 0:
            waits += 1
            delay = backoff.delay(waits)
            on_event(f"no capacity in any region; next pass in {delay:g}s")
            sleep(delay)
        for region in regions:
            for visit_try in range(tries_per_visit):
                if visit_try > 0:
                    waits += 1
                    delay = backoff.delay(waits)
                    on_event(f"{region}: retrying in {delay:g}s")
                    sleep(delay)
                counts[region] = counts.get(region, 0) + 1
                try:
                    return attempt(region, counts[region])
                except CapacityProblem as problem:
                    ledger.attempts.append(Attempt(region, counts[region], problem.kind, problem.message))
                    on_event(f"{region}: {problem.kind}: {problem.message}")
    raise CapacityExhausted(ledger)
