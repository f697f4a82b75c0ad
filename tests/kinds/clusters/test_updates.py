"""PATCH semantics of training clusters (the "Gerenciar cluster" document), as plan_update computes them."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.kinds.clusters.test_validation import S, base_payload, slurm
from trainworks.catalog.node_images import ImageCatalog
from trainworks.kernel.errors import ApiError
from trainworks.kernel.wire import input_dict
from trainworks.kinds.clusters.updates import (
    MASKABLE,
    UpdatePlan,
    initial_realized,
    parse_update_mask,
    parse_update_mode,
    plan_update,
)
from trainworks.kinds.clusters.validation import default_partition, fill_defaults
from trainworks.kinds.clusters.wire import ModelDevelopmentCluster, UpdateMode

IMG = "projects/trainworks-images/global/images"
CREATED = datetime(2026, 1, 10, tzinfo=UTC)  # cpu-v1, gpu-v1, scripts s1
LATER = datetime(2026, 3, 10, tzinfo=UTC)  # cpu-v2, gpu-v2, scripts s2 released on 2026-03-01
LATEST = datetime(2026, 5, 10, tzinfo=UTC)  # cpu-v3 released on 2026-05-01


def test_catalog() -> ImageCatalog:
    return ImageCatalog.from_dicts(
        (
            "test",
            {
                "imageLines": [
                    {
                        "name": "cpu",
                        "machineFamilies": ["n1", "n2", "e2", "c2"],
                        "releases": [
                            {"image": f"{IMG}/cpu-v1", "releaseTime": "2026-01-01T00:00:00Z"},
                            {"image": f"{IMG}/cpu-v2", "releaseTime": "2026-03-01T00:00:00Z"},
                            {"image": f"{IMG}/cpu-v3", "releaseTime": "2026-05-01T00:00:00Z"},
                        ],
                    },
                    {
                        "name": "gpu",
                        "machineFamilies": ["a2", "a3", "a4", "g2"],
                        "releases": [
                            {"image": f"{IMG}/gpu-v1", "releaseTime": "2026-01-01T00:00:00Z"},
                            {"image": f"{IMG}/gpu-v2", "releaseTime": "2026-03-01T00:00:00Z"},
                        ],
                    },
                ],
                "serviceScripts": [
                    {"version": "s1", "releaseTime": "2026-01-01T00:00:00Z", "startup": "echo 1"},
                    {"version": "s2", "releaseTime": "2026-03-01T00:00:00Z", "startup": "echo 2"},
                ],
            },
        )
    )


test_catalog.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test
CATALOG = test_catalog()


def created() -> tuple[dict[str, Any], dict[str, Any]]:
    """The stored spec and realized state of the base cluster right after create, at CREATED."""
    spec = fill_defaults(
        input_dict(ModelDevelopmentCluster.model_validate(base_payload())), project_number="123"
    )
    return spec, initial_realized(spec, CATALOG, CREATED)


def plan(
    current: tuple[dict[str, Any], dict[str, Any]],
    body: dict[str, Any],
    mask: str | None,
    mode: str | None = None,
    now: datetime = LATER,
    catalog: ImageCatalog = CATALOG,
) -> UpdatePlan:
    spec, realized = current
    return plan_update(spec, realized, ModelDevelopmentCluster.model_validate(body), mask, mode, catalog, now)


def refused(
    current: tuple[dict[str, Any], dict[str, Any]],
    body: dict[str, Any],
    mask: str | None,
    mode: str | None = None,
) -> dict[str, str]:
    with pytest.raises(ApiError) as caught:
        plan(current, body, mask, mode)
    assert caught.value.code.name == "INVALID_ARGUMENT"
    return {v.field: v.description for v in caught.value.violations}


def slurm_of(spec: dict[str, Any]) -> dict[str, Any]:
    return spec["orchestratorSpec"]["slurmSpec"]  # type: ignore[no-any-return]


def images_of(spec: dict[str, Any]) -> dict[str, str]:
    return {p["id"]: p.get("nodeImage", "") for p in spec["nodePools"]}


def after(
    current: tuple[dict[str, Any], dict[str, Any]], update: UpdatePlan
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The cluster once an update is applied (the service stores plan.spec with its defaults filled)."""
    del current
    return fill_defaults(update.spec, project_number="123"), update.realized


# ------------------------------------------------------------------ create
def test_a_new_cluster_reports_empty_node_images_and_runs_the_defaults() -> None:
    spec, realized = created()
    assert images_of(spec) == {"cpu": "", "login": "", "gpu": ""}
    assert realized == {
        "images": {"cpu": f"{IMG}/cpu-v1", "login": f"{IMG}/cpu-v1", "gpu": f"{IMG}/gpu-v1"},
        "serviceScripts": "s1",
        "userImages": [],
    }


def test_initial_realized_uses_a_set_node_image_and_refuses_a_type_without_images() -> None:
    payload = base_payload()
    payload["node_pools"][2]["node_image"] = "projects/mine/global/images/custom"
    spec = input_dict(ModelDevelopmentCluster.model_validate(payload))
    realized = initial_realized(spec, CATALOG, CREATED)
    assert realized["images"]["gpu"] == "projects/mine/global/images/custom"
    assert realized["userImages"] == ["gpu"]
    cpu_only = ImageCatalog.from_dicts(
        (
            "cpu",
            {
                "images": [
                    {"image": f"{IMG}/c", "machineFamilies": ["n2"], "releaseTime": "2026-01-01T00:00:00Z"}
                ]
            },
        )
    )
    with pytest.raises(LookupError):
        cpu_only.default_image("a3-highgpu-8g", CREATED)
    spec = input_dict(ModelDevelopmentCluster.model_validate(base_payload()))
    with pytest.raises(ApiError) as caught:
        initial_realized(spec, cpu_only, CREATED)
    assert [v.field for v in caught.value.violations] == ["node_pools[2].node_image"]


# ------------------------------------------------------------------ mask and mode
@pytest.mark.parametrize("path", list(MASKABLE))
def test_every_maskable_path_in_both_spellings(path: str) -> None:
    camel = ".".join(p.split("_")[0] + "".join(w.title() for w in p.split("_")[1:]) for p in path.split("."))
    assert parse_update_mask(path) == [path]
    assert parse_update_mask(camel) == [path]


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("display_name", "cannot be updated"),
        ("displayName", "cannot be updated"),
        ("network", "immutable"),
        ("network.subnetwork", "immutable"),
        ("runtime_spec", "immutable"),
        ("orchestrator_spec.slurm_spec.home_directory_storage", "immutable"),
        ("node_pools.machine_spec", "immutable"),
        ("node_pools.provisioning_model", "immutable"),
        ("node_pools.confidential_instance_config", "immutable"),
        ("node_pools.id", "immutable"),
        ("cluster_status", "output only"),
        ("clusterEvents", "output only"),
        ("create_time", "output only"),
        ("node_pools.effective_flex_start_max_duration", "output only"),
        ("node_pools.scaling_spec", "replaced whole"),
        ("labels.team", "replaced whole"),
        ("orchestrator_spec.slurm_spec.config.PriorityWeightAge", "replaced whole"),
        ("orchestrator_spec", "not a field of ModelDevelopmentCluster that can be updated"),
        ("lustre_export_config", "not a field"),
        ("bogus", "not a field"),
    ],
)
def test_unmaskable_paths_are_refused_by_name(path: str, words: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_update_mask(f"labels,{path}")
    [violation] = caught.value.violations
    assert violation.field == "update_mask"
    assert words in violation.description


def test_no_mask() -> None:
    assert parse_update_mask(None) is None
    assert parse_update_mask("") is None
    assert parse_update_mask(" , ") is None
    assert parse_update_mask("labels, nodePools,labels") == ["labels", "node_pools"]


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        (None, UpdateMode.USER_AND_SERVICE),
        ("", UpdateMode.USER_AND_SERVICE),
        ("UPDATE_MODE_UNSPECIFIED", UpdateMode.USER_AND_SERVICE),
        ("0", UpdateMode.USER_AND_SERVICE),
        ("USER_AND_SERVICE", UpdateMode.USER_AND_SERVICE),
        ("USER_ONLY", UpdateMode.USER_ONLY),
        ("1", UpdateMode.USER_ONLY),
    ],
)
def test_update_modes(value: str | None, mode: UpdateMode) -> None:
    assert parse_update_mode(value) == mode


def test_bad_update_mode() -> None:
    with pytest.raises(ApiError) as caught:
        parse_update_mode("SOMETIMES")
    assert [v.field for v in caught.value.violations] == ["update_mode"]


def test_a_bad_mask_is_refused_before_anything_else() -> None:
    assert list(refused(created(), base_payload(), "display_name")) == ["update_mask"]


# ------------------------------------------------------------------ masked updates
def test_only_masked_fields_change() -> None:
    body = base_payload()
    body["labels"] = {"team": "a"}
    body["display_name"] = "renamed"  # not in the mask: ignored
    body["node_pools"][0]["scaling_spec"] = {"min_node_count": 0, "max_node_count": 9}  # ignored
    slurm(body)["config"] = {"PriorityWeightAge": "1"}  # ignored
    current = created()
    update = plan(current, body, "labels", "USER_ONLY")
    expected = copy.deepcopy(current[0])
    expected["labels"] = {"team": "a"}
    assert update.spec == expected
    assert update.changes == ["labels replaced"]
    assert update.recreate_pools == []
    assert update.realized == current[1]


def test_a_masked_path_missing_from_the_body_is_cleared() -> None:
    payload = base_payload()
    payload["labels"] = {"team": "a"}
    slurm(payload)["config"] = {"PriorityWeightAge": "1000"}
    slurm(payload)["prolog_bash_scripts"] = ["echo pro"]
    spec = fill_defaults(input_dict(ModelDevelopmentCluster.model_validate(payload)), "123")
    current = (spec, initial_realized(spec, CATALOG, CREATED))
    body: dict[str, Any] = {}
    mask = f"labels,{S}.config,{S}.prolog_bash_scripts"
    update = plan(current, body, mask, "USER_ONLY")
    assert "labels" not in update.spec
    assert "config" not in slurm_of(update.spec)
    assert "prologBashScripts" not in slurm_of(update.spec)
    assert sorted(update.changes) == ["Slurm config cleared", "labels cleared", "prolog scripts cleared"]
    # clearing a required field fails validation
    assert refused(current, body, "node_pools") == {
        "node_pools": "Required field is not set.",
        f"{S}.login_node_pool_id": "no node pool 'login' in node_pools",
        f"{S}.partitions[0].node_pool_ids[0]": "no node pool 'cpu' in node_pools",
        f"{S}.partitions[1].node_pool_ids[0]": "no node pool 'gpu' in node_pools",
    }
    assert list(refused(current, body, f"{S}.partitions")) == [f"{S}.partitions"]
    assert list(refused(current, body, f"{S}.login_node_pool_id")) == [f"{S}.login_node_pool_id"]


@pytest.mark.parametrize(
    ("path", "key", "first", "second"),
    [
        ("prolog_bash_scripts", "prologBashScripts", ["echo a", "echo b"], ["echo c"]),
        ("epilog_bash_scripts", "epilogBashScripts", ["echo a", "echo b"], ["echo c"]),
        (
            "config",
            "config",
            {"PriorityWeightAge": "1", "PreemptMode": "REQUEUE"},
            {"PriorityWeightQOS": "2"},
        ),
        (
            "partitions",
            "partitions",
            [{"id": "cpu", "nodePoolIds": ["cpu"]}, {"id": "gpu", "nodePoolIds": ["gpu"]}],
            [{"id": "all", "nodePoolIds": ["cpu", "gpu"], "config": {"MaxTime": "60"}}],
        ),
        (
            "node_sets",
            "nodeSets",
            [{"nodePoolId": "gpu", "config": {"Weight": "5", "Features": "h100"}}],
            [{"nodePoolId": "cpu", "config": {"Weight": "1"}}],
        ),
    ],
)
def test_repeated_fields_and_maps_are_replaced_whole(path: str, key: str, first: Any, second: Any) -> None:
    current = created()
    body = base_payload()
    slurm(body)[path] = first
    current = after(current, plan(current, body, f"{S}.{path}", "USER_ONLY"))
    assert slurm_of(current[0])[key] == first
    slurm(body)[path] = second  # nothing of `first` survives, nothing is merged
    update = plan(current, body, f"{S}.{path}", "USER_ONLY")
    assert slurm_of(update.spec)[key] == second
    assert update.recreate_pools == []


def test_partition_and_node_set_config_maps_are_replaced_whole() -> None:
    current = created()
    body = base_payload()
    slurm(body)["partitions"][1]["config"] = {"MaxTime": "60", "PriorityTier": "2"}
    slurm(body)["node_sets"] = [{"node_pool_id": "gpu", "config": {"Weight": "5", "Features": "h100"}}]
    mask = f"{S}.partitions,{S}.node_sets"
    current = after(current, plan(current, body, mask, "USER_ONLY"))
    slurm(body)["partitions"][1]["config"] = {"PriorityTier": "3"}
    slurm(body)["node_sets"] = [{"node_pool_id": "gpu", "config": {"Weight": "6"}}]
    update = plan(current, body, mask, "USER_ONLY")
    assert slurm_of(update.spec)["partitions"][1] == {
        "id": "gpu",
        "nodePoolIds": ["gpu"],
        "config": {"PriorityTier": "3"},
    }
    assert slurm_of(update.spec)["nodeSets"] == [{"nodePoolId": "gpu", "config": {"Weight": "6"}}]
    slurm(body)["partitions"][1].pop("config")
    slurm(body)["node_sets"] = [{"node_pool_id": "gpu"}]
    update = plan(current, body, mask, "USER_ONLY")
    assert slurm_of(update.spec)["partitions"][1] == {"id": "gpu", "nodePoolIds": ["gpu"]}
    assert slurm_of(update.spec)["nodeSets"] == [{"nodePoolId": "gpu"}]


def test_labels_are_replaced_whole() -> None:
    current = created()
    body = base_payload()
    body["labels"] = {"a": "1", "b": "2"}
    current = after(current, plan(current, body, "labels", "USER_ONLY"))
    body["labels"] = {"c": "3"}
    assert plan(current, body, "labels", "USER_ONLY").spec["labels"] == {"c": "3"}


def test_node_pools_are_replaced_whole() -> None:
    current = created()
    body = base_payload()
    del body["node_pools"][2]  # drop the GPU pool ...
    refusal = refused(current, body, "node_pools", "USER_ONLY")
    assert refusal == {f"{S}.partitions[1].node_pool_ids[0]": "no node pool 'gpu' in node_pools"}
    slurm(body)["partitions"] = [{"id": "cpu", "node_pool_ids": ["cpu"]}]  # ... and its partition
    update = plan(current, body, f"node_pools,{S}.partitions", "USER_ONLY")
    assert [p["id"] for p in update.spec["nodePools"]] == ["cpu", "login"]
    assert update.realized["images"] == {"cpu": f"{IMG}/cpu-v1", "login": f"{IMG}/cpu-v1"}
    assert "node pool 'gpu' removed" in update.changes and "partitions replaced" in update.changes
    # an omitted optional pool field goes back to its default: the boot disk of the seed payload is dropped
    body = base_payload()
    del body["node_pools"][0]["boot_disk"]
    update = plan(current, body, "node_pools", "USER_ONLY")
    assert update.spec["nodePools"][0]["bootDisk"] == {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}
    assert update.recreate_pools == ["cpu"]


def test_scaling_a_pool_recreates_nothing() -> None:
    current = created()
    body = base_payload()
    body["node_pools"][0]["scaling_spec"] = {"min_node_count": 1, "max_node_count": 8}
    update = plan(current, body, "node_pools", "USER_ONLY")
    assert update.spec["nodePools"][0]["scalingSpec"] == {"minNodeCount": "1", "maxNodeCount": "8"}
    assert update.recreate_pools == []
    assert update.changes == ["node pool 'cpu' scales to 1..8 nodes"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("startup_script", "echo hello"),
        ("filestores", ["projects/p/locations/us-central1-a/instances/data"]),
        ("lustres", ["projects/p/locations/us-central1-a/instances/scratch"]),
        ("boot_disk", {"boot_disk_type": "pd-ssd", "boot_disk_size_gb": 200}),
        ("zone", "us-central1-b"),
        ("enable_public_ips", False),
    ],
)
def test_storage_and_startup_changes_recreate_the_pool(field: str, value: Any) -> None:
    body = base_payload()
    body["node_pools"][1][field] = value
    update = plan(created(), body, "node_pools", "USER_ONLY")
    assert update.recreate_pools == ["login"]
    assert f"{field} changed" in " ".join(update.changes)


def test_a_new_pool_gets_the_current_default_image() -> None:
    body = base_payload()
    body["node_pools"].append(
        {
            "id": "more",
            "machine_spec": {"machine_type": "n2-standard-16"},
            "scaling_spec": {"max_node_count": 3},
        }
    )
    slurm(body)["partitions"][0]["node_pool_ids"] = ["cpu", "more"]
    mask = f"node_pools,{S}.partitions"
    user_only = plan(created(), body, mask, "USER_ONLY", now=LATEST)
    assert user_only.realized["images"]["more"] == f"{IMG}/cpu-v3"
    assert user_only.realized["images"]["cpu"] == f"{IMG}/cpu-v1"  # the others stay
    assert images_of(user_only.spec)["more"] == ""  # USER_ONLY reports what was set: nothing
    assert user_only.recreate_pools == []
    assert f"node pool 'more' added, image {IMG}/cpu-v3" in user_only.changes
    both = plan(created(), body, mask, "USER_AND_SERVICE", now=LATEST)
    assert images_of(both.spec)["more"] == f"{IMG}/cpu-v3"
    assert "more" not in both.recreate_pools


def test_immutable_pool_fields() -> None:
    current = created()
    body = base_payload()
    body["node_pools"][0]["machine_spec"]["machine_type"] = "n2-standard-16"
    body["node_pools"][1]["provisioning_model"] = "SPOT"
    assert list(refused(current, body, "node_pools")) == [
        "node_pools[0].machine_spec",
        "node_pools[1].provisioning_model",
    ]
    body = base_payload()
    body["node_pools"][0]["provisioning_model"] = "ON_DEMAND"  # what the server resolved: no change
    body["node_pools"][2]["provisioning_model"] = "RESERVATION"
    assert plan(current, body, "node_pools", "USER_ONLY").recreate_pools == []


def test_output_only_fields_in_the_body_are_ignored() -> None:
    body = base_payload()
    body["cluster_status"] = {"state": "ERROR"}
    body["name"] = "projects/x/locations/y/modelDevelopmentClusters/z"
    body["node_pools"][2]["effective_flex_start_max_duration"] = "5s"
    update = plan(created(), body, None, "USER_ONLY")
    assert "clusterStatus" not in update.spec and "name" not in update.spec
    assert "effectiveFlexStartMaxDuration" not in update.spec["nodePools"][2]


# ------------------------------------------------------------------ without a mask
def test_no_mask_diffs_the_whole_payload() -> None:
    payload = base_payload()
    payload["labels"] = {"team": "a"}
    slurm(payload)["config"] = {"PriorityWeightAge": "1000"}
    slurm(payload)["node_sets"] = [{"node_pool_id": "gpu", "config": {"Weight": "1"}}]
    spec = fill_defaults(input_dict(ModelDevelopmentCluster.model_validate(payload)), "123")
    current = (spec, initial_realized(spec, CATALOG, CREATED))
    # the documents' payload: new node counts, and no labels, config or node sets
    body = base_payload()
    body["node_pools"][0]["scaling_spec"] = {"min_node_count": 3, "max_node_count": 6}
    update = plan(current, body, None, "USER_ONLY")
    assert update.spec["nodePools"][0]["scalingSpec"] == {"minNodeCount": "3", "maxNodeCount": "6"}
    assert "labels" not in update.spec
    assert "config" not in slurm_of(update.spec) and "nodeSets" not in slurm_of(update.spec)
    assert sorted(update.changes) == [
        "Slurm config cleared",
        "labels cleared",
        "node pool 'cpu' scales to 3..6 nodes",
        "node sets cleared",
    ]
    # the same payload again changes nothing
    assert plan(after(current, update), body, None, "USER_ONLY").changes == []


def test_no_mask_refuses_changes_to_fields_that_cannot_be_updated() -> None:
    current = created()
    body = base_payload()
    body["display_name"] = "renamed"
    body["network"]["network"] = "projects/p/global/networks/other"
    slurm(body)["home_directory_storage"] = "projects/p/locations/us-central1-a/instances/home2"
    body["runtime_spec"] = {"service_account": "sa@p.iam.gserviceaccount.com"}
    body["lustre_export_config"] = {"destination_bucket": "backups"}
    assert list(refused(current, body, None)) == [
        "display_name",
        "lustre_export_config",
        "network",
        "runtime_spec",
        f"{S}.home_directory_storage",
    ]
    # left out, they keep their values
    body = base_payload()
    del body["display_name"], body["network"]
    update = plan(current, body, None, "USER_ONLY")
    assert update.spec["displayName"] == "trainers"
    assert update.spec["network"] == current[0]["network"]


# ------------------------------------------------------------------ config vs scheduling/accounting
def legacy_cluster() -> tuple[dict[str, Any], dict[str, Any]]:
    payload = base_payload()
    slurm(payload)["scheduling"] = {"priority_weight_qos": "5", "priority_type": "priority/multifactor"}
    slurm(payload)["accounting"] = {"accounting_storage_enforce": "limits"}
    spec = fill_defaults(input_dict(ModelDevelopmentCluster.model_validate(payload)), "123")
    return spec, initial_realized(spec, CATALOG, CREATED)


def test_config_next_to_legacy_fields_is_refused() -> None:
    body = base_payload()
    slurm(body)["config"] = {"PriorityWeightQOS": "5"}
    found = refused(legacy_cluster(), body, f"{S}.config")
    assert list(found) == [f"{S}.config"]
    assert "scheduling and accounting in the update mask" in found[f"{S}.config"]
    # a request that sets both is refused too
    slurm(body)["scheduling"] = {"priority_weight_qos": "5"}
    assert list(refused(legacy_cluster(), body, f"{S}.config,{S}.scheduling")) == [f"{S}.config"]


def test_migration_from_legacy_fields_to_config() -> None:
    body = base_payload()
    slurm(body)["config"] = {
        "PriorityType": "priority/multifactor",
        "PriorityWeightQOS": "5",
        "AccountingStorageEnforce": "limits",
    }
    mask = f"{S}.config,{S}.scheduling,{S}.accounting"
    update = plan(legacy_cluster(), body, mask, "USER_ONLY")
    migrated = slurm_of(update.spec)
    assert migrated["config"] == slurm(body)["config"]
    assert "scheduling" not in migrated and "accounting" not in migrated
    assert sorted(update.changes) == [
        "Slurm config replaced",
        "accounting (legacy) cleared",
        "scheduling (legacy) cleared",
    ]
    # afterwards the config path alone is enough
    current = after(legacy_cluster(), update)
    slurm(body)["config"] = {"PriorityWeightQOS": "10"}
    assert slurm_of(plan(current, body, f"{S}.config", "USER_ONLY").spec)["config"] == {
        "PriorityWeightQOS": "10"
    }


def test_legacy_fields_can_still_be_updated_alone() -> None:
    body = base_payload()
    slurm(body)["scheduling"] = {"priority_weight_age": "100"}
    update = plan(legacy_cluster(), body, f"{S}.scheduling", "USER_ONLY")
    assert slurm_of(update.spec)["scheduling"] == {"priorityWeightAge": "100"}
    assert slurm_of(update.spec)["accounting"] == {"accountingStorageEnforce": "limits"}


# ------------------------------------------------------------------ default partition
def test_change_only_the_default_partition() -> None:
    current = created()
    body = {"orchestrator_spec": {"slurm_spec": {"default_partition_id": "gpu"}}}
    update = plan(current, body, f"{S}.default_partition_id", "USER_ONLY")
    assert slurm_of(update.spec)["defaultPartitionId"] == "gpu"
    assert slurm_of(update.spec)["partitions"] == slurm_of(current[0])["partitions"]
    assert update.changes == ["default partition -> 'gpu'"]
    assert default_partition(update.spec) == "gpu"
    body = {"orchestrator_spec": {"slurm_spec": {"default_partition_id": "tpu"}}}
    assert list(refused(current, body, f"{S}.default_partition_id")) == [f"{S}.default_partition_id"]


def test_removing_or_renaming_the_default_partition_is_refused() -> None:
    payload = base_payload()
    slurm(payload)["default_partition_id"] = "gpu"
    spec = fill_defaults(input_dict(ModelDevelopmentCluster.model_validate(payload)), "123")
    current = (spec, initial_realized(spec, CATALOG, CREATED))
    for partitions in (
        [{"id": "cpu", "node_pool_ids": ["cpu", "gpu"]}],  # removed
        [{"id": "cpu", "node_pool_ids": ["cpu"]}, {"id": "h100", "node_pool_ids": ["gpu"]}],  # renamed
    ):
        body = base_payload()
        slurm(body)["partitions"] = partitions
        found = refused(current, body, f"{S}.partitions")
        assert list(found) == [f"{S}.partitions"], partitions
        assert "'gpu'" in found[f"{S}.partitions"] and "default_partition_id" in found[f"{S}.partitions"]
    # moving the default in the same update is fine
    slurm(body)["default_partition_id"] = "h100"
    update = plan(current, body, f"{S}.partitions,{S}.default_partition_id", "USER_ONLY")
    assert slurm_of(update.spec)["defaultPartitionId"] == "h100"


def test_without_a_default_the_first_partition_is_the_default() -> None:
    current = created()
    assert "defaultPartitionId" not in slurm_of(current[0]) and default_partition(current[0]) == "cpu"
    body = base_payload()
    slurm(body)["partitions"] = [
        {"id": "gpu", "node_pool_ids": ["gpu"]},
        {"id": "cpu2", "node_pool_ids": ["cpu"]},
    ]
    update = plan(current, body, f"{S}.partitions", "USER_ONLY")
    assert "defaultPartitionId" not in slurm_of(update.spec)  # the field stays empty
    assert default_partition(update.spec) == "gpu"


# ------------------------------------------------------------------ node images and service scripts
def test_user_and_service_moves_every_pool_to_the_current_default() -> None:
    current = created()
    body = base_payload()
    body["labels"] = {"team": "a"}  # an unrelated change is enough
    update = plan(current, body, "labels", "USER_AND_SERVICE", now=LATER)
    assert images_of(update.spec) == {
        "cpu": f"{IMG}/cpu-v2",
        "login": f"{IMG}/cpu-v2",
        "gpu": f"{IMG}/gpu-v2",
    }
    assert update.realized == {
        "images": {"cpu": f"{IMG}/cpu-v2", "login": f"{IMG}/cpu-v2", "gpu": f"{IMG}/gpu-v2"},
        "serviceScripts": "s2",
        "userImages": [],
    }
    assert update.recreate_pools == ["cpu", "login", "gpu"]
    assert f"node pool 'cpu': image {IMG}/cpu-v1 -> {IMG}/cpu-v2 (nodes are recreated)" in update.changes
    assert "service scripts s1 -> s2" in update.changes
    # resolved once, the same update changes nothing more
    current = after(current, update)
    again = plan(current, body, "labels", "USER_AND_SERVICE", now=LATER)
    assert again.recreate_pools == [] and again.changes == []
    # the image is resolved on every USER_AND_SERVICE update: the next label edit moves to a newer default,
    # although the pools now report the image they were resolved to
    later = plan(current, body, "labels", "USER_AND_SERVICE", now=LATEST)
    assert images_of(later.spec) == {"cpu": f"{IMG}/cpu-v3", "login": f"{IMG}/cpu-v3", "gpu": f"{IMG}/gpu-v2"}
    assert later.recreate_pools == ["cpu", "login"]
    # USER_ONLY leaves them where they are
    assert plan(current, body, "labels", "USER_ONLY", now=LATEST).recreate_pools == []


@pytest.mark.parametrize("mode", [None, "", "UPDATE_MODE_UNSPECIFIED"])
def test_unspecified_mode_is_user_and_service(mode: str | None) -> None:
    update = plan(created(), base_payload(), "labels", mode, now=LATER)
    assert update.realized["serviceScripts"] == "s2"
    assert update.recreate_pools == ["cpu", "login", "gpu"]


def test_user_only_keeps_images_and_scripts() -> None:
    current = created()
    body = base_payload()
    body["labels"] = {"team": "a"}
    body["node_pools"][0]["scaling_spec"] = {"min_node_count": 1, "max_node_count": 4}
    update = plan(current, body, "labels,node_pools", "USER_ONLY", now=LATEST)
    assert images_of(update.spec) == {"cpu": "", "login": "", "gpu": ""}
    assert update.realized == current[1]
    assert update.recreate_pools == []


def test_user_only_with_a_node_image_moves_that_pool_only() -> None:
    current = created()
    body = base_payload()
    body["node_pools"][2]["node_image"] = f"{IMG}/gpu-v2"
    update = plan(current, body, "node_pools", "USER_ONLY", now=LATEST)
    assert images_of(update.spec) == {"cpu": "", "login": "", "gpu": f"{IMG}/gpu-v2"}
    assert update.realized["images"] == {
        "cpu": f"{IMG}/cpu-v1",
        "login": f"{IMG}/cpu-v1",
        "gpu": f"{IMG}/gpu-v2",
    }
    assert update.realized["serviceScripts"] == "s1"
    assert update.recreate_pools == ["gpu"]


def test_a_pinned_image_holds_only_while_it_is_sent_again() -> None:
    current = created()
    body = base_payload()
    body["node_pools"][0]["node_image"] = "projects/mine/global/images/family/cpu-pinned"
    pinned = plan(current, body, "node_pools", "USER_AND_SERVICE", now=LATEST)
    assert images_of(pinned.spec) == {
        "cpu": "projects/mine/global/images/family/cpu-pinned",
        "login": f"{IMG}/cpu-v3",
        "gpu": f"{IMG}/gpu-v2",
    }
    current = after(current, pinned)
    assert current[1]["userImages"] == ["cpu"]
    # sent again: kept
    assert plan(current, body, "node_pools", "USER_AND_SERVICE", now=LATEST).recreate_pools == []
    # a mask that leaves node_pools out keeps the pools, pin included
    kept = plan(current, body, "labels", "USER_AND_SERVICE", now=LATEST)
    assert kept.recreate_pools == [] and kept.realized["userImages"] == ["cpu"]
    # the value Get reports for a service-chosen image, sent back, pins that pool too
    resent = base_payload()
    for pool, image in zip(resent["node_pools"], images_of(current[0]).values(), strict=True):
        pool["node_image"] = image
    assert plan(current, resent, "node_pools", "USER_AND_SERVICE", now=LATEST).realized["userImages"] == [
        "cpu",
        "login",
        "gpu",
    ]
    # node_pools replaced without node_image: the pool moves to the current default
    update = plan(current, base_payload(), "node_pools", "USER_AND_SERVICE", now=LATEST)
    assert images_of(update.spec)["cpu"] == f"{IMG}/cpu-v3"
    assert update.recreate_pools == ["cpu"]


def test_user_only_reports_the_node_image_as_it_was() -> None:
    current = created()
    current = after(current, plan(current, base_payload(), "labels", "USER_AND_SERVICE", now=LATER))
    assert images_of(current[0])["cpu"] == f"{IMG}/cpu-v2"
    # node_pools sent back without node_image under USER_ONLY: the pools stay, and so does what they report
    update = plan(current, base_payload(), "node_pools", "USER_ONLY", now=LATEST)
    assert images_of(update.spec) == {
        "cpu": f"{IMG}/cpu-v2",
        "login": f"{IMG}/cpu-v2",
        "gpu": f"{IMG}/gpu-v2",
    }
    assert update.recreate_pools == []


def test_the_default_advances_over_time_through_an_operator_file(tmp_path: Path) -> None:
    override = tmp_path / "node-images.json"
    catalog = ImageCatalog.load(override)  # no file yet: the packaged catalog
    spec = fill_defaults(input_dict(ModelDevelopmentCluster.model_validate(base_payload())), "123")
    december = datetime(2026, 12, 1, tzinfo=UTC)
    current = (spec, initial_realized(spec, catalog, december))
    packaged = "projects/trainworks-images/global/images/slurm-cpu-v20261001"
    assert current[1]["images"]["cpu"] == packaged
    update = plan(current, base_payload(), "labels", "USER_AND_SERVICE", now=december, catalog=catalog)
    assert update.recreate_pools == [] and images_of(update.spec)["cpu"] == packaged
    current = after(current, update)

    newer = "projects/trainworks-images/global/images/slurm-cpu-v20270101"
    override.write_text(
        json.dumps(
            {
                "images": [
                    {"image": newer, "machineTypes": ["n2-standard-8"], "released": "2027-01-01T00:00:00Z"}
                ]
            }
        )
    )
    catalog = ImageCatalog.load(override)
    # still December: not released yet, nothing moves
    assert (
        plan(current, base_payload(), "labels", "USER_AND_SERVICE", now=december, catalog=catalog).changes
        == []
    )
    january = datetime(2027, 1, 2, tzinfo=UTC)
    for mask in ("labels", "node_pools", None):
        update = plan(current, base_payload(), mask, "USER_AND_SERVICE", now=january, catalog=catalog)
        assert images_of(update.spec) == {"cpu": newer, "login": newer, "gpu": f"{IMG}/slurm-gpu-v20261001"}
        assert update.recreate_pools == ["cpu", "login"], mask


def test_realized_keeps_what_else_the_service_stores() -> None:
    spec, realized = created()
    realized = {**realized, "slurmPort": 17000}
    update = plan((spec, realized), base_payload(), "labels", "USER_ONLY")
    assert update.realized["slurmPort"] == 17000


def test_login_pool_change_recreates_both_pools() -> None:
    current = created()
    body = base_payload()
    body["node_pools"].append(
        {
            "id": "login2",
            "machine_spec": {"machine_type": "n2-standard-4"},
            "scaling_spec": {"min_node_count": 1, "max_node_count": 1},
        }
    )
    slurm(body)["login_node_pool_id"] = "login2"
    update = plan(current, body, f"node_pools,{S}.login_node_pool_id", "USER_ONLY")
    assert slurm_of(update.spec)["loginNodePoolId"] == "login2"
    assert update.recreate_pools == ["login"]  # login2 is new; the old login pool becomes a compute pool
    assert "login node pool -> 'login2'" in update.changes


def test_state_without_user_images_treats_reported_images_as_the_users() -> None:
    current = created()
    current = after(current, plan(current, base_payload(), "labels", "USER_AND_SERVICE", now=LATER))
    legacy = {k: v for k, v in current[1].items() if k != "userImages"}
    update = plan((current[0], legacy), base_payload(), "labels", "USER_AND_SERVICE", now=LATEST)
    assert update.recreate_pools == []  # conservative: nothing moves
    assert update.realized["userImages"] == ["cpu", "login", "gpu"]
