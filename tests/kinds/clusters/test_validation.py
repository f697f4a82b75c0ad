"""Rules of a ModelDevelopmentCluster, each on its proto field path; server defaults; immutability."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from trainworks.kernel.wire import input_dict
from trainworks.kernel.wire_errors import snake
from trainworks.kinds.clusters.validation import (
    check_cluster_id,
    check_immutable,
    default_partition,
    fill_defaults,
    validate_cluster,
)
from trainworks.kinds.clusters.wire import (
    ModelDevelopmentCluster,
    SlurmAccounting,
    SlurmScheduling,
)
from trainworks.slurm import keys

S = "orchestrator_spec.slurm_spec"
RESERVATION = "projects/p/zones/us-central1-a/reservations/h100"
AFFINITY = {
    "reservation_affinity_type": "SPECIFIC_RESERVATION",
    "key": "compute.googleapis.com/reservation-name",
    "values": [RESERVATION],
}


def base_payload() -> dict[str, Any]:
    """The docs' update payload (a CPU pool, a login pool, partition "cpu"), plus H100s on a reservation."""
    return {
        "display_name": "trainers",
        "network": {
            "network": "projects/p/global/networks/default",
            "subnetwork": "projects/p/regions/us-central1/subnetworks/default",
        },
        "node_pools": [
            {
                "id": "cpu",
                "machine_spec": {"machine_type": "n2-standard-8"},
                "scaling_spec": {"min_node_count": 2, "max_node_count": 4},
                "zone": "us-central1-a",
                "enable_public_ips": True,
                "boot_disk": {"boot_disk_type": "pd-standard", "boot_disk_size_gb": 120},
            },
            {
                "id": "login",
                "machine_spec": {"machine_type": "n2-standard-8"},
                "scaling_spec": {"min_node_count": 1, "max_node_count": 1},
                "zone": "us-central1-a",
                "enable_public_ips": True,
                "boot_disk": {"boot_disk_type": "pd-standard", "boot_disk_size_gb": 120},
            },
            {
                "id": "gpu",
                "machine_spec": {
                    "machine_type": "a3-highgpu-8g",
                    "accelerator_type": "NVIDIA_H100_80GB",
                    "accelerator_count": 8,
                    "reservation_affinity": copy.deepcopy(AFFINITY),
                },
                "scaling_spec": {"min_node_count": 0, "max_node_count": 2},
                "zone": "us-central1-a",
            },
        ],
        "orchestrator_spec": {
            "slurm_spec": {
                "home_directory_storage": "projects/p/locations/us-central1-a/instances/home",
                "partitions": [
                    {"id": "cpu", "node_pool_ids": ["cpu"]},
                    {"id": "gpu", "node_pool_ids": ["gpu"]},
                ],
                "login_node_pool_id": "login",
            }
        },
    }


def fields(payload: dict[str, Any]) -> list[str]:
    return [v.field for v in validate_cluster(ModelDevelopmentCluster.model_validate(payload))]


def problems(payload: dict[str, Any]) -> dict[str, str]:
    return {v.field: v.description for v in validate_cluster(ModelDevelopmentCluster.model_validate(payload))}


def slurm(payload: dict[str, Any]) -> dict[str, Any]:
    return payload["orchestrator_spec"]["slurm_spec"]  # type: ignore[no-any-return]


def test_base_payload_is_valid() -> None:
    assert fields(base_payload()) == []


# ------------------------------------------------------------------ cluster ID
@pytest.mark.parametrize("value", ["a", "train1", "abcdefghij"])
def test_valid_ids(value: str) -> None:
    assert check_cluster_id(value) == []


def test_hyphens_are_refused_with_a_slurm_spec_and_say_why() -> None:
    [problem] = check_cluster_id("my-train")
    assert problem.field == "model_development_cluster_id"
    assert "'-'" in problem.description and "Slurm" in problem.description
    assert check_cluster_id("my-train", slurm=False) == []


@pytest.mark.parametrize("value", ["", "1abc", "Train", "abcdefghijk", "a_b", "a-"])
def test_invalid_ids(value: str) -> None:
    assert [v.field for v in check_cluster_id(value)] == ["model_development_cluster_id"]
    assert [v.field for v in check_cluster_id(value, slurm=False)] == ["model_development_cluster_id"]


# ------------------------------------------------------------------ top level
def test_display_name_and_labels() -> None:
    payload = base_payload()
    payload["display_name"] = "x" * 129
    payload["labels"] = {"Team": "a"}
    assert fields(payload) == ["display_name", 'labels["Team"]']
    payload["display_name"] = "x" * 128
    payload["labels"] = {"team": "ml"}
    assert fields(payload) == []


def test_network() -> None:
    payload = base_payload()
    payload["network"] = {"network": "default", "subnetwork": "projects/p/subnetworks/x"}
    assert fields(payload) == ["network.network", "network.subnetwork"]
    payload["network"] = {"subnetwork": "projects/p/regions/us-central1/subnetworks/default"}
    assert problems(payload) == {"network.network": "Required field is not set."}
    del payload["network"]
    assert fields(payload) == []  # the server fills the default network


def test_runtime_spec_and_lustre_export() -> None:
    payload = base_payload()
    payload["runtime_spec"] = {"service_account": "nobody"}
    payload["lustre_export_config"] = {"lustres": ["bad"], "start_time": {"hours": 24}}
    assert fields(payload) == [
        "runtime_spec.service_account",
        "lustre_export_config.destination_bucket",
        "lustre_export_config.lustres[0]",
        "lustre_export_config.start_time",
    ]
    payload["lustre_export_config"] = {"destination_bucket": "gs://backups"}
    assert fields(payload) == ["runtime_spec.service_account", "lustre_export_config.destination_bucket"]


# ------------------------------------------------------------------ node pools
def test_node_pools_are_required() -> None:
    payload = base_payload()
    payload["node_pools"] = []
    assert "node_pools" in fields(payload)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda p: p["node_pools"][0].pop("id"), "node_pools[0].id"),
        (lambda p: p["node_pools"][0].update(id="Cpu_1"), "node_pools[0].id"),
        (lambda p: p["node_pools"][0].update(id="a" * 33), "node_pools[0].id"),
        (lambda p: p["node_pools"][0].pop("machine_spec"), "node_pools[0].machine_spec"),
        (
            lambda p: p["node_pools"][0]["machine_spec"].update(machine_type=""),
            "node_pools[0].machine_spec.machine_type",
        ),
        (
            lambda p: p["node_pools"][0]["machine_spec"].update(machine_type="n2-standard-7"),
            "node_pools[0].machine_spec.machine_type",
        ),
        (
            lambda p: p["node_pools"][0]["machine_spec"].update(tpu_topology="2x2"),
            "node_pools[0].machine_spec.tpu_topology",
        ),
        (
            lambda p: p["node_pools"][2]["machine_spec"].update(accelerator_count=4),
            "node_pools[2].machine_spec.accelerator_count",
        ),
        (
            lambda p: p["node_pools"][2]["machine_spec"].update(accelerator_type="NVIDIA_H200_141GB"),
            "node_pools[2].machine_spec.accelerator_type",
        ),
        (
            lambda p: p["node_pools"][0]["machine_spec"].update(
                accelerator_type="NVIDIA_TESLA_T4", accelerator_count=1
            ),
            "node_pools[0].machine_spec.accelerator_type",
        ),
        (
            lambda p: p["node_pools"][0]["scaling_spec"].update(min_node_count=5),
            "node_pools[0].scaling_spec.min_node_count",
        ),
        (
            lambda p: p["node_pools"][0]["scaling_spec"].update(min_node_count=-1),
            "node_pools[0].scaling_spec.min_node_count",
        ),
        (
            lambda p: p["node_pools"][0]["scaling_spec"].update(max_node_count=-1),
            "node_pools[0].scaling_spec.max_node_count",
        ),
        (lambda p: p["node_pools"][0].update(zone="central"), "node_pools[0].zone"),
        (
            lambda p: p["node_pools"][0]["boot_disk"].update(boot_disk_size_gb=5),
            "node_pools[0].boot_disk.boot_disk_size_gb",
        ),
        (
            lambda p: p["node_pools"][0]["boot_disk"].update(boot_disk_type="ssd"),
            "node_pools[0].boot_disk.boot_disk_type",
        ),
        (lambda p: p["node_pools"][0].update(node_image="ubuntu-22"), "node_pools[0].node_image"),
        (lambda p: p["node_pools"][0].update(filestores=["10.0.0.2:/share"]), "node_pools[0].filestores[0]"),
        (
            lambda p: p["node_pools"][0].update(lustres=["projects/p/locations/z/instances/ok", "x"]),
            "node_pools[0].lustres[1]",
        ),
        (lambda p: p["node_pools"][0].update(labels={"Pool": "x"}), 'node_pools[0].labels["Pool"]'),
        (
            lambda p: p["node_pools"][0].update(confidential_instance_config={}),
            "node_pools[0].confidential_instance_config.confidential_instance_type",
        ),
    ],
)
def test_pool_rules(change: Callable[[dict[str, Any]], Any], field: str) -> None:
    payload = base_payload()
    change(payload)
    assert field in fields(payload)


def test_duplicate_pool_ids() -> None:
    payload = base_payload()
    payload["node_pools"][2]["id"] = "cpu"
    slurm(payload)["partitions"][1]["node_pool_ids"] = ["cpu"]
    assert fields(payload) == ["node_pools[2].id"]


def test_pool_values_that_pass() -> None:
    payload = base_payload()
    pool = payload["node_pools"][0]
    pool["node_image"] = "projects/my-images/global/images/family/slurm"
    pool["filestores"] = ["projects/p/locations/us-central1-a/instances/data"]
    pool["labels"] = {"pool": "cpu"}
    pool["confidential_instance_config"] = {"confidential_instance_type": "SEV"}
    pool["scaling_spec"] = {"min_node_count": 0, "max_node_count": 0}
    assert fields(payload) == []


# ------------------------------------------------------------------ provisioning models
def test_gpu_pool_without_model_needs_a_reservation() -> None:
    payload = base_payload()
    del payload["node_pools"][2]["machine_spec"]["reservation_affinity"]
    assert fields(payload) == ["node_pools[2].provisioning_model"]
    for model in ("ON_DEMAND", "SPOT", "FLEX_START"):
        payload["node_pools"][2]["provisioning_model"] = model
        assert fields(payload) == [], model


def test_reservation_requires_an_affinity() -> None:
    payload = base_payload()
    payload["node_pools"][0]["provisioning_model"] = "RESERVATION"
    assert problems(payload) == {
        "node_pools[0].machine_spec.reservation_affinity": "Required when provisioning_model is RESERVATION: "
        "name the reservation with SPECIFIC_RESERVATION"
    }
    payload["node_pools"][0]["machine_spec"]["reservation_affinity"] = copy.deepcopy(AFFINITY)
    assert fields(payload) == []


@pytest.mark.parametrize("model", ["ON_DEMAND", "SPOT", "FLEX_START"])
def test_affinity_only_with_reservation(model: str) -> None:
    payload = base_payload()
    payload["node_pools"][2]["provisioning_model"] = model
    found = problems(payload)
    assert list(found) == ["node_pools[2].machine_spec.reservation_affinity"]
    assert model in found["node_pools[2].machine_spec.reservation_affinity"]


def test_cpu_pool_without_model_is_on_demand() -> None:
    payload = base_payload()
    payload["node_pools"][0]["machine_spec"]["reservation_affinity"] = copy.deepcopy(AFFINITY)
    found = problems(payload)
    assert list(found) == ["node_pools[0].machine_spec.reservation_affinity"]
    assert "ON_DEMAND" in found["node_pools[0].machine_spec.reservation_affinity"]


def test_only_specific_reservations() -> None:
    payload = base_payload()
    payload["node_pools"][2]["machine_spec"]["reservation_affinity"] = {
        "reservation_affinity_type": "ANY_RESERVATION"
    }
    assert fields(payload) == ["node_pools[2].machine_spec.reservation_affinity.reservation_affinity_type"]
    payload["node_pools"][2]["machine_spec"]["reservation_affinity"] = {
        "reservation_affinity_type": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
    }
    assert fields(payload) == ["node_pools[2].machine_spec.reservation_affinity.values"]


def test_flex_start_duration() -> None:
    payload = base_payload()
    pool = payload["node_pools"][2]
    del pool["machine_spec"]["reservation_affinity"]
    pool["flex_start_max_duration"] = "3600s"
    pool["provisioning_model"] = "SPOT"
    assert fields(payload) == ["node_pools[2].flex_start_max_duration"]
    pool["provisioning_model"] = "FLEX_START"
    assert fields(payload) == []
    for bad in ("29s", "604801s"):
        pool["flex_start_max_duration"] = bad
        assert fields(payload) == ["node_pools[2].flex_start_max_duration"], bad
    for good in ("30s", "604800s"):
        pool["flex_start_max_duration"] = good
        assert fields(payload) == [], good


# ------------------------------------------------------------------ slurm spec
def test_orchestrator_and_slurm_spec_are_required() -> None:
    payload = base_payload()
    payload["orchestrator_spec"] = {}
    assert fields(payload) == [S]
    del payload["orchestrator_spec"]
    assert fields(payload) == ["orchestrator_spec"]


def test_home_directory_storage() -> None:
    payload = base_payload()
    del slurm(payload)["home_directory_storage"]
    assert fields(payload) == [f"{S}.home_directory_storage"]
    slurm(payload)["home_directory_storage"] = "10.0.0.2:/home"
    assert fields(payload) == [f"{S}.home_directory_storage"]


def test_login_pool() -> None:
    payload = base_payload()
    del slurm(payload)["login_node_pool_id"]
    assert fields(payload) == [f"{S}.login_node_pool_id"]
    slurm(payload)["login_node_pool_id"] = "nope"
    assert fields(payload) == [f"{S}.login_node_pool_id"]
    slurm(payload)["login_node_pool_id"] = "login"
    payload["node_pools"][1]["scaling_spec"] = {"min_node_count": 1, "max_node_count": 2}
    assert fields(payload) == ["node_pools[1].scaling_spec"]
    payload["node_pools"][1]["scaling_spec"] = {"min_node_count": 0, "max_node_count": 0}
    assert fields(payload) == ["node_pools[1].scaling_spec"]
    payload["node_pools"][1]["scaling_spec"] = {"min_node_count": 2, "max_node_count": 2}
    assert fields(payload) == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda s: s.update(partitions=[]), f"{S}.partitions"),
        (lambda s: s["partitions"][0].pop("id"), f"{S}.partitions[0].id"),
        (lambda s: s["partitions"][0].update(id="CPU"), f"{S}.partitions[0].id"),
        (lambda s: s["partitions"][1].update(id="cpu"), f"{S}.partitions[1].id"),
        (lambda s: s["partitions"][0].update(node_pool_ids=[]), f"{S}.partitions[0].node_pool_ids"),
        (
            lambda s: s["partitions"][0].update(node_pool_ids=["cpu", "tpu"]),
            f"{S}.partitions[0].node_pool_ids[1]",
        ),
        (lambda s: s["partitions"][0].update(node_pool_ids=["login"]), f"{S}.partitions[0].node_pool_ids[0]"),
        (
            lambda s: s["partitions"][0].update(node_pool_ids=["cpu", "cpu"]),
            f"{S}.partitions[0].node_pool_ids[1]",
        ),
        (lambda s: s.update(default_partition_id="tpu"), f"{S}.default_partition_id"),
        (lambda s: s.update(node_sets=[{"config": {"Weight": "1"}}]), f"{S}.node_sets[0].node_pool_id"),
        (lambda s: s.update(node_sets=[{"node_pool_id": "tpu"}]), f"{S}.node_sets[0].node_pool_id"),
        (lambda s: s.update(node_sets=[{"node_pool_id": "login"}]), f"{S}.node_sets[0].node_pool_id"),
        (
            lambda s: s.update(node_sets=[{"node_pool_id": "gpu"}, {"node_pool_id": "gpu"}]),
            f"{S}.node_sets[1].node_pool_id",
        ),
        (lambda s: s.update(prolog_bash_scripts=["echo a", " "]), f"{S}.prolog_bash_scripts[1]"),
        (lambda s: s.update(epilog_bash_scripts=[""]), f"{S}.epilog_bash_scripts[0]"),
    ],
)
def test_slurm_rules(change: Callable[[dict[str, Any]], Any], field: str) -> None:
    payload = base_payload()
    change(slurm(payload))
    assert fields(payload) == [field]


def test_default_partition_and_node_sets_that_pass() -> None:
    payload = base_payload()
    slurm(payload)["default_partition_id"] = "gpu"
    slurm(payload)["node_sets"] = [{"node_pool_id": "gpu", "config": {"Features": "h100", "Weight": "10"}}]
    assert fields(payload) == []


# ------------------------------------------------------------------ slurm.conf keys
def test_config_keys() -> None:
    payload = base_payload()
    slurm(payload)["config"] = {
        "PriorityType": "priority/multifactor",
        "priority_weight_age": "1000",  # case and underscores are ignored
        "PREEMPTMODE": "REQUEUE",
        "SchedulerParameters": "bf_continue,bf_window=1440",
        "InteractiveStepOptions": '"--interactive --pty $SHELL"',
    }
    assert fields(payload) == []


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("Bogus", "1", "not a slurm.conf parameter"),
        ("HealthCheckProgram", "/bin/true", "HealthCheckProgram cannot be set"),
        ("health_check_interval", "60", "HealthCheckInterval cannot be set"),
        ("HealthCheckNodeState", "IDLE", "health checks"),
        ("RequeueExit", "1", "RequeueExit cannot be set"),
        ("RequeueExitHold", "1", "RequeueExitHold cannot be set"),
        ("Prolog", "/x", "prolog_bash_scripts"),
        ("Epilog", "/x", "epilog_bash_scripts"),
        ("PrologSlurmctld", "/x", "PrologSlurmctld cannot be set"),
        ("StorageHost", "db", "slurmdbd.conf"),
        ("DbdPort", "6819", "slurmdbd.conf"),
        ("StoragePass", "x", "slurmdbd.conf"),
        ("ClusterName", "other", "ClusterName cannot be set"),
        ("SlurmctldHost", "x", "daemons"),
        ("AuthType", "auth/none", "daemons"),
        ("StateSaveLocation", "/tmp", "daemons"),
        ("SlurmctldPidFile", "/tmp/x.pid", "daemons"),
        ("SlurmUser", "root", "daemons"),
        ("ProctrackType", "proctrack/cgroup", "daemons"),
        ("ResumeProgram", "/x", "ResumeProgram cannot be set"),
        ("NodeName", "n1", "node and partition lines"),
        ("PartitionName", "p", "node and partition lines"),
        ("AccountingStorageType", "accounting_storage/slurmdbd", "accounting"),
        ("PriorityWeightAge", "1000 Prolog=/tmp/evil", "blanks"),
        ("PriorityWeightAge", "1\nProlog=/tmp/evil", "one line"),
        ("PriorityWeightAge", "", "empty"),
    ],
)
def test_config_keys_refused_by_name(key: str, value: str, words: str) -> None:
    payload = base_payload()
    slurm(payload)["config"] = {"PriorityType": "priority/multifactor", key: value}
    found = problems(payload)
    assert list(found) == [f"{S}.config.{key}"]
    assert words in found[f"{S}.config.{key}"]


def test_config_key_given_twice() -> None:
    payload = base_payload()
    slurm(payload)["config"] = {"PriorityWeightAge": "1", "priority_weight_age": "2"}
    assert fields(payload) == [f"{S}.config.priority_weight_age"]


def test_config_with_scheduling_or_accounting_is_refused() -> None:
    payload = base_payload()
    slurm(payload)["config"] = {"PriorityWeightAge": "1000"}
    slurm(payload)["scheduling"] = {"priority_weight_qos": "5"}
    assert fields(payload) == [f"{S}.config"]
    del slurm(payload)["scheduling"]
    slurm(payload)["accounting"] = {"accounting_storage_enforce": "limits"}
    assert fields(payload) == [f"{S}.config"]
    slurm(payload)["accounting"] = {}  # an empty message sets nothing
    assert fields(payload) == []
    del slurm(payload)["config"]
    slurm(payload)["accounting"] = {"accounting_storage_enforce": "limits"}
    slurm(payload)["scheduling"] = {"priority_weight_qos": "5"}
    assert fields(payload) == []  # the legacy fields alone are fine


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("Default", "default_partition_id"),
        ("default", "default_partition_id"),
        ("Nodes", "node_pool_ids"),
        ("PartitionName", "id"),
        ("Bogus", "not a parameter of a slurm.conf PartitionName line"),
        ("PriorityWeightAge", "not a parameter"),  # a global key is no partition key
    ],
)
def test_partition_config(key: str, words: str) -> None:
    payload = base_payload()
    slurm(payload)["partitions"][0]["config"] = {"MaxTime": "1-00:00:00", key: "YES"}
    found = problems(payload)
    assert list(found) == [f"{S}.partitions[0].config.{key}"]
    assert words in found[f"{S}.partitions[0].config.{key}"]


def test_partition_config_that_passes_and_injection() -> None:
    payload = base_payload()
    slurm(payload)["partitions"][1]["config"] = {
        "PriorityTier": "10",
        "over_subscribe": "NO",
        "AllowAccounts": "a,b",
    }
    assert fields(payload) == []
    slurm(payload)["partitions"][1]["config"] = {"MaxTime": "1 Default=YES"}
    assert fields(payload) == [f"{S}.partitions[1].config.MaxTime"]


@pytest.mark.parametrize("key", ["NodeName", "NodeAddr", "NodeHostname", "Port", "node_addr", "Bogus"])
def test_node_set_config_refused(key: str) -> None:
    payload = base_payload()
    slurm(payload)["node_sets"] = [{"node_pool_id": "gpu", "config": {"Weight": "1", key: "x"}}]
    assert fields(payload) == [f"{S}.node_sets[0].config.{key}"]


# ------------------------------------------------------------------ server defaults
def spec_of(payload: dict[str, Any]) -> dict[str, Any]:
    return input_dict(ModelDevelopmentCluster.model_validate(payload))


def test_fill_defaults() -> None:
    payload = base_payload()
    del payload["network"]
    del payload["node_pools"][0]["boot_disk"]
    payload["node_pools"][1]["boot_disk"] = {"boot_disk_type": "pd-balanced"}
    spec = spec_of(payload)
    before = copy.deepcopy(spec)
    filled = fill_defaults(spec, project_number="123")
    assert spec == before  # the input is left alone
    assert filled["network"] == {"network": "projects/123/global/networks/default"}
    cpu, login, gpu = filled["nodePools"]
    assert cpu["provisioningModel"] == "ON_DEMAND" and login["provisioningModel"] == "ON_DEMAND"
    assert gpu["provisioningModel"] == "RESERVATION"
    assert cpu["bootDisk"] == {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}
    assert login["bootDisk"] == {"bootDiskType": "pd-balanced", "bootDiskSizeGb": 100}
    assert "effectiveFlexStartMaxDuration" not in gpu
    assert all("nodeImage" not in p for p in filled["nodePools"])
    assert fill_defaults(filled, project_number="123") == filled  # idempotent
    # what the user set is kept
    assert fill_defaults(spec_of(base_payload()), "123")["network"] == spec_of(base_payload())["network"]
    assert fill_defaults(spec_of(base_payload()), "123")["nodePools"][0]["bootDisk"] == {
        "bootDiskType": "pd-standard",
        "bootDiskSizeGb": 120,
    }


def test_fill_defaults_keeps_subnetwork_and_resolves_flex_start() -> None:
    payload = base_payload()
    payload["network"] = {"subnetwork": "projects/p/regions/us-central1/subnetworks/s"}
    gpu = payload["node_pools"][2]
    del gpu["machine_spec"]["reservation_affinity"]
    gpu["provisioning_model"] = "FLEX_START"
    filled = fill_defaults(spec_of(payload), project_number="42")
    assert filled["network"] == {
        "network": "projects/42/global/networks/default",
        "subnetwork": "projects/p/regions/us-central1/subnetworks/s",
    }
    assert filled["nodePools"][2]["effectiveFlexStartMaxDuration"] == "604800s"
    gpu["flex_start_max_duration"] = "3600s"
    assert fill_defaults(spec_of(payload), "42")["nodePools"][2]["effectiveFlexStartMaxDuration"] == "3600s"
    # a GPU pool that resolves to no model keeps none (validation refuses it)
    del gpu["provisioning_model"], gpu["flex_start_max_duration"]
    assert "provisioningModel" not in fill_defaults(spec_of(payload), "42")["nodePools"][2]


def test_default_partition() -> None:
    spec = spec_of(base_payload())
    assert default_partition(spec) == "cpu"
    spec["orchestratorSpec"]["slurmSpec"]["defaultPartitionId"] = "gpu"
    assert default_partition(spec) == "gpu"
    assert default_partition({}) == ""


# ------------------------------------------------------------------ immutability
@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda s: s["network"].update(network="projects/p/global/networks/other"), "network"),
        (lambda s: s.update(runtimeSpec={"serviceAccount": "a@b.c"}), "runtime_spec"),
        (
            lambda s: s["orchestratorSpec"]["slurmSpec"].update(
                homeDirectoryStorage="projects/p/locations/z/instances/h2"
            ),
            f"{S}.home_directory_storage",
        ),
        (
            lambda s: s["nodePools"][0]["machineSpec"].update(machineType="n2-standard-16"),
            "node_pools[0].machine_spec",
        ),
        (lambda s: s["nodePools"][2]["machineSpec"].pop("reservationAffinity"), "node_pools[2].machine_spec"),
        (lambda s: s["nodePools"][0].update(provisioningModel="SPOT"), "node_pools[0].provisioning_model"),
        (
            lambda s: s["nodePools"][1].update(
                confidentialInstanceConfig={"confidentialInstanceType": "SEV"}
            ),
            "node_pools[1].confidential_instance_config",
        ),
    ],
)
def test_check_immutable(change: Callable[[dict[str, Any]], Any], field: str) -> None:
    current = fill_defaults(spec_of(base_payload()), "123")
    new = copy.deepcopy(current)
    change(new)
    assert [v.field for v in check_immutable(current, new)] == [field]


def test_check_immutable_allows_mutable_changes_and_new_pools() -> None:
    current = fill_defaults(spec_of(base_payload()), "123")
    new = copy.deepcopy(current)
    new["nodePools"][0]["scalingSpec"] = {"minNodeCount": "0", "maxNodeCount": "9"}
    new["nodePools"][0]["nodeImage"] = "projects/p/global/images/x"
    new["nodePools"].insert(0, {"id": "more", "machineSpec": {"machineType": "n2-standard-16"}})
    new["labels"] = {"a": "b"}
    new["orchestratorSpec"]["slurmSpec"]["partitions"] = [{"id": "all", "nodePoolIds": ["cpu", "gpu"]}]
    assert check_immutable(current, new) == []


# ------------------------------------------------------------------ slurm.conf key tables
def test_slurm_key_tables() -> None:
    assert keys.canonical_key("priority_weight_age") == "PriorityWeightAge"
    assert keys.canonical_key("PRIORITY_WEIGHT_QOS") == "PriorityWeightQOS"
    assert keys.canonical_key("schedulerparameters") == "SchedulerParameters"
    assert keys.canonical_key("Nope") is None and keys.canonical_key("") is None
    assert keys.canonical_partition_key("over_subscribe") == "OverSubscribe"
    assert keys.canonical_partition_key("Weight") is None
    assert keys.canonical_node_key("cores_per_socket") == "CoresPerSocket"
    assert keys.canonical_node_key("MaxTime") is None
    assert len(keys.SLURM_CONF_KEYS) > 200
    # every reserved key is known, and no two keys of one table meet once case and '_' are ignored
    assert all(keys.canonical_key(k) == k for k in keys.RESERVED_KEYS)
    assert all(keys.canonical_partition_key(k) == k for k in keys.RESERVED_PARTITION_KEYS)
    assert all(keys.canonical_node_key(k) == k for k in keys.RESERVED_NODE_KEYS)
    table = (*keys.SLURM_CONF_KEYS, *keys.LINE_KEYWORDS, *keys.SLURMDBD_CONF_KEYS)
    assert len({k.lower().replace("_", "") for k in table}) == len(table)
    # the legacy fields cover every field of the messages and name real slurm.conf keys
    legacy = {**keys.LEGACY_SCHEDULING_KEYS, **keys.LEGACY_ACCOUNTING_KEYS}
    assert {snake(k) for k in legacy} == {*SlurmScheduling.model_fields, *SlurmAccounting.model_fields}
    assert all(keys.canonical_key(v) == v and keys.reserved_reason(v) is None for v in legacy.values())
    assert keys.LEGACY_SCHEDULING_KEYS["priorityWeightQos"] == "PriorityWeightQOS"
    assert keys.LEGACY_SCHEDULING_KEYS["priorityWeightTres"] == "PriorityWeightTRES"
    assert keys.legacy_config(
        {
            "scheduling": {
                "priorityType": "priority/multifactor",
                "priorityWeightQos": "5",
                "preemptMode": "",
            },
            "accounting": {"accountingStorageEnforce": "limits"},
        }
    ) == {
        "PriorityType": "priority/multifactor",
        "PriorityWeightQOS": "5",
        "AccountingStorageEnforce": "limits",
    }
    assert keys.legacy_config({}) == {}


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("1000", True),
        ("bf_continue,bf_window=1440", True),
        ('"--interactive --pty $SHELL"', True),
        ("", False),
        ("1 2", False),
        ("a\tb", False),
        ("a\nb", False),
        ('"a"b"', False),
        ('a"b', False),
    ],
)
def test_slurm_values(value: str, ok: bool) -> None:
    assert (keys.check_value(value) is None) == ok
