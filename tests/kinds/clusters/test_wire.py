"""ModelDevelopmentCluster wire models: both JSON spellings, canonical output, output-only fields."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainworks.kernel.errors import ApiError
from trainworks.kernel.wire import input_dict
from trainworks.kernel.wire_errors import parse_body
from trainworks.kinds.clusters.wire import (
    ClusterState,
    ConfidentialInstanceType,
    EventType,
    ModelDevelopmentCluster,
    NodePoolType,
    NodeState,
    ProvisioningModel,
    UpdateMode,
)

RESERVATION = "projects/p/zones/us-central1-a/reservations/h100"


def snake_payload() -> dict[str, Any]:
    """The docs' own shape (snake_case), plus a GPU pool and every optional part."""
    return {
        "display_name": "trainers",
        "labels": {"team": "ml"},
        "network": {
            "network": "projects/p/global/networks/default",
            "subnetwork": "projects/p/regions/us-central1/subnetworks/default",
        },
        "node_pools": [
            {
                "id": "cpu",
                "machine_spec": {"machine_type": "n2-standard-8"},
                "scaling_spec": {"min_node_count": 2, "max_node_count": "4"},
                "zone": "us-central1-a",
                "enable_public_ips": True,
                "boot_disk": {"boot_disk_type": "pd-standard", "boot_disk_size_gb": 120},
                "startup_script": "echo hi",
                "filestores": ["projects/p/locations/us-central1-a/instances/data"],
                "lustres": ["projects/p/locations/us-central1-a/instances/scratch"],
                "labels": {"pool": "cpu"},
            },
            {
                "id": "gpu",
                "machine_spec": {
                    "machine_type": "a3-highgpu-8g",
                    "accelerator_type": "NVIDIA_H100_80GB",
                    "accelerator_count": 8,
                    "reservation_affinity": {
                        "reservation_affinity_type": "SPECIFIC_RESERVATION",
                        "key": "compute.googleapis.com/reservation-name",
                        "values": [RESERVATION],
                    },
                },
                "provisioning_model": "RESERVATION",
                "scaling_spec": {"max_node_count": 2},
                "node_image": "projects/trainworks-images/global/images/slurm-gpu-v20261001",
                "confidential_instance_config": {"confidential_instance_type": "TDX"},
            },
            {
                "id": "flex",
                "machine_spec": {
                    "machine_type": "a3-megagpu-8g",
                    "accelerator_type": 14,
                    "accelerator_count": 8,
                },
                "provisioning_model": 4,
                "flex_start_max_duration": "3600s",
            },
        ],
        "orchestrator_spec": {
            "slurm_spec": {
                "home_directory_storage": "projects/p/locations/us-central1-a/instances/home",
                "login_node_pool_id": "login",
                "partitions": [{"id": "cpu", "node_pool_ids": ["cpu"], "config": {"MaxTime": "1-00:00:00"}}],
                "default_partition_id": "cpu",
                "prolog_bash_scripts": ["echo pro"],
                "epilog_bash_scripts": ["echo epi"],
                "config": {"PriorityWeightAge": "1000"},
                "node_sets": [{"node_pool_id": "gpu", "config": {"Weight": "10"}}],
                "scheduling": {"priority_weight_qos": "5", "preempt_exempt_time": "1:01"},
                "accounting": {"accounting_storage_enforce": "limits"},
            }
        },
        "runtime_spec": {"service_account": "sa@p.iam.gserviceaccount.com"},
        "lustre_export_config": {
            "destination_bucket": "backups",
            "lustres": ["projects/p/locations/us-central1-a/instances/scratch"],
            "days_of_week": ["MONDAY", 5],
            "start_time": {"hours": 3, "minutes": 30},
        },
    }


def camel(value: Any) -> Any:
    """The same JSON with every key of a message in lowerCamelCase (map keys are data and stay)."""
    maps = {"labels", "config"}
    if isinstance(value, list):
        return [camel(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        head, *rest = key.split("_")
        name = head + "".join(part.title() for part in rest)
        out[name] = dict(item) if key in maps else camel(item)
    return out


OUTPUT_ONLY = {
    "name": "projects/1/locations/us-central1/modelDevelopmentClusters/c1",
    "clusterStatus": {
        "state": "RUNNING",
        "detail": "ok",
        "error": {"code": 9, "message": "x"},
        "nodesStatus": [
            {
                "nodeState": "RUNNING",
                "nodePoolId": "cpu",
                "nodePoolType": "NODE_POOL_TYPE_COMPUTE",
                "instanceName": "c1-cpu-0",
                "instanceId": "123",
                "createTime": "2026-12-01T10:00:00Z",
                "lastUpdateTime": "2026-12-01T10:00:01.500Z",
                "detail": "up",
                "physicalHost": {"clusterName": "a", "blockId": "b", "subblockId": "c", "hostId": "d"},
            }
        ],
    },
    "clusterEvents": [
        {"eventType": "VM_SLURM_DRAIN", "eventMessage": "drained", "eventTime": "2026-12-01T10:00:00Z"}
    ],
    "runtime": {"xmanager": {"state": "RUNNING", "apiEndpoint": "https://x"}},
    "createTime": "2026-12-01T10:00:00Z",
    "updateTime": "2026-12-01T10:00:00Z",
    "startTime": "2026-12-01T10:00:00Z",
}


def test_snake_and_camel_input_parse_the_same() -> None:
    from_snake = ModelDevelopmentCluster.model_validate(snake_payload())
    from_camel = ModelDevelopmentCluster.model_validate(camel(snake_payload()))
    assert from_snake == from_camel
    assert from_snake.to_wire() == from_camel.to_wire()


def test_canonical_output() -> None:
    wire = ModelDevelopmentCluster.model_validate(snake_payload()).to_wire()
    cpu, gpu, flex = wire["nodePools"]
    assert cpu["scalingSpec"] == {"minNodeCount": "2", "maxNodeCount": "4"}  # int64 as strings
    assert cpu["bootDisk"] == {"bootDiskType": "pd-standard", "bootDiskSizeGb": 120}  # int32 as a number
    assert cpu["enablePublicIps"] is True
    assert gpu["scalingSpec"] == {"maxNodeCount": "2"}  # a zero count is omitted
    assert gpu["machineSpec"]["acceleratorType"] == "NVIDIA_H100_80GB"
    assert gpu["machineSpec"]["reservationAffinity"]["reservationAffinityType"] == "SPECIFIC_RESERVATION"
    assert gpu["provisioningModel"] == "RESERVATION"
    assert gpu["confidentialInstanceConfig"] == {"confidentialInstanceType": "TDX"}
    assert flex["provisioningModel"] == "FLEX_START"  # enum numbers accepted, names written
    assert flex["machineSpec"]["acceleratorType"] == "NVIDIA_H100_MEGA_80GB"
    assert flex["flexStartMaxDuration"] == "3600s"
    slurm = wire["orchestratorSpec"]["slurmSpec"]
    assert slurm["scheduling"] == {"priorityWeightQos": "5", "preemptExemptTime": "1:01"}
    assert slurm["accounting"] == {"accountingStorageEnforce": "limits"}
    assert slurm["nodeSets"] == [{"nodePoolId": "gpu", "config": {"Weight": "10"}}]
    assert slurm["partitions"][0] == {
        "id": "cpu",
        "nodePoolIds": ["cpu"],
        "config": {"MaxTime": "1-00:00:00"},
    }
    assert wire["lustreExportConfig"]["daysOfWeek"] == ["MONDAY", "FRIDAY"]
    assert wire["lustreExportConfig"]["startTime"] == {"hours": 3, "minutes": 30}
    assert wire["runtimeSpec"] == {"serviceAccount": "sa@p.iam.gserviceaccount.com"}


def test_defaults_are_omitted() -> None:
    wire = ModelDevelopmentCluster.model_validate(
        {"node_pools": [{"id": "a", "enable_public_ips": False, "filestores": [], "labels": {}, "zone": ""}]}
    ).to_wire()
    assert wire == {"nodePools": [{"id": "a"}]}


def test_round_trip_with_output_only_fields() -> None:
    wire = {**camel(snake_payload()), **copy.deepcopy(OUTPUT_ONLY)}
    wire["nodePools"][2]["effectiveFlexStartMaxDuration"] = "3600s"
    parsed = ModelDevelopmentCluster.model_validate(wire)
    out = parsed.to_wire()
    assert ModelDevelopmentCluster.model_validate(out).to_wire() == out
    assert out["clusterStatus"] == {**OUTPUT_ONLY["clusterStatus"]}
    assert out["clusterEvents"] == OUTPUT_ONLY["clusterEvents"]
    assert out["runtime"] == OUTPUT_ONLY["runtime"]  # kept loose
    assert out["nodePools"][2]["effectiveFlexStartMaxDuration"] == "3600s"


def test_input_dict_strips_output_only_fields() -> None:
    wire = {**camel(snake_payload()), **copy.deepcopy(OUTPUT_ONLY)}
    wire["nodePools"][2]["effectiveFlexStartMaxDuration"] = "3600s"
    spec = input_dict(ModelDevelopmentCluster.model_validate(wire))
    for name in OUTPUT_ONLY:
        assert name not in spec
    assert all("effectiveFlexStartMaxDuration" not in p for p in spec["nodePools"])
    assert spec == input_dict(ModelDevelopmentCluster.model_validate(snake_payload()))
    assert spec["nodePools"][2]["flexStartMaxDuration"] == "3600s"


def test_enums() -> None:
    assert [m.name for m in ProvisioningModel] == [
        "PROVISIONING_MODEL_UNSPECIFIED",
        "ON_DEMAND",
        "SPOT",
        "RESERVATION",
        "FLEX_START",
    ]
    assert [m.name for m in ClusterState] == [
        "STATE_UNSPECIFIED",
        "PROVISIONING",
        "RUNNING",
        "STOPPING",
        "ERROR",
        "UPDATING",
    ]
    assert [m.name for m in NodeState] == [
        "NODE_STATE_UNSPECIFIED",
        "PREPARING",
        "RUNNING",
        "ERROR",
        "UPDATING",
    ]
    assert [m.name for m in NodePoolType] == [
        "NODE_POOL_TYPE_UNSPECIFIED",
        "NODE_POOL_TYPE_LOGIN",
        "NODE_POOL_TYPE_COMPUTE",
    ]
    assert {m.name for m in EventType} == {
        "EVENT_TYPE_UNSPECIFIED",
        "VM_PROLOG_ERROR",
        "VM_EPILOG_ERROR",
        "VM_CONTINUOUS_GPU_ERROR",
        "VM_SCAN_ERROR",
        "VM_SLURM_POWER_DOWN",
        "VM_SLURM_DRAIN",
        "VM_DELETION",
        "VM_REPORT_AND_REPLACEMENT",
        "VM_REBOOT",
    }
    assert [m.name for m in UpdateMode] == ["UPDATE_MODE_UNSPECIFIED", "USER_ONLY", "USER_AND_SERVICE"]
    assert [m.name for m in ConfidentialInstanceType] == [
        "CONFIDENTIAL_INSTANCE_TYPE_UNSPECIFIED",
        "SEV",
        "SEV_SNP",
        "TDX",
    ]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"node_pools": [{"id": "a", "provisioning_model": "CHEAP"}]}, "node_pools[0].provisioning_model"),
        (
            {"node_pools": [{"id": "a", "scaling_spec": {"min_node_count": "two"}}]},
            "node_pools[0].scaling_spec.min_node_count",
        ),
        (
            {"node_pools": [{"id": "a", "flex_start_max_duration": "1h"}]},
            "node_pools[0].flex_start_max_duration",
        ),
        ({"node_pools": [{"id": "a", "enable_public_ips": "true"}]}, "node_pools[0].enable_public_ips"),
        ({"nodePools": [{"id": "a", "bogus": 1}]}, "node_pools[0].bogus"),
        (
            {"orchestratorSpec": {"slurmSpec": {"config": {"A": 1}}}},
            'orchestrator_spec.slurm_spec.config["A"]',
        ),
        (
            {"orchestrator_spec": {"slurm_spec": {"scheduling": {"priority_weight_qos": 5}}}},
            "orchestrator_spec.slurm_spec.scheduling.priority_weight_qos",
        ),
    ],
)
def test_parse_errors_name_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_body(ModelDevelopmentCluster, body)
    assert [v.field for v in caught.value.violations] == [field]


def test_null_is_unset() -> None:
    parsed = ModelDevelopmentCluster.model_validate(
        {"network": None, "node_pools": [{"id": "a", "boot_disk": None}]}
    )
    assert parsed.network is None and parsed.node_pools[0].boot_disk is None
