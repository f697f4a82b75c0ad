"""Cost accounting: the computation over billed intervals, then jobs through a real server and the CLI."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import httpx
import pytest

from tests.support import command_forks
from tests.support.command_forks import cli_env
from tests.support.jobs import job, python_pool
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_for, wait_job
from trainworks.catalog.billing import (
    BilledInterval,
    MachineShape,
    Usage,
    report_wire,
    resource_rows,
    summarize,
    totals_wire,
    usage_rows,
)
from trainworks.catalog.machines import hourly_price
from trainworks.jobs.enums import JobState
from trainworks.kinds.custom_jobs.usage import job_cost, job_intervals
from trainworks.store.tables import CustomJobRow, ReplicaRow

T0 = datetime(2025, 1, 1, tzinfo=UTC)
N1_4 = MachineShape("n1-standard-4")
# n1: 0.031611 $/vCPU-h and 0.004237 $/GiB-h; n1-standard-4 has 4 vCPUs and 15 GiB.
N1_4_PRICE = Decimal("0.189999")
N1_4_SPOT_PRICE = Decimal("0.057")  # 0.189999 x 0.3 = 0.0569997, 6 decimals
# n1-standard-8 (8 vCPUs, 30 GiB) = 0.379998, plus 2 x NVIDIA_TESLA_T4 at 0.35
N1_8_T4X2 = MachineShape("n1-standard-8", "NVIDIA_TESLA_T4", 2)
N1_8_T4X2_PRICE = Decimal("1.079998")


def span(start_h: float, hours: float | None, group: str = "workerpool0", **kw: Any) -> BilledInterval:
    start = T0 + timedelta(hours=start_h)
    end = None if hours is None else start + timedelta(hours=hours)
    shape = kw.pop("shape", N1_4)
    return BilledInterval(group=group, shape=shape, spot=kw.pop("spot", False), start=start, end=end, **kw)


def money(value: Decimal) -> float:
    return float(value.quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))


# ====================================================================== the computation
def test_catalog_prices_the_tests_rely_on() -> None:
    assert Decimal(str(hourly_price("n1-standard-4", "", 0))) == N1_4_PRICE
    assert Decimal(str(hourly_price("n1-standard-4", "", 0, spot=True))) == N1_4_SPOT_PRICE
    assert Decimal(str(hourly_price("n1-standard-8", "NVIDIA_TESLA_T4", 2))) == N1_8_T4X2_PRICE


def test_on_demand_hours_and_cost_are_exact() -> None:
    summary = summarize([span(0, 1), span(0, 0.5, group="workerpool1")], T0)
    assert summary.machine_hours == Decimal("1.5")
    assert summary.cost_usd == Decimal("1.5") * N1_4_PRICE == Decimal("0.2849985")
    assert summary.on_demand_usd == summary.cost_usd
    wire = totals_wire(summary)
    assert wire == {
        "machineHours": 1.5,
        "acceleratorHours": {},
        "costUsd": 0.285,
        "onDemandEquivalentUsd": 0.285,
    }
    assert [(g.group, g.machine_hours, g.intervals) for g in summary.groups] == [
        ("workerpool0", Decimal(1), 1),
        ("workerpool1", Decimal("0.5"), 1),
    ]


def test_spot_uses_the_spot_price_and_reports_the_on_demand_equivalent() -> None:
    spot = summarize([span(0, 10, spot=True)], T0)
    assert spot.cost_usd == 10 * N1_4_SPOT_PRICE == Decimal("0.57")
    assert spot.on_demand_usd == 10 * N1_4_PRICE == Decimal("1.89999")
    assert totals_wire(spot)["costUsd"] == 0.57
    assert totals_wire(spot)["onDemandEquivalentUsd"] == 1.9
    assert spot.cost_usd < summarize([span(0, 10)], T0).cost_usd


def test_attached_accelerators_on_n1_are_priced_and_counted_by_type() -> None:
    summary = summarize([span(0, 2, shape=N1_8_T4X2), span(0, 1, group="workerpool1")], T0)
    assert summary.machine_hours == Decimal(3)
    assert summary.accelerator_hours == {"NVIDIA_TESLA_T4": Decimal(4)}  # 2 h x 2 GPUs
    assert summary.cost_usd == 2 * N1_8_T4X2_PRICE + N1_4_PRICE == Decimal("2.349995")
    assert totals_wire(summary)["costUsd"] == 2.35
    pools = {g.group: g for g in summary.groups}
    assert pools["workerpool0"].hourly_usd == N1_8_T4X2_PRICE
    assert pools["workerpool1"].accelerator_hours == {}


def test_built_in_accelerators_count_even_when_the_spec_omits_them() -> None:
    shape = MachineShape("a2-highgpu-2g")  # 2 x NVIDIA_TESLA_A100 built in
    summary = summarize([span(0, 1.5, shape=shape)], T0)
    assert summary.accelerator_hours == {"NVIDIA_TESLA_A100": Decimal(3)}
    assert summary.cost_usd == Decimal("1.5") * Decimal(str(hourly_price("a2-highgpu-2g", "", 0)))
    assert shape.to_wire() == {
        "machineType": "a2-highgpu-2g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 2,
    }


def test_running_intervals_count_up_to_now_and_negative_spans_count_zero() -> None:
    now = T0 + timedelta(minutes=90)
    summary = summarize([span(0, None), span(1, None, group="workerpool1")], now)
    assert summary.machine_hours == Decimal(2)  # 1.5 h + 0.5 h
    assert summary.running
    assert [g.running for g in summary.groups] == [1, 1]
    backwards = BilledInterval("workerpool0", N1_4, False, T0, T0 - timedelta(hours=1))
    assert summarize([backwards], now).machine_hours == 0


def test_rounding_is_half_up_and_totals_round_the_exact_sum() -> None:
    # 0.000263 h x 0.189999 = 0.0000499... ; three rows of it round to 0 each, but 0.0001 together.
    seconds = Decimal("0.9468")
    tiny = BilledInterval(
        "workerpool0", N1_4, False, T0, T0 + timedelta(microseconds=int(seconds * 1_000_000))
    )
    usages = [Usage(f"jobs/{i}", f"j{i}", "JOB_STATE_SUCCEEDED", (tiny,)) for i in range(3)]
    rows, total = usage_rows(usages, T0)
    assert [row["costUsd"] for row in rows] == [0.0, 0.0, 0.0]
    assert total.cost_usd == 3 * seconds / 3600 * N1_4_PRICE
    report = report_wire("job", rows, total, T0)
    assert report["totals"]["costUsd"] == 0.0001
    assert report["totals"]["count"] == 3
    assert money(Decimal("0.00005")) == 0.0001  # half-up, not half-even


def test_unknown_machine_types_are_counted_but_not_priced() -> None:
    summary = summarize([span(0, 1, shape=MachineShape("n9-imaginary-4"))], T0)
    assert summary.machine_hours == 1 and summary.cost_usd == 0
    assert summary.groups[0].hourly_usd is None


def _job_row(spec: dict[str, Any], state: JobState, end: datetime | None = None) -> CustomJobRow:
    return CustomJobRow(
        id=42,
        project_number="123456789012",
        location="us-central1",
        display_name="unit",
        state=int(state),
        spec=spec,
        labels={},
        create_time=T0,
        update_time=T0,
        start_time=T0,
        end_time=end,
    )


def _replica(pool: int, attempt: int, start_h: float, end_h: float | None, phase: str) -> ReplicaRow:
    return ReplicaRow(
        job_id=42,
        pool=pool,
        replica_index=0,
        attempt=attempt,
        phase=phase,
        host="127.0.0.1",
        port=1,
        run_dir="/nowhere",
        started_at=T0 + timedelta(hours=start_h),
        ended_at=None if end_h is None else T0 + timedelta(hours=end_h),
    )


def _spec(strategy: str | None = None, **job_spec: Any) -> dict[str, Any]:
    pools = [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1"},
        {
            "machineSpec": {
                "machineType": "n1-standard-8",
                "acceleratorType": "NVIDIA_TESLA_T4",
                "acceleratorCount": 2,
            },
            "replicaCount": "1",
        },
    ]
    spec: dict[str, Any] = {"displayName": "unit", "jobSpec": {"workerPoolSpecs": pools, **job_spec}}
    if strategy:
        spec["jobSpec"]["scheduling"] = {"strategy": strategy}
    return spec


def test_every_attempt_of_a_job_is_billed() -> None:
    # Attempt 0 ran 1 h (both pools) and was preempted; attempt 1 ran 2 h. A planned, never-started
    # replica costs nothing.
    replicas = [
        _replica(0, 0, 0, 1, "exited"),
        _replica(1, 0, 0, 1, "exited"),
        _replica(0, 1, 1.5, 3.5, "exited"),
        _replica(1, 1, 1.5, 3.5, "exited"),
    ]
    never = _replica(1, 2, 0, None, "skipped")
    never.started_at = None
    row = _job_row(_spec("SPOT"), JobState.JOB_STATE_SUCCEEDED, end=T0 + timedelta(hours=4))
    intervals = job_intervals(row, [*replicas, never])
    assert len(intervals) == 4 and all(i.spot for i in intervals)
    cost = job_cost(row, [*replicas, never], now=T0 + timedelta(hours=10))
    spot_n1_4 = N1_4_SPOT_PRICE
    spot_n1_8 = Decimal(str(hourly_price("n1-standard-8", "NVIDIA_TESLA_T4", 2, spot=True)))
    assert cost["machineHours"] == 6.0
    assert cost["acceleratorHours"] == {"NVIDIA_TESLA_T4": 6.0}
    assert cost["costUsd"] == money(3 * spot_n1_4 + 3 * spot_n1_8)
    assert cost["onDemandEquivalentUsd"] == money(3 * N1_4_PRICE + 3 * N1_8_T4X2_PRICE)
    assert cost["spot"] is True and cost["running"] is False
    assert [(p["pool"], p["intervals"], p["machineHours"]) for p in cost["pools"]] == [
        ("workerpool0", 2, 3.0),
        ("workerpool1", 2, 3.0),
    ]


def test_running_job_replicas_count_up_to_now_and_stale_ends_are_ignored() -> None:
    row = _job_row(_spec(), JobState.JOB_STATE_RUNNING)
    # pool 1 was restarted in place: running again, its old ended_at is stale.
    replicas = [_replica(0, 0, 0, None, "running"), _replica(1, 0, 1, 0.5, "running")]
    cost = job_cost(row, replicas, now=T0 + timedelta(hours=2))
    assert cost["machineHours"] == 3.0 and cost["running"] is True
    assert cost["costUsd"] == money(2 * N1_4_PRICE + N1_8_T4X2_PRICE)


def test_replicas_left_without_an_end_stop_at_the_jobs_end() -> None:
    row = _job_row(_spec(), JobState.JOB_STATE_FAILED, end=T0 + timedelta(hours=1))
    cost = job_cost(row, [_replica(0, 0, 0, None, "lost")], now=T0 + timedelta(hours=50))
    assert cost["machineHours"] == 1.0 and cost["running"] is False


def test_a_job_on_a_persistent_resource_is_covered_by_the_resource() -> None:
    row = _job_row(
        _spec(persistentResourceId="warm-pool"), JobState.JOB_STATE_SUCCEEDED, T0 + timedelta(hours=1)
    )
    replicas = [_replica(0, 0, 0, 1, "exited")]
    cost = job_cost(row, replicas, now=T0 + timedelta(hours=1))
    resource = "projects/123456789012/locations/us-central1/persistentResources/warm-pool"
    assert cost["billedTo"] == resource
    assert cost["costUsd"] == 0 and cost["machineHours"] == 1.0
    assert cost["coveredUsd"] == money(N1_4_PRICE)


def test_by_resource_bills_every_running_hour_and_shows_what_jobs_used() -> None:
    name = "projects/1/locations/us-central1/persistentResources/warm"
    # Two n1-standard-4 machines provisioned for 10 h; one job used one machine for 2 h.
    resource = Usage(
        name,
        "warm",
        "RUNNING",
        (span(0, 10, group="pool-a"), span(0, None, group="pool-a")),
        kind="persistentResource",
    )
    job_on_it = Usage(
        "projects/1/locations/us-central1/customJobs/7",
        "on-warm",
        "JOB_STATE_SUCCEEDED",
        (span(3, 2, billed_to=name),),
    )
    rows, total = resource_rows([resource], [job_on_it], T0 + timedelta(hours=10))
    assert total.machine_hours == 20 and total.cost_usd == 20 * N1_4_PRICE
    # The same, as one span of two machines (how a resource pool's provisioned span is stored).
    pooled = Usage(name, "warm", "RUNNING", (span(0, None, group="pool-a", machines=2),))
    assert resource_rows([pooled], [job_on_it], T0 + timedelta(hours=10))[1].cost_usd == total.cost_usd
    assert rows[0]["usedMachineHours"] == 2.0 and rows[0]["jobs"] == 1
    assert rows[0]["groups"][0]["resourcePool"] == "pool-a"
    assert rows[0]["running"] is True
    assert report_wire("resource", rows, total, T0)["totals"]["costUsd"] == money(20 * N1_4_PRICE)


# ====================================================================== through a real server
# a3-highgpu-8g (8 x H100 built in) is pricey enough that a job of ~1 s costs well above the rounding step.
EXPENSIVE = {"machineType": "a3-highgpu-8g", "acceleratorType": "NVIDIA_H100_80GB", "acceleratorCount": 8}
PRICE = Decimal(str(hourly_price("a3-highgpu-8g", "NVIDIA_H100_80GB", 8)))
SPOT_PRICE = Decimal(str(hourly_price("a3-highgpu-8g", "NVIDIA_H100_80GB", 8, spot=True)))
LABELS = {"suite": "costs"}


def expensive_pool(code: str) -> dict[str, Any]:
    pool = python_pool(code)
    pool["machineSpec"] = dict(EXPENSIVE)
    return pool


def two_replica_job(name: str, spot: bool) -> dict[str, Any]:
    code = "import time; time.sleep(1)"
    body = job(expensive_pool(code), expensive_pool(code), name=name)
    body["labels"] = dict(LABELS)
    if spot:
        body["jobSpec"]["scheduling"] = {"strategy": "SPOT"}
    return body


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def status_of(client: httpx.Client, name: str) -> dict[str, Any]:
    response = client.get(f"/trainworks/v1/{name}/status")
    assert response.status_code == 200, response.text
    return response.json()


def run_cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    result = command_forks.run_cli(list(args), env=cli_env(server.url, PROJECT), timeout=120)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def finished(server: ServerProcess) -> dict[str, dict[str, Any]]:
    """An on-demand and a SPOT run of the same 2-replica job, finished, with their statuses."""
    with server.client() as client:
        names = {}
        for label, spot in (("on-demand", False), ("spot", True)):
            response = client.post(
                f"/v1/{server.parent}/customJobs", json=two_replica_job(f"cost-{label}", spot)
            )
            assert response.status_code == 200, response.text
            names[label] = response.json()["name"]
        out = {}
        for label, name in names.items():
            assert wait_job(client, name)["state"] == "JOB_STATE_SUCCEEDED"
            out[label] = status_of(client, name)
    return out


def test_a_finished_jobs_cost_is_its_machine_hours_times_the_price(
    finished: dict[str, dict[str, Any]],
) -> None:
    status = finished["on-demand"]
    cost = status["cost"]
    assert cost["currency"] == "USD" and cost["spot"] is False and cost["running"] is False
    started = [r for r in status["replicas"] if "startTime" in r]
    assert len(started) == 2
    exact_hours = sum(
        (Decimal((_ts(r["endTime"]) - _ts(r["startTime"])) // timedelta(microseconds=1)) for r in started),
        Decimal(0),
    ) / Decimal(3_600_000_000)
    assert Decimal(1) / 3600 < exact_hours < Decimal(30) / 3600  # each replica slept ~1 s
    assert cost["machineHours"] == float(exact_hours.quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP))
    assert cost["costUsd"] > 0
    assert cost["costUsd"] == money(exact_hours * PRICE)
    assert abs(cost["costUsd"] - cost["machineHours"] * float(PRICE)) <= 0.0001 + float(PRICE) * 5e-7
    assert cost["onDemandEquivalentUsd"] == cost["costUsd"]
    assert cost["acceleratorHours"] == {
        "NVIDIA_H100_80GB": float((exact_hours * 8).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP))
    }
    assert [p["pool"] for p in cost["pools"]] == ["workerpool0", "workerpool1"]
    assert all(p["hourlyPriceUsd"] == float(PRICE) for p in cost["pools"])


def test_the_spot_run_costs_less(finished: dict[str, dict[str, Any]]) -> None:
    spot, plain = finished["spot"]["cost"], finished["on-demand"]["cost"]
    assert spot["spot"] is True
    assert 0 < spot["costUsd"] < plain["costUsd"]
    assert spot["costUsd"] < spot["onDemandEquivalentUsd"]
    assert (
        abs(spot["costUsd"] - spot["machineHours"] * float(SPOT_PRICE)) <= 0.0001 + float(SPOT_PRICE) * 5e-7
    )
    assert all(p["hourlyPriceUsd"] == float(SPOT_PRICE) for p in spot["pools"])


def test_the_costs_endpoint_lists_both_jobs_with_totals(
    server: ServerProcess, finished: dict[str, dict[str, Any]]
) -> None:
    with server.client() as client:
        response = client.get(
            f"/trainworks/v1/{server.parent}/costs", params={"by": "job", "filter": "labels.suite=costs"}
        )
        assert response.status_code == 200, response.text
        report = response.json()
        assert report["by"] == "job" and report["currency"] == "USD"
        rows = {row["name"]: row for row in report["rows"]}
        assert set(rows) == {finished["on-demand"]["name"], finished["spot"]["name"]}
        for label in ("on-demand", "spot"):
            row, cost = rows[finished[label]["name"]], finished[label]["cost"]
            assert row["costUsd"] == cost["costUsd"] and row["machineHours"] == cost["machineHours"]
            assert row["displayName"] == f"cost-{label}" and row["state"] == "JOB_STATE_SUCCEEDED"
        totals = report["totals"]
        assert totals["count"] == 2
        # Totals round the exact sum; each row is rounded on its own (half a unit of 0.0001 each at most).
        slack = 0.00005 * (len(rows) + 1) + 1e-12
        assert abs(totals["costUsd"] - sum(r["costUsd"] for r in rows.values())) <= slack
        hours_slack = 0.0000005 * (len(rows) + 1) + 1e-12  # hours are rounded to 6 decimals the same way
        assert abs(totals["machineHours"] - sum(r["machineHours"] for r in rows.values())) <= hours_slack
        assert totals["costUsd"] < totals["onDemandEquivalentUsd"]

        by_number = client.get(
            f"/trainworks/v1/{finished['spot']['name'].split('/customJobs/')[0]}/costs",
            params={"filter": 'display_name="cost-spot"'},
        ).json()
        assert [row["name"] for row in by_number["rows"]] == [finished["spot"]["name"]]

        resources = client.get(f"/trainworks/v1/{server.parent}/costs", params={"by": "resource"}).json()
        assert resources["rows"] == [] and resources["totals"]["costUsd"] == 0

        bad = client.get(f"/trainworks/v1/{server.parent}/costs", params={"by": "team"})
        assert bad.status_code == 400 and "by" in bad.text
        bad = client.get(f"/trainworks/v1/{server.parent}/costs", params={"filter": "cost>1"})
        assert bad.status_code == 400 and "filter" in bad.text


def test_a_running_job_accrues_cost(server: ServerProcess) -> None:
    with server.client() as client:
        body = job(python_pool("import time; time.sleep(60)"), name="cost-running")
        name = client.post(f"/v1/{server.parent}/customJobs", json=body).json()["name"]
        try:
            first = wait_for(
                lambda: (s := status_of(client, name))["cost"]["machineHours"] > 0 and s,
                what="the running job to accrue machine-hours",
            )
            assert first["cost"]["running"] is True
            time.sleep(0.1)
            second = status_of(client, name)
            assert second["cost"]["machineHours"] > first["cost"]["machineHours"]
        finally:
            client.post(f"/v1/{name}:cancel", json={})
        cancelled = wait_job(client, name)
        assert cancelled["state"] == "JOB_STATE_CANCELLED"
        final = status_of(client, name)["cost"]
        assert final["running"] is False
        assert status_of(client, name)["cost"]["machineHours"] == final["machineHours"]  # it stopped


def test_the_cli_prints_costs_and_describe_shows_them(
    server: ServerProcess, finished: dict[str, dict[str, Any]]
) -> None:
    ids = {label: finished[label]["name"].rsplit("/", 1)[-1] for label in finished}
    common = ["--region", LOCATION, "--project", PROJECT, "--filter", "labels.suite=costs"]
    human = run_cli(server, "costs", *common).stdout
    for label, job_id in ids.items():
        line = next(line for line in human.splitlines() if line.startswith(job_id))
        assert f"cost-{label}" in line and "JOB_STATE_SUCCEEDED" in line
        assert f"${finished[label]['cost']['costUsd']:,.4f}" in line
        assert ("yes" in line.split()) == (label == "spot")
    total_line = next(line for line in human.splitlines() if line.startswith("TOTAL"))
    report = json.loads(run_cli(server, "costs", *common, "--by", "job", "--format", "json").stdout)
    assert f"${report['totals']['costUsd']:,.4f}" in total_line
    assert {row["name"] for row in report["rows"]} == {finished[label]["name"] for label in finished}

    empty = run_cli(server, "costs", "--region", LOCATION, "--project", PROJECT, "--by", "resource").stdout
    assert "Listed 0 persistent resources." in empty

    described = run_cli(
        server, "custom-jobs", "describe", finished["spot"]["name"], "--region", LOCATION
    ).stdout
    cost_line = next(line for line in described.splitlines() if line.startswith("Cost:"))
    assert f"${finished['spot']['cost']['costUsd']:,.4f}" in cost_line and "SPOT" in cost_line
    assert "NVIDIA_H100_80GB" in described
