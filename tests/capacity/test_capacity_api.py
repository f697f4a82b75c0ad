"""The capacity preflight: the pure report over inventories and allocations, and the extension endpoint on a
real server started with ``--inventory``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.jobs import job, python_pool
from tests.support.server import ServerProcess, inventory_server, wait_for, wait_job
from trainworks.client import ApiError, TrainworksClient
from trainworks.scheduling.admission import (
    SPECIFIC_RESERVATION,
    Allocation,
    Demand,
    JobRequest,
    plan_admissions,
)
from trainworks.scheduling.capacity_report import (
    LIMITED_BY_CAPACITY,
    LIMITED_BY_NOT_SERVED,
    LIMITED_BY_QUOTA,
    LIMITED_BY_STOCKOUT,
    ReplicaShape,
    capacity_report,
)
from trainworks.scheduling.inventory import default_inventory, parse_inventory

N1 = ReplicaShape("n1-standard-4")


def held(job_id: int, project: str, location: str, zone: str, *demands: Demand) -> Allocation:
    return Allocation(job_id, project, location, zone, tuple(demands))


# ============================================================================== the pure report
def test_elastic_default_region_is_unlimited() -> None:
    report = capacity_report(default_inventory(), [], "123", "asia-east1", N1)
    assert report.served and report.region == "local" and not report.stockout
    assert report.cpu_quota is not None and report.cpu_quota.limit is None and report.cpu_quota.free is None
    assert report.zones[0].name == "local-a" and report.zones[0].machines is None
    assert report.shape is not None
    assert (report.shape.quota_replicas, report.shape.capacity_replicas, report.shape.max_replicas) == (
        None,
        None,
        None,
    )
    assert report.shape.limited_by is None


def test_unserved_location_reports_zero() -> None:
    inventory = parse_inventory({"regions": {"us-central1": {"elastic": True}}})
    report = capacity_report(inventory, [], "123", "europe-west4", N1)
    assert not report.served and report.region is None and report.zones == ()
    assert report.shape is not None
    assert report.shape.max_replicas == 0 and report.shape.limited_by == LIMITED_BY_NOT_SERVED


def test_stockout_reports_zero_but_keeps_the_counts() -> None:
    inventory = parse_inventory(
        {"regions": {"r": {"stockout": True, "zones": {"r-a": {"machines": {"n1-standard-4": 4}}}}}}
    )
    report = capacity_report(inventory, [], "123", "r", N1)
    assert report.stockout and report.shape is not None
    assert report.shape.capacity_replicas == 0 and report.shape.max_replicas == 0
    assert report.shape.quota_replicas is None
    assert report.shape.limited_by == LIMITED_BY_STOCKOUT
    machines = report.zones[0].machines
    assert machines is not None and machines["n1-standard-4"].free == 4


def test_cpu_quota_counts_only_the_projects_own_jobs_but_machines_count_every_job() -> None:
    inventory = parse_inventory(
        {"regions": {"r": {"cpu_quota": 8, "zones": {"r-a": {"machines": {"n1-standard-4": 5}}}}}}
    )
    assert capacity_report(inventory, [], "1", "r", N1).shape.quota_replicas == 2  # type: ignore[union-attr]
    holding = [
        held(1, "1", "r", "r-a", Demand("n1-standard-4", 1)),
        held(2, "2", "r", "r-a", Demand("n1-standard-4", 2)),
    ]
    report = capacity_report(inventory, holding, "1", "r", N1)
    assert report.cpu_quota is not None
    assert (report.cpu_quota.limit, report.cpu_quota.used, report.cpu_quota.free) == (8, 4, 4)
    assert report.shape is not None
    assert report.shape.vcpus == 4
    assert report.shape.quota_replicas == 1 and report.shape.capacity_replicas == 2
    assert report.shape.max_replicas == 1 and report.shape.limited_by == LIMITED_BY_QUOTA


def test_accelerator_quota_divides_by_the_accelerators_per_replica() -> None:
    inventory = parse_inventory(
        {
            "regions": {
                "r": {
                    "accelerator_quotas": {"NVIDIA_TESLA_T4": 5, "NVIDIA_TESLA_A100": 4},
                    "zones": {"r-a": {"machines": {"n1-standard-8": 6, "a2-highgpu-2g": 3}}},
                }
            }
        }
    )
    holding = [held(1, "1", "r", "r-a", Demand("n1-standard-8", 1, "NVIDIA_TESLA_T4", 1))]
    t4 = capacity_report(inventory, holding, "1", "r", ReplicaShape("n1-standard-8", "NVIDIA_TESLA_T4", 2))
    assert t4.accelerator_quotas["NVIDIA_TESLA_T4"].used == 1
    assert t4.accelerator_quotas["NVIDIA_TESLA_T4"].free == 4
    assert t4.shape is not None and t4.shape.accelerators == {"NVIDIA_TESLA_T4": 2}
    assert t4.shape.quota_replicas == 2 and t4.shape.capacity_replicas == 5 and t4.shape.max_replicas == 2
    a2 = capacity_report(inventory, holding, "1", "r", ReplicaShape("a2-highgpu-2g"))  # built in: 2 × A100
    assert a2.shape is not None and a2.shape.quota_replicas == 2 and a2.shape.capacity_replicas == 3
    # Another project's accelerators are its own quota's business.
    other = capacity_report(inventory, holding, "2", "r", ReplicaShape("n1-standard-8", "NVIDIA_TESLA_T4", 2))
    assert other.shape is not None and other.shape.quota_replicas == 2
    assert other.accelerator_quotas["NVIDIA_TESLA_T4"].used == 0


def test_a_job_runs_in_one_zone_so_capacity_is_the_best_zone_not_the_sum() -> None:
    inventory = parse_inventory(
        {
            "regions": {
                "r": {
                    "zones": {
                        "r-a": {"machines": {"n1-standard-4": 2}},
                        "r-b": {"machines": {"n1-standard-4": 4}},
                    }
                }
            }
        }
    )
    holding = [held(1, "9", "r", "r-b", Demand("n1-standard-4", 1))]
    report = capacity_report(inventory, holding, "1", "r", N1)
    assert report.shape is not None
    assert report.shape.capacity_replicas == 3 and report.shape.limited_by == LIMITED_BY_CAPACITY
    missing = capacity_report(inventory, holding, "1", "r", ReplicaShape("n1-highmem-8"))
    assert missing.shape is not None and missing.shape.capacity_replicas == 0


def test_reserved_machines_are_not_free_for_a_job_without_reservation_affinity() -> None:
    inventory = parse_inventory(
        {
            "regions": {
                "r": {
                    "zones": {"r-a": {"machines": {"n1-standard-4": 5}}},
                    "reservations": {"res": {"zone": "r-a", "machine_type": "n1-standard-4", "count": 2}},
                }
            }
        }
    )
    specific = Demand(
        "n1-standard-4", 2, reservation_affinity=SPECIFIC_RESERVATION, reservation="res"
    )  # takes the reservation, not general capacity
    holding = [
        held(1, "1", "r", "r-a", specific),
        held(2, "1", "r", "r-a", Demand("n1-standard-4", 1)),
    ]
    report = capacity_report(inventory, holding, "1", "r", N1)
    machines = report.zones[0].machines
    assert machines is not None
    count = machines["n1-standard-4"]
    assert (count.total, count.reserved, count.free) == (5, 2, 2)
    assert report.shape is not None and report.shape.capacity_replicas == 2


def test_quota_is_per_region_across_the_locations_it_serves() -> None:
    inventory = parse_inventory(
        {"regions": {"shared": {"cpu_quota": 12, "elastic": True}}, "default": "shared"}
    )
    holding = [held(1, "1", "europe-west4", "shared-a", Demand("n1-standard-4", 2))]
    report = capacity_report(inventory, holding, "1", "asia-east1", N1)
    assert report.region == "shared" and report.cpu_quota is not None and report.cpu_quota.used == 8
    assert (
        report.shape is not None
        and report.shape.quota_replicas == 1
        and report.shape.capacity_replicas is None
    )


@pytest.mark.parametrize("project", ["1", "2"])
def test_max_replicas_is_exactly_what_admission_would_admit(project: str) -> None:
    inventory = parse_inventory(
        {
            "regions": {
                "r": {
                    "cpu_quota": 40,
                    "zones": {
                        "r-a": {"machines": {"n1-standard-4": 6, "n1-standard-8": 2}},
                        "r-b": {"machines": {"n1-standard-4": 3}},
                    },
                    "reservations": {"res": {"zone": "r-a", "machine_type": "n1-standard-4", "count": 1}},
                }
            }
        }
    )
    holding = [
        held(1, "1", "r", "r-a", Demand("n1-standard-4", 2), Demand("n1-standard-8", 1)),
        held(2, "2", "r", "r-b", Demand("n1-standard-4", 1)),
    ]
    report = capacity_report(inventory, holding, project, "r", N1)
    assert report.shape is not None and report.shape.max_replicas is not None
    most = report.shape.max_replicas
    assert most > 0

    def admitted(n: int) -> bool:
        request = JobRequest(99, project, "r", 0, (), (Demand("n1-standard-4", n),))
        return 99 in plan_admissions(inventory, holding, [request]).admitted

    assert admitted(most) and not admitted(most + 1)


def test_unknown_machine_type_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="n1-standard-3"):
        capacity_report(default_inventory(), [], "1", "r", ReplicaShape("n1-standard-3"))


# ============================================================================== the endpoint
INVENTORY = """
regions:
  us-central1:
    cpu_quota: 8
    zones:
      us-central1-a: {machines: {n1-standard-4: 3}}
  europe-west4:
    stockout: true
    zones:
      europe-west4-a: {machines: {n1-standard-4: 4}}
  us-east1:
    accelerator_quotas: {NVIDIA_TESLA_T4: 3}
    zones:
      us-east1-b: {machines: {n1-standard-8: 5}}
  local: {elastic: true}
default: local
"""

PROJECT = "test-project"


@pytest.fixture(scope="module")
def stocked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with inventory_server(tmp_path_factory.mktemp("capacity"), INVENTORY) as proc:
        yield proc


def capacity(client: httpx.Client, location: str, **params: Any) -> httpx.Response:
    return client.get(f"/trainworks/v1/projects/{PROJECT}/locations/{location}/capacity", params=params)


def test_stocked_out_region_reports_zero_replicas(stocked: ServerProcess) -> None:
    with stocked.client() as client:
        answer = capacity(client, "europe-west4", machineType="n1-standard-4")
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert report["region"] == "europe-west4" and report["served"] is True and report["stockout"] is True
    assert report["shape"]["maxReplicas"] == 0 and report["shape"]["capacityReplicas"] == 0
    assert report["shape"]["limitedBy"] == "STOCKOUT"
    assert report["zones"] == [
        {
            "name": "europe-west4-a",
            "elastic": False,
            "machines": {"n1-standard-4": {"total": 4, "reserved": 0, "free": 4}},
        }
    ]


GATED = (
    "import pathlib, sys, time\n"
    "gate = pathlib.Path(sys.argv[1])\n"
    "deadline = time.time() + 120\n"
    "while not gate.exists() and time.time() < deadline: time.sleep(0.02)\n"
)


def test_cpu_quota_shrinks_while_a_job_runs(stocked: ServerProcess, tmp_path: Path) -> None:
    def replicas(client: httpx.Client) -> tuple[int, int, int]:
        shape = capacity(client, "us-central1", machineType="n1-standard-4").json()["shape"]
        return shape["quotaReplicas"], shape["capacityReplicas"], shape["maxReplicas"]

    gate = tmp_path / "gate"
    with stocked.client() as client:
        idle = capacity(client, "us-central1", machineType="n1-standard-4").json()
        assert idle["quota"]["vcpus"] == {"limit": 8, "used": 0, "free": 8}
        assert idle["shape"]["vcpusPerReplica"] == 4
        assert replicas(client) == (2, 3, 2)
        body = job(python_pool(GATED, args=[str(gate)]))
        created = client.post(f"/v1/projects/{PROJECT}/locations/us-central1/customJobs", json=body)
        assert created.status_code == 200, created.text
        name = created.json()["name"]
        try:
            wait_job(client, name, {"JOB_STATE_RUNNING"})
            busy = capacity(client, "us-central1", machineType="n1-standard-4").json()
            assert busy["quota"]["vcpus"] == {"limit": 8, "used": 4, "free": 4}
            assert busy["zones"][0]["machines"]["n1-standard-4"]["free"] == 2
            assert replicas(client) == (1, 2, 1)
        finally:
            gate.write_text("go")
        assert wait_job(client, name)["state"] == "JOB_STATE_SUCCEEDED"
        wait_for(lambda: replicas(client) == (2, 3, 2), what="the job's capacity to be released")


def test_accelerator_quota_through_the_client(stocked: ServerProcess) -> None:
    with TrainworksClient(stocked.url) as client:
        report = client.get_capacity(
            f"projects/{PROJECT}/locations/us-east1",
            machine_type="n1-standard-8",
            accelerator_type="NVIDIA_TESLA_T4",
            accelerator_count=2,
        )
    assert report["quota"]["accelerators"]["NVIDIA_TESLA_T4"] == {"limit": 3, "used": 0, "free": 3}
    assert report["quota"]["vcpus"] == {"limit": None, "used": 0, "free": None}
    assert report["shape"]["acceleratorsPerReplica"] == {"NVIDIA_TESLA_T4": 2}
    shape = report["shape"]
    assert (shape["quotaReplicas"], shape["capacityReplicas"], shape["maxReplicas"]) == (1, 5, 1)
    assert report["shape"]["limitedBy"] == "QUOTA"


def test_elastic_default_region_reports_unlimited(stocked: ServerProcess) -> None:
    with stocked.client() as client:
        report = capacity(client, "asia-east1", machineType="a2-highgpu-1g").json()
        plain = capacity(client, "asia-east1").json()
    assert report["region"] == "local" and report["served"] is True and report["stockout"] is False
    assert report["shape"]["acceleratorType"] == "NVIDIA_TESLA_A100"  # built in, filled in
    assert report["shape"]["quotaReplicas"] is None and report["shape"]["capacityReplicas"] is None
    assert report["shape"]["maxReplicas"] is None and report["shape"]["limitedBy"] is None
    assert report["zones"] == [{"name": "local-a", "elastic": True, "machines": None}]
    assert "shape" not in plain  # no shape asked about
    assert plain["parent"].startswith("projects/") and plain["parent"].endswith("/locations/asia-east1")


@pytest.mark.parametrize(
    ("params", "field", "words"),
    [
        ({"machineType": "n1-standard-3"}, "machineType", "n1-standard-4"),
        ({"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T5"}, "acceleratorType", "T4"),
        ({"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4"}, "acceleratorCount", "0"),
        ({"machineType": "n1-standard-4", "acceleratorCount": "two"}, "acceleratorCount", "'two'"),
        (
            {"machineType": "e2-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": "1"},
            "acceleratorType",
            "e2-standard-4",
        ),
        ({"acceleratorType": "NVIDIA_TESLA_T4"}, "machineType", "required"),
    ],
)
def test_bad_shape_is_a_400_naming_the_parameter(
    stocked: ServerProcess, params: dict[str, str], field: str, words: str
) -> None:
    with stocked.client() as client:
        answer = capacity(client, "us-central1", **params)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    violations = error["details"][0]["fieldViolations"]
    assert violations[0]["field"] == field and words in violations[0]["description"]


def test_client_raises_the_api_error(stocked: ServerProcess) -> None:
    with TrainworksClient(stocked.url) as client, pytest.raises(ApiError) as caught:
        client.get_capacity(f"projects/{PROJECT}/locations/us-central1", machine_type="n1-standard-3")
    assert caught.value.status_code == 400 and caught.value.violations[0][0] == "machineType"
