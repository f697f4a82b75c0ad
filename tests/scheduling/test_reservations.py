"""Capacity reservations: the inventory's reservations, reservationAffinity in the planner and at create."""

from __future__ import annotations

import itertools
import random
from datetime import datetime
from typing import Any

import pytest

from trainworks.kinds.custom_jobs.service import parse_body
from trainworks.kinds.custom_jobs.validation import validate_custom_job
from trainworks.kinds.custom_jobs.wire import CustomJob
from trainworks.scheduling import (
    ANY_RESERVATION,
    NO_RESERVATION,
    RESERVATION_NAME_KEY,
    SPECIFIC_RESERVATION,
    Allocation,
    Demand,
    Inventory,
    InventoryError,
    JobRequest,
    default_inventory,
    never_fits,
    parse_inventory,
    parse_reservation_name,
    plan_admissions,
)
from trainworks.scheduling.job_requests import allocation, demands_of, job_request

A100 = "NVIDIA_TESLA_A100"
GPU = "a2-highgpu-1g"


# ------------------------------------------------------------------------------------------ builders
def inventory(
    reservations: dict[str, dict[str, Any]],
    zones: dict[str, dict[str, int]] | None = None,
    **region: Any,
) -> Inventory:
    zones = {"r-a": {GPU: 4, "n1-standard-4": 4}} if zones is None else zones
    doc = {
        "regions": {
            "r": {
                "zones": {z: {"machines": m} for z, m in zones.items()},
                "reservations": reservations,
                **region,
            }
        }
    }
    return parse_inventory(doc, source="test-inventory")


def res(count: int, zone: str = "r-a", machine: str = GPU, **fields: Any) -> dict[str, Any]:
    return {"zone": zone, "machine_type": machine, "count": count, **fields}


def gpu(count: int, affinity: str = NO_RESERVATION, reservation: str | None = None) -> Demand:
    return Demand(GPU, count, A100, 1, affinity, reservation)


def specific(count: int, name: str = "my-res", machine: str = GPU) -> Demand:
    if machine == GPU:
        return gpu(count, SPECIFIC_RESERVATION, name)
    return Demand(machine, count, None, 0, SPECIFIC_RESERVATION, name)


def anyres(count: int) -> Demand:
    return gpu(count, ANY_RESERVATION)


def job(job_id: int, *demands: Demand, project: str = "123", priority: int = 0) -> JobRequest:
    return JobRequest(job_id, project, "r", priority, (job_id,), demands)


def alloc(job_id: int, *demands: Demand, zone: str = "r-a", project: str = "123", **kw: Any) -> Allocation:
    return Allocation(job_id, project, "r", zone, demands, **kw)


def full(name: str = "my-res", zone: str = "r-a", project: str = "my-project") -> str:
    return f"projects/{project}/zones/{zone}/reservations/{name}"


# ------------------------------------------------------------------------------------------ inventory
def test_reservations_are_read_from_the_region() -> None:
    inv = inventory(
        {
            "my-res": res(2),
            "t4s": res(
                1,
                machine="n1-standard-8",
                accelerator_type="NVIDIA_TESLA_T4",
                accelerator_count=2,
                project=123456,
                specific_only=True,
            ),
        },
        zones={"r-a": {GPU: 4, "n1-standard-8": 1}},
    )
    mine, t4s = inv.regions["r"].reservations.values()
    assert (mine.name, mine.zone, mine.machine_type, mine.count) == ("my-res", "r-a", GPU, 2)
    # A built-in accelerator is filled in; absent project = any; not specific-only by default.
    assert (mine.accelerator_type, mine.accelerator_count, mine.project, mine.specific_only) == (
        A100,
        1,
        None,
        False,
    )
    assert (t4s.accelerator_type, t4s.accelerator_count, t4s.project, t4s.specific_only) == (
        "NVIDIA_TESLA_T4",
        2,
        "123456",
        True,
    )
    assert t4s.describe_shape() == "n1-standard-8 with 2 × NVIDIA_TESLA_T4"
    assert mine.full_name("p") == "projects/p/zones/r-a/reservations/my-res"


def test_reservations_in_an_elastic_region() -> None:
    doc = {"regions": {"local": {"elastic": True, "reservations": {"mine": res(2, zone="local-a")}}}}
    assert parse_inventory(doc).regions["local"].reservations["mine"].count == 2


@pytest.mark.parametrize(
    ("reservations", "path", "message"),
    [
        ([], "regions.r.reservations", "must be a mapping"),
        (
            {"my-res": {"zone": "r-a", "machine_type": GPU}},
            "regions.r.reservations.my-res",
            "missing key 'count'",
        ),
        ({"my-res": {**res(1), "cuont": 1}}, "regions.r.reservations.my-res", "did you mean count?"),
        ({"My_Res": res(1)}, "regions.r.reservations.My_Res", "invalid reservation name"),
        ({"my-res": res(1, zone="r-b")}, "regions.r.reservations.my-res.zone", "not a zone of this region"),
        ({"my-res": res(1, zone=7)}, "regions.r.reservations.my-res.zone", "must be a zone name"),
        ({"my-res": res(1, machine="a2-highgpu-lg")}, "my-res.machine_type", "unknown machine type"),
        ({"my-res": res(1, machine="n1-standard-8")}, "my-res.machine_type", "has no n1-standard-8 machines"),
        ({"my-res": res(0)}, "regions.r.reservations.my-res.count", "at least 1 machine"),
        ({"my-res": res(-1)}, "regions.r.reservations.my-res.count", "must be >= 0"),
        ({"my-res": res(True)}, "regions.r.reservations.my-res.count", "whole number"),
        ({"my-res": res(5)}, "regions.r.reservations.my-res.count", "the zone has only 4"),
        (
            {"a": res(3), "b": res(2)},
            "regions.r.reservations.b.count",
            "hold 5 × a2-highgpu-1g in zone r-a (with 3 held by earlier reservations), but the zone has only",
        ),
        (
            {"my-res": res(1, accelerator_type="NVIDIA_TESLA_A1000")},
            "my-res.accelerator_type",
            "did you mean",
        ),
        ({"my-res": res(1, accelerator_type="NVIDIA_L4")}, "my-res.accelerator_type", "requires"),
        ({"my-res": res(1, accelerator_count=2)}, "my-res.accelerator_count", "accelerator_count 1"),
        ({"my-res": res(1, accelerator_count="1")}, "my-res.accelerator_count", "whole number"),
        ({"my-res": res(1, project="Not A Project")}, "my-res.project", "project ID or number"),
        ({"my-res": res(1, project=["p"])}, "my-res.project", "project ID or number"),
        ({"my-res": res(1, specific_only="yes")}, "my-res.specific_only", "must be true or false"),
    ],
)
def test_bad_reservations_are_rejected_with_their_path(reservations: Any, path: str, message: str) -> None:
    with pytest.raises(InventoryError) as info:
        inventory(reservations)
    text = str(info.value)
    assert text.startswith("test-inventory: regions.r.reservations"), text
    assert path in text and message in text, text


def test_an_n1_reservation_needs_an_attachable_accelerator() -> None:
    with pytest.raises(InventoryError, match=r"t4s\.accelerator_type: .*NVIDIA_TESLA_A100"):
        inventory(
            {"t4s": res(1, machine="n1-standard-4", accelerator_type=A100, accelerator_count=1)},
        )


def test_reservation_names_on_the_wire() -> None:
    assert parse_reservation_name("my-res") == (None, None, "my-res")
    assert parse_reservation_name(full()) == ("my-project", "r-a", "my-res")
    assert parse_reservation_name("projects/123/reservations/my-res") == ("123", None, "my-res")
    for bad in (
        "",
        "My-Res",
        "my-res-",
        "zones/r-a/reservations/x",
        "projects/p/zones/r-a/reservations/",
        "a/b",
    ):
        assert parse_reservation_name(bad) is None, bad


def test_project_ids_of_reservations_are_resolved_to_numbers() -> None:
    inv = inventory({"mine": res(1, project="my-project"), "num": res(1, project=42), "any": res(1)})
    resolved = inv.with_project_numbers(lambda project_id: {"my-project": "777"}[project_id])
    projects = {name: r.project for name, r in resolved.regions["r"].reservations.items()}
    assert projects == {"mine": "777", "num": "42", "any": None}
    assert inv.regions["r"].reservations["mine"].project == "my-project"  # the original is unchanged


# ------------------------------------------------------------------------------------------ NO
def test_no_reservation_never_takes_reserved_capacity() -> None:
    inv = inventory({"my-res": res(3)})  # 4 a2 in r-a: 3 reserved, 1 general
    decision = plan_admissions(inv, [], [job(1, gpu(1)), job(2, gpu(1))])
    assert decision.admitted == {1: "r-a"}
    assert decision.reservations == {}
    reason = decision.waiting[2]
    assert reason.startswith("waiting for 1 × a2-highgpu-1g in r: 0 free"), reason
    assert "3 × a2-highgpu-1g in reservation my-res are free, but not for this job" in reason


def test_an_unset_or_unspecified_affinity_acts_as_no_reservation() -> None:
    inv = inventory({"my-res": res(4)})  # no general a2 at all
    for demand in (Demand(GPU, 1, A100, 1), Demand(GPU, 1, A100, 1, "TYPE_UNSPECIFIED")):
        message = never_fits(inv, job(1, demand))
        assert message is not None
        assert "no zone of r has any outside reservations, which hold 4 (my-res)" in message


def test_no_reservation_job_that_needs_more_than_the_general_capacity_never_fits() -> None:
    inv = inventory({"my-res": res(3)})
    message = never_fits(inv, job(1, gpu(2)))
    assert message == (
        "needs 2 × a2-highgpu-1g in one zone, but the largest zone of r has 1 (r-a) outside reservations, "
        "which hold 3 (my-res) for jobs that consume them"
    )


# ------------------------------------------------------------------------------------------ ANY
def test_any_reservation_takes_matching_reservations_first_then_general_capacity() -> None:
    inv = inventory({"my-res": res(2)})  # 2 reserved, 2 general
    decision = plan_admissions(
        inv, [], [job(1, anyres(1)), job(2, anyres(2)), job(3, gpu(1)), job(4, anyres(1))]
    )
    assert decision.admitted == {1: "r-a", 2: "r-a", 3: "r-a"}
    # Job 2 splits: the reservation's last machine, then one of the general ones.
    assert decision.reservations == {1: (("my-res", 1),), 2: (("my-res", 1),)}
    reason = decision.waiting[4]
    assert "1 × a2-highgpu-1g in r, reservations first: 0 free in reservation my-res and 0 free" in reason


def test_any_reservation_falls_back_to_general_capacity_when_the_reservation_is_full() -> None:
    inv = inventory({"my-res": res(2)})
    holding = [alloc(1, specific(2))]
    decision = plan_admissions(inv, holding, [job(2, anyres(2))])
    assert decision.admitted == {2: "r-a"}
    assert 2 not in decision.reservations


def test_any_reservation_prefers_the_zone_with_a_matching_reservation() -> None:
    zones = {"r-a": {GPU: 4}, "r-b": {GPU: 4}}
    inv = inventory({"in-b": res(2, zone="r-b")}, zones=zones)
    decision = plan_admissions(inv, [], [job(1, anyres(2)), job(2, gpu(2))])
    assert decision.admitted == {1: "r-b", 2: "r-b"}  # job 2 best-fits the 2 general a2 left in r-b
    assert decision.reservations == {1: (("in-b", 2),)}


def test_any_reservation_skips_specific_only_and_other_projects_reservations() -> None:
    inv = inventory(
        {
            "only-named": res(1, specific_only=True),
            "theirs": res(1, project="999"),
            "ours": res(1, project="123"),
        }
    )  # 4 a2: 3 reserved, 1 general
    decision = plan_admissions(inv, [], [job(1, anyres(2)), job(2, anyres(1))])
    assert decision.admitted == {1: "r-a"}
    assert decision.reservations == {1: (("ours", 1),)}
    assert "reservation ours" in decision.waiting[2]
    # The other project's job may use its own reservation.
    theirs = plan_admissions(inv, [], [job(3, anyres(1), project="999")])
    assert theirs.reservations == {3: (("theirs", 1),)}


def test_any_reservation_needs_the_exact_machine_shape() -> None:
    zones = {"r-a": {"n1-standard-8": 4}}
    inv = inventory(
        {"t4s": res(2, machine="n1-standard-8", accelerator_type="NVIDIA_TESLA_T4", accelerator_count=2)},
        zones=zones,
    )
    one_t4 = Demand("n1-standard-8", 2, "NVIDIA_TESLA_T4", 1, ANY_RESERVATION)
    two_t4 = Demand("n1-standard-8", 2, "NVIDIA_TESLA_T4", 2, ANY_RESERVATION)
    decision = plan_admissions(inv, [], [job(1, one_t4), job(2, two_t4)])
    assert decision.admitted == {1: "r-a", 2: "r-a"}
    assert decision.reservations == {2: (("t4s", 2),)}


def test_any_reservation_never_fits_counts_the_reservations_it_may_use() -> None:
    inv = inventory({"my-res": res(3)})
    assert never_fits(inv, job(1, anyres(4))) is None
    message = never_fits(inv, job(1, anyres(5)))
    assert message is not None
    assert "needs 2 × a2-highgpu-1g outside reservations in zone r-a, which has 1" in message
    assert "besides 3 × a2-highgpu-1g from the reservations it may consume" in message


# ------------------------------------------------------------------------------------------ SPECIFIC
@pytest.mark.parametrize("name", ["my-res", full(zone="r-b"), "projects/123/reservations/my-res"])
def test_specific_reservation_runs_in_its_reservation(name: str) -> None:
    zones = {"r-a": {GPU: 2}, "r-b": {GPU: 4}}
    inv = inventory({"my-res": res(2, zone="r-b")}, zones=zones)
    decision = plan_admissions(inv, [], [job(1, specific(2, name))])
    assert decision.admitted == {1: "r-b"}
    assert decision.reservations == {1: (("my-res", 2),)}


def test_specific_reservation_waits_for_its_reservation_even_when_general_capacity_is_free() -> None:
    inv = inventory({"my-res": res(2)})  # 2 reserved, 2 general and idle
    decision = plan_admissions(inv, [alloc(1, specific(1))], [job(2, specific(2))])
    assert decision.admitted == {}
    assert decision.waiting[2] == "waiting for 2 × a2-highgpu-1g in reservation my-res: 1 free"


def test_specific_reservation_jobs_share_their_reservation_in_queue_order() -> None:
    inv = inventory({"my-res": res(2)})
    decision = plan_admissions(inv, [], [job(1, specific(1)), job(2, specific(1)), job(3, specific(1))])
    assert decision.admitted == {1: "r-a", 2: "r-a"}
    assert decision.waiting[3] == "waiting for 1 × a2-highgpu-1g in reservation my-res: 0 free"


def test_a_blocked_specific_job_holds_its_reservation_but_not_general_capacity() -> None:
    inv = inventory({"my-res": res(3)})  # 3 reserved, 1 general
    holding = [alloc(1, specific(2))]
    queued = [job(2, specific(3)), job(3, specific(1)), job(4, gpu(1)), job(5, anyres(1))]
    decision = plan_admissions(inv, holding, queued)
    # Job 3 would fit in the reservation's last machine, but that is held for job 2 (conservative backfill);
    # job 4 takes the general machine; job 5 (ANY) finds the reservation held and general capacity gone.
    assert decision.admitted == {4: "r-a"}
    assert decision.waiting[2] == "waiting for 3 × a2-highgpu-1g in reservation my-res: 1 free"
    behind = (
        "waiting behind higher-priority or earlier jobs: 1 × a2-highgpu-1g in reservation my-res in r "
        "is reserved for them"
    )
    assert decision.waiting[3] == behind
    assert decision.waiting[5] == behind


def test_an_any_job_short_of_machines_says_what_the_reservations_and_general_capacity_have() -> None:
    inv = inventory({"my-res": res(2)})  # 2 reserved, 2 general
    holding = [alloc(1, gpu(1))]
    decision = plan_admissions(inv, holding, [job(2, specific(3)), job(3, anyres(4))])
    assert (
        decision.waiting[2]
        == "can never be admitted: needs 3 × a2-highgpu-1g from reservation my-res, which holds 2"
    )
    assert decision.waiting[3] == (
        "waiting for 4 × a2-highgpu-1g in r, reservations first: 2 free in reservation my-res "
        "and 1 free outside reservations"
    )
    blocked = plan_admissions(inv, holding, [job(2, specific(2), priority=1), job(3, anyres(3))])
    assert blocked.admitted == {2: "r-a"}
    assert blocked.waiting[3] == (
        "waiting for 3 × a2-highgpu-1g in r, reservations first: 0 free in reservation my-res "
        "and 1 free outside reservations"
    )


def test_a_gang_with_a_cpu_chief_and_reserved_workers_lands_in_the_reservations_zone() -> None:
    zones = {"r-a": {"n1-standard-4": 4}, "r-b": {"n1-standard-4": 1, GPU: 2}}
    inv = inventory({"my-res": res(2, zone="r-b")}, zones=zones)
    chief = Demand("n1-standard-4", 1)
    decision = plan_admissions(inv, [], [job(1, chief, specific(2)), job(2, chief, specific(1))])
    assert decision.admitted == {1: "r-b"}
    assert decision.reservations == {1: (("my-res", 2),)}
    # Job 2 is a gang too: its chief could run in r-a, but its reserved worker can only run in r-b.
    assert decision.waiting[2].startswith("waiting for 1 × a2-highgpu-1g in reservation my-res: 0 free")
    assert "1 × n1-standard-4 outside reservations in r (r-b): 0 free" in decision.waiting[2]


@pytest.mark.parametrize(
    ("demands", "message"),
    [
        ([specific(1, "nope")], "reservation 'nope' does not exist in r (reservations: my-res, other)"),
        ([specific(1, full(zone="r-b"))], "reservation my-res is in zone r-a, not r-b"),
        (
            [specific(1, machine="n1-standard-4")],
            "a pool needs n1-standard-4 but reservation my-res holds a2-highgpu-1g machines",
        ),
        ([specific(3)], "needs 3 × a2-highgpu-1g from reservation my-res, which holds 2"),
        ([specific(2), specific(1)], "needs 3 × a2-highgpu-1g from reservation my-res, which holds 2"),
        ([specific(1, "other")], "reservation other may only be used by project 999, not 123"),
        ([specific(1, "bad/name")], "'bad/name' is not a reservation name"),
    ],
)
def test_specific_reservation_that_can_never_be_satisfied(demands: list[Demand], message: str) -> None:
    inv = inventory({"my-res": res(2), "other": res(1, project="999")})
    assert never_fits(inv, job(1, *demands)) == message
    decision = plan_admissions(inv, [], [job(1, *demands)])
    assert decision.waiting[1] == f"can never be admitted: {message}"


def test_pools_naming_reservations_in_different_zones_never_fit() -> None:
    zones = {"r-a": {GPU: 2}, "r-b": {GPU: 2}}
    inv = inventory({"in-a": res(1), "in-b": res(1, zone="r-b")}, zones=zones)
    message = never_fits(inv, job(1, specific(1, "in-a"), specific(1, "in-b")))
    assert message == (
        "its pools name reservations in different zones (in-a (r-a), in-b (r-b)), but a job runs in one zone"
    )


def test_specific_reservation_on_the_default_elastic_inventory_runs_on_elastic_capacity() -> None:
    inv = default_inventory()
    request = JobRequest(1, "123", "us-central1", 0, (1,), (specific(8, full(zone="us-central1-a")),))
    assert never_fits(inv, request) is None
    decision = plan_admissions(inv, [], [request])
    assert decision.admitted == {1: "local-a"}
    assert decision.reservations == {}


def test_elastic_zone_reservations_are_limited_to_their_count() -> None:
    doc = {"regions": {"r": {"elastic": True, "reservations": {"my-res": res(2, zone="r-a")}}}}
    inv = parse_inventory(doc)
    decision = plan_admissions(inv, [], [job(1, specific(2)), job(2, specific(1)), job(3, gpu(50))])
    assert decision.admitted == {1: "r-a", 3: "r-a"}
    assert decision.waiting[2] == "waiting for 1 × a2-highgpu-1g in reservation my-res: 0 free"


# ------------------------------------------------------------------------------------------ holding capacity
def test_holding_allocations_are_charged_to_their_reservations() -> None:
    inv = inventory({"my-res": res(2)})  # 2 reserved, 2 general
    # A SPECIFIC job and an ANY job hold the whole reservation between them, so the general machines are
    # still both free for NO_RESERVATION jobs, and nothing is left for another SPECIFIC one.
    holding = [alloc(1, specific(1)), alloc(2, anyres(1))]
    decision = plan_admissions(inv, holding, [job(3, gpu(2)), job(4, specific(1))])
    assert decision.admitted == {3: "r-a"}
    assert decision.waiting[4] == "waiting for 1 × a2-highgpu-1g in reservation my-res: 0 free"


def test_an_any_allocation_beyond_its_reservation_is_charged_to_general_capacity() -> None:
    inv = inventory({"my-res": res(2)})
    holding = [alloc(1, anyres(3))]  # 2 from the reservation, 1 general
    decision = plan_admissions(inv, holding, [job(2, gpu(1)), job(3, gpu(1))])
    assert decision.admitted == {2: "r-a"}
    assert "0 free" in decision.waiting[3]


def test_specific_allocations_are_charged_before_any_allocations() -> None:
    inv = inventory({"my-res": res(2)})
    # Whatever the order, the SPECIFIC job keeps its reservation machine; the ANY job gets the other one and
    # a general one, which leaves one general machine.
    for holding in itertools.permutations([alloc(1, anyres(2)), alloc(2, specific(1))]):
        decision = plan_admissions(inv, list(holding), [job(3, gpu(1)), job(4, gpu(1))])
        assert decision.admitted == {3: "r-a"}, holding
        assert "0 free" in decision.waiting[4]


def test_a_recorded_allocation_is_taken_as_recorded() -> None:
    inv = inventory({"my-res": res(2)})
    # Recorded: the ANY job took only general machines when it started; re-derived it would take the
    # reservation instead.
    recorded = alloc(1, anyres(2), reservations=())
    decision = plan_admissions(inv, [recorded], [job(2, specific(2)), job(3, gpu(1))])
    assert decision.admitted == {2: "r-a"}
    assert "0 free" in decision.waiting[3]
    derived = plan_admissions(inv, [alloc(1, anyres(2))], [job(2, specific(2)), job(3, gpu(1))])
    assert derived.admitted == {3: "r-a"}


def test_the_decision_does_not_depend_on_the_order_of_the_arguments() -> None:
    inv = inventory({"my-res": res(2), "ours": res(1, project="123")}, zones={"r-a": {GPU: 6}})
    holding = [alloc(1, anyres(1)), alloc(2, specific(1)), alloc(3, gpu(1)), alloc(4, anyres(1), project="9")]
    queued = [job(5, anyres(2)), job(6, specific(1)), job(7, gpu(1)), job(8, specific(1, "ours"))]
    first = plan_admissions(inv, holding, queued)
    for h, q in zip(itertools.permutations(holding), itertools.permutations(queued), strict=False):
        other = plan_admissions(inv, list(h), list(q))
        assert (dict(other.admitted), dict(other.waiting), dict(other.reservations)) == (
            dict(first.admitted),
            dict(first.waiting),
            dict(first.reservations),
        )


# ------------------------------------------------------------------------------------------ stored jobs
def spec_with(affinity: dict[str, Any] | None, machine: str = GPU) -> dict[str, Any]:
    machine_spec: dict[str, Any] = {"machineType": machine, "acceleratorType": A100, "acceleratorCount": 1}
    if affinity is not None:
        machine_spec["reservationAffinity"] = affinity
    return {"jobSpec": {"workerPoolSpecs": [{"machineSpec": machine_spec, "replicaCount": "2"}]}}


def test_demands_carry_the_affinity_of_the_stored_spec() -> None:
    chosen = {
        "reservationAffinityType": "SPECIFIC_RESERVATION",
        "key": RESERVATION_NAME_KEY,
        "values": [full()],
    }
    (demand,) = demands_of(spec_with(chosen)["jobSpec"])
    assert (demand.reservation_affinity, demand.reservation, demand.count) == (
        SPECIFIC_RESERVATION,
        full(),
        2,
    )
    (demand,) = demands_of(spec_with({"reservationAffinityType": "ANY_RESERVATION"})["jobSpec"])
    assert (demand.reservation_affinity, demand.reservation) == (ANY_RESERVATION, None)
    (demand,) = demands_of(spec_with({"reservationAffinityType": 2})["jobSpec"])
    assert demand.reservation_affinity == ANY_RESERVATION
    for unset in (None, {}, {"reservationAffinityType": "TYPE_UNSPECIFIED"}):
        (demand,) = demands_of(spec_with(unset)["jobSpec"])
        assert demand.reservation_affinity == NO_RESERVATION


def test_allocations_of_stored_jobs_rederive_their_reservations() -> None:
    inv = inventory({"my-res": res(2)})
    chosen = {
        "reservationAffinityType": "SPECIFIC_RESERVATION",
        "key": RESERVATION_NAME_KEY,
        "values": [full()],
    }
    holding = allocation(1, "123", "r", "r-a", spec_with(chosen))
    assert holding.reservations is None
    request = job_request(2, "123", "r", spec_with(chosen), {}, created=datetime(2025, 1, 1))
    decision = plan_admissions(inv, [holding], [request])
    assert decision.waiting[2] == "waiting for 2 × a2-highgpu-1g in reservation my-res: 0 free"
    recorded = allocation(1, "123", "r", "r-a", spec_with(chosen), reservations=(("my-res", 2),))
    assert recorded.reservations == (("my-res", 2),)


# ------------------------------------------------------------------------------------------ create-time rules
def violations(affinity: dict[str, Any]) -> list[tuple[str, str]]:
    body = {
        "displayName": "j",
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {
                        "machineType": GPU,
                        "acceleratorType": A100,
                        "acceleratorCount": 1,
                        "reservationAffinity": affinity,
                    },
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": "python:3.11"},
                }
            ]
        },
    }
    return [(v.field, v.description) for v in validate_custom_job(parse_body(CustomJob, body))]


WHERE = "job_spec.worker_pool_specs[0].machine_spec.reservation_affinity"


@pytest.mark.parametrize(
    "affinity",
    [
        {"reservationAffinityType": "NO_RESERVATION"},
        {"reservationAffinityType": "ANY_RESERVATION"},
        {"reservationAffinityType": "SPECIFIC_RESERVATION", "key": RESERVATION_NAME_KEY, "values": [full()]},
        {
            "reservationAffinityType": "SPECIFIC_RESERVATION",
            "key": RESERVATION_NAME_KEY,
            "values": ["my-res"],
        },
    ],
)
def test_valid_reservation_affinities(affinity: dict[str, Any]) -> None:
    assert violations(affinity) == []


@pytest.mark.parametrize(
    ("affinity", "field", "words"),
    [
        ({}, f"{WHERE}.reservation_affinity_type", "Required field is not set."),
        ({"key": RESERVATION_NAME_KEY, "values": [full()]}, f"{WHERE}.reservation_affinity_type", "Required"),
        (
            {"reservationAffinityType": "SPECIFIC_RESERVATION", "values": [full()]},
            f"{WHERE}.key",
            "requires the key",
        ),
        (
            {"reservationAffinityType": "SPECIFIC_RESERVATION", "key": "other", "values": [full()]},
            f"{WHERE}.key",
            "got 'other'",
        ),
        (
            {"reservationAffinityType": "SPECIFIC_RESERVATION", "key": RESERVATION_NAME_KEY},
            f"{WHERE}.values",
            "exactly one value",
        ),
        (
            {
                "reservationAffinityType": "SPECIFIC_RESERVATION",
                "key": RESERVATION_NAME_KEY,
                "values": [full(), full("b")],
            },
            f"{WHERE}.values",
            "got 2",
        ),
        (
            {
                "reservationAffinityType": "SPECIFIC_RESERVATION",
                "key": RESERVATION_NAME_KEY,
                "values": ["a/b"],
            },
            f"{WHERE}.values[0]",
            "is not a reservation name",
        ),
        (
            {"reservationAffinityType": "ANY_RESERVATION", "key": RESERVATION_NAME_KEY},
            f"{WHERE}.key",
            "must not be set when reservation_affinity_type is ANY_RESERVATION",
        ),
        (
            {"reservationAffinityType": "NO_RESERVATION", "values": [full()]},
            f"{WHERE}.values",
            "must not be set when reservation_affinity_type is NO_RESERVATION",
        ),
    ],
)
def test_invalid_reservation_affinities(affinity: dict[str, Any], field: str, words: str) -> None:
    found = violations(affinity)
    assert [f for f, _ in found] == [field], found
    assert words in found[0][1]


def test_random_workloads_never_overcommit_zones_or_reservations() -> None:
    rng = random.Random(7)
    zones = {"r-a": {GPU: 6, "n1-standard-4": 4}, "r-b": {GPU: 4}}
    inv = inventory(
        {"a1": res(2), "a2": res(2, project="1"), "b1": res(3, zone="r-b", specific_only=True)}, zones=zones
    )
    reservations = inv.regions["r"].reservations
    general = {("r-a", GPU): 2, ("r-a", "n1-standard-4"): 4, ("r-b", GPU): 1}
    holding: dict[int, Allocation] = {}
    queued: dict[int, JobRequest] = {}
    admitted = 0
    ids = itertools.count(1)
    for step in range(300):
        for _ in range(rng.randint(0, 3)):
            job_id = next(ids)
            kind = rng.choice([NO_RESERVATION, ANY_RESERVATION, SPECIFIC_RESERVATION])
            name = rng.choice(list(reservations)) if kind == SPECIFIC_RESERVATION else None
            demands = [gpu(rng.randint(1, 2), kind, name)]
            if rng.random() < 0.3:
                demands.append(Demand("n1-standard-4", 1))
            queued[job_id] = job(job_id, *demands, project=rng.choice(["1", "2"]))
        for job_id in [j for j in holding if rng.random() < 0.2]:
            del holding[job_id]
        decision = plan_admissions(inv, list(holding.values()), list(queued.values()))
        admitted += len(decision.admitted)
        for job_id, zone in decision.admitted.items():
            request = queued.pop(job_id)
            holding[job_id] = Allocation(job_id, request.project, "r", zone, request.demands)
        used: dict[tuple[str, str], int] = {}
        no_res: dict[tuple[str, str], int] = {}
        named: dict[str, int] = {}
        for held in holding.values():
            for demand in held.demands:
                key = (held.zone, demand.machine_type)
                used[key] = used.get(key, 0) + demand.count
                if demand.reservation_affinity == NO_RESERVATION:
                    no_res[key] = no_res.get(key, 0) + demand.count
                elif demand.reservation_affinity == SPECIFIC_RESERVATION:
                    assert held.zone == reservations[demand.reservation or ""].zone
                    named[demand.reservation or ""] = named.get(demand.reservation or "", 0) + demand.count
        for (zone, machine), n in used.items():
            assert n <= zones[zone][machine], (step, zone, machine)
        for key, n in no_res.items():
            assert n <= general[key], (step, key)
        for name, n in named.items():
            assert n <= reservations[name].count, (step, name)
    assert admitted > 100
