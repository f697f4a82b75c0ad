"""Pure planning: hardware, run ids, plans and CustomJob bodies (checked with the official proto)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from google.cloud import aiplatform_v1
from google.protobuf import json_format

from trainworks.catalog import machines
from trainworks.submit import plan as plan_module
from trainworks.submit.bootstrap import BOOTSTRAP_CODE
from trainworks.submit.config import HardwareConfig, RunConfig, SchedulingConfig, parse_run_config
from trainworks.submit.plan import (
    BUILT_IN_GPU_MACHINES,
    THREAD_ENV_NAMES,
    PlanError,
    ResolvedHardware,
    RunPlan,
    build_custom_job,
    make_run_id,
    plan_run,
    resolve_hardware,
    thread_env,
)

WHEN = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
HASH = "0123456789abcdef" * 4
PACKAGE_URI = "gs://my-code/runs/forecast-0123456789ab.zip"
CONFIG_URI = "gs://my-code/runs/forecast-20260304-050607-012345/config.yaml"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    package = tmp_path / "forecast"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "train.py").write_text("")
    return tmp_path


def config(project: Path, **changes: Any) -> RunConfig:
    data: dict[str, Any] = {
        "name": "forecast",
        "entry_module": "forecast.train",
        "package_dir": "forecast",
        "image": "python:3.11",
        "code_bucket": "my-code",
        "args": ["--epochs", "3"],
        **changes,
    }
    return parse_run_config(data, "test", base_dir=project)


def make_plan(project: Path, *, workers: int | None = None, **changes: Any) -> RunPlan:
    cfg = config(project, **changes)
    run_id = make_run_id(cfg.name, WHEN, HASH)
    return plan_run(cfg, run_id=run_id, package_uri=PACKAGE_URI, config_uri=CONFIG_URI, workers=workers)


def hardware(**fields: Any) -> HardwareConfig:
    return HardwareConfig.model_validate(fields)


def unchecked(**fields: Any) -> HardwareConfig:
    """A hardware section as a caller might build it in code, without the configuration's own checks."""
    return HardwareConfig.model_construct(**fields)


def strict_parse(body: dict[str, Any]) -> Any:
    """The official CustomJob proto, refusing unknown fields, bad enums and wrong JSON types."""
    return json_format.ParseDict(body, aiplatform_v1.CustomJob.pb()(), ignore_unknown_fields=False)


# ----------------------------------------------------------------------------------------- hardware
@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, ResolvedHardware("n1-standard-4", "ACCELERATOR_TYPE_UNSPECIFIED", 0, 4)),
        (
            {"machine_type": "n2-standard-16"},
            ResolvedHardware("n2-standard-16", "ACCELERATOR_TYPE_UNSPECIFIED", 0, 16),
        ),
        (
            {"machine_type": "c2-standard-30"},
            ResolvedHardware("c2-standard-30", "ACCELERATOR_TYPE_UNSPECIFIED", 0, 30),
        ),
        ({"threads": 2}, ResolvedHardware("n1-standard-4", "ACCELERATOR_TYPE_UNSPECIFIED", 0, 2)),
        (
            {"machine_type": "e2-highcpu-8", "threads": 16},
            ResolvedHardware("e2-highcpu-8", "ACCELERATOR_TYPE_UNSPECIFIED", 0, 16),
        ),
    ],
)
def test_cpu_resolution(fields: dict[str, Any], expected: ResolvedHardware) -> None:
    assert resolve_hardware(hardware(profile="cpu", **fields)) == expected


@pytest.mark.parametrize(
    ("gpu", "count", "machine", "accelerator", "threads"),
    [
        ("T4", 1, "n1-standard-4", "NVIDIA_TESLA_T4", 4),
        ("T4", 2, "n1-standard-8", "NVIDIA_TESLA_T4", 4),
        ("T4", 4, "n1-standard-16", "NVIDIA_TESLA_T4", 4),
        ("V100", 1, "n1-standard-4", "NVIDIA_TESLA_V100", 4),
        ("V100", 8, "n1-standard-32", "NVIDIA_TESLA_V100", 4),
        ("P100", 4, "n1-standard-16", "NVIDIA_TESLA_P100", 4),
        ("P4", 2, "n1-standard-8", "NVIDIA_TESLA_P4", 4),
        ("K80", 8, "n1-standard-32", "NVIDIA_TESLA_K80", 4),
        ("L4", 1, "g2-standard-4", "NVIDIA_L4", 4),
        ("L4", 2, "g2-standard-24", "NVIDIA_L4", 12),
        ("L4", 4, "g2-standard-48", "NVIDIA_L4", 12),
        ("L4", 8, "g2-standard-96", "NVIDIA_L4", 12),
        ("A100", 1, "a2-highgpu-1g", "NVIDIA_TESLA_A100", 12),
        ("A100", 2, "a2-highgpu-2g", "NVIDIA_TESLA_A100", 12),
        ("A100", 4, "a2-highgpu-4g", "NVIDIA_TESLA_A100", 12),
        ("A100", 8, "a2-highgpu-8g", "NVIDIA_TESLA_A100", 12),
        ("A100", 16, "a2-megagpu-16g", "NVIDIA_TESLA_A100", 6),
        ("A100_80GB", 1, "a2-ultragpu-1g", "NVIDIA_A100_80GB", 12),
        ("A100_80GB", 8, "a2-ultragpu-8g", "NVIDIA_A100_80GB", 12),
        ("H100", 1, "a3-highgpu-1g", "NVIDIA_H100_80GB", 26),
        ("H100", 2, "a3-highgpu-2g", "NVIDIA_H100_80GB", 26),
        ("H100", 4, "a3-highgpu-4g", "NVIDIA_H100_80GB", 26),
        ("H100", 8, "a3-highgpu-8g", "NVIDIA_H100_80GB", 26),
        ("H100_MEGA", 8, "a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 26),
        ("H200", 8, "a3-ultragpu-8g", "NVIDIA_H200_141GB", 28),
        ("NVIDIA_TESLA_T4", 1, "n1-standard-4", "NVIDIA_TESLA_T4", 4),  # the full enum name works too
    ],
)
def test_gpu_resolution(gpu: str, count: int, machine: str, accelerator: str, threads: int) -> None:
    resolved = resolve_hardware(hardware(profile="gpu", gpu_type=gpu, gpu_count=count))
    assert resolved == ResolvedHardware(machine, accelerator, count, threads)
    # Every choice is one the catalog (and so the server) accepts.
    catalog_machine = machines.machine_type(machine)
    assert catalog_machine is not None
    assert machines.check_accelerator(catalog_machine, accelerator, count) is None


def test_every_built_in_table_entry_is_in_the_catalog() -> None:
    for gpu, table in BUILT_IN_GPU_MACHINES.items():
        for count, machine in table.items():
            resolved = resolve_hardware(hardware(profile="gpu", gpu_type=gpu, gpu_count=count))
            assert resolved.machine_type == machine


def test_k80_is_kept_within_its_vcpu_limits() -> None:
    # One K80 allows at most 8 vCPUs: four per GPU fits; the table never picks a bigger machine.
    resolved = resolve_hardware(hardware(profile="gpu", gpu_type="K80", gpu_count=1))
    assert resolved.machine_type == "n1-standard-4"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"machine_type": "n1-highmem-8", "gpu_type": "T4"}, ("n1-highmem-8", "NVIDIA_TESLA_T4", 1, 8)),
        (
            {"machine_type": "n1-standard-16", "gpu_type": "V100", "gpu_count": 2},
            ("n1-standard-16", "NVIDIA_TESLA_V100", 2, 8),
        ),
        ({"machine_type": "a2-highgpu-4g"}, ("a2-highgpu-4g", "NVIDIA_TESLA_A100", 4, 12)),
        ({"machine_type": "g2-standard-12"}, ("g2-standard-12", "NVIDIA_L4", 1, 12)),
        (
            {"machine_type": "a3-megagpu-8g", "gpu_type": "H100_MEGA"},
            ("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 8, 26),
        ),
        ({"machine_type": "a2-ultragpu-2g", "threads": 4}, ("a2-ultragpu-2g", "NVIDIA_A100_80GB", 2, 4)),
    ],
)
def test_explicit_gpu_machines(fields: dict[str, Any], expected: tuple[str, str, int, int]) -> None:
    assert resolve_hardware(hardware(profile="gpu", **fields)) == ResolvedHardware(*expected)


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"gpu_type": "T4", "gpu_count": 8},
            "hardware.gpu_count",
            "T4 takes 1, 2 or 4 GPUs per replica, got 8",
        ),
        ({"gpu_type": "P100", "gpu_count": 8}, "hardware.gpu_count", "P100 takes 1, 2 or 4 GPUs per replica"),
        ({"gpu_type": "L4", "gpu_count": 3}, "hardware.gpu_count", "L4 takes 1, 2, 4 or 8 GPUs per replica"),
        ({"gpu_type": "A100", "gpu_count": 3}, "hardware.gpu_count", "A100 takes 1, 2, 4, 8 or 16 GPUs"),
        (
            {"gpu_type": "H100_MEGA", "gpu_count": 4},
            "hardware.gpu_count",
            "H100_MEGA takes 8 GPUs per replica",
        ),
        ({"gpu_type": "H200", "gpu_count": 1}, "hardware.gpu_count", "H200 takes 8 GPUs per replica"),
        ({"gpu_type": "T4", "gpu_count": 0}, "hardware.gpu_count", "must be >= 1 when profile is gpu"),
        ({}, "hardware.gpu_type", "required when profile is gpu"),
        ({"machine_type": "n1-standard-8"}, "hardware.gpu_type", "required when profile is gpu"),
        (
            {"machine_type": "e2-standard-4", "gpu_type": "T4"},
            "hardware.machine_type",
            "machine type e2-standard-4 does not support accelerators",
        ),
        (
            {"machine_type": "n1-standard-96", "gpu_type": "V100"},
            "hardware.machine_type",
            "1 x NVIDIA_TESLA_V100 supports at most 12 vCPUs",
        ),
        (
            {"machine_type": "n1-standard-4", "gpu_type": "T4", "gpu_count": 8},
            "hardware.gpu_count",
            "accelerator_count 8 is not allowed",
        ),
        (
            {"machine_type": "n1-standard-4", "gpu_type": "A100"},
            "hardware.machine_type",
            "accelerator_type NVIDIA_TESLA_A100 cannot be attached",
        ),
        (
            {"machine_type": "a2-highgpu-2g", "gpu_count": 1},
            "hardware.gpu_count",
            "machine type a2-highgpu-2g requires",
        ),
        (
            {"machine_type": "a3-highgpu-1g", "gpu_type": "A100"},
            "hardware.gpu_type",
            "machine type a3-highgpu-1g requires",
        ),
        ({"machine_type": "no-such-type", "gpu_type": "T4"}, "hardware", "has no no-such-type"),
    ],
)
def test_bad_gpu_combinations(fields: dict[str, Any], field: str, message: str) -> None:
    values: dict[str, Any] = {"profile": "gpu", "machine_type": None, "gpu_type": None, "gpu_count": None}
    with pytest.raises(PlanError) as info:
        resolve_hardware(unchecked(threads=None, **{**values, **fields}))
    assert info.value.field == field
    assert message in info.value.message
    assert str(info.value) == f"{field}: {info.value.message}"


def test_cpu_profile_refuses_gpu_machines() -> None:
    with pytest.raises(PlanError) as info:
        resolve_hardware(unchecked(profile="cpu", machine_type="a2-highgpu-1g", threads=None))
    assert info.value.field == "hardware.machine_type"


def test_a_machine_missing_from_the_catalog_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # A table entry the real catalog does not have: the planner must say which machine type is missing.
    monkeypatch.setitem(BUILT_IN_GPU_MACHINES["H200"], 4, "a3-ultragpu-4g")
    with pytest.raises(PlanError) as info:
        resolve_hardware(
            hardware(profile="gpu", gpu_type="H200", gpu_count=8).model_copy(update={"gpu_count": 4})
        )
    assert "has no a3-ultragpu-4g, needed for 4 x H200" in str(info.value)


def test_bad_combinations_are_refused_when_the_config_loads(project: Path) -> None:
    with pytest.raises(ValueError, match=r"test: hardware\.gpu_count: T4 takes 1, 2 or 4 GPUs per replica"):
        config(project, hardware={"profile": "gpu", "gpu_type": "T4", "gpu_count": 8})


# ----------------------------------------------------------------------------------------- run ids
def test_run_id_format() -> None:
    run_id = make_run_id("forecast", WHEN, "ABCDEF0123")
    assert run_id == "forecast-20260304-050607-abcdef"
    assert re.fullmatch(r"[a-z][a-z0-9-]*", run_id)


def test_run_id_takes_aware_times_in_utc() -> None:
    local = datetime(2026, 3, 4, 7, 6, 7, tzinfo=timezone(timedelta(hours=2)))
    assert make_run_id("x", local, HASH) == "x-20260304-050607-012345"
    assert make_run_id("x", datetime(2026, 3, 4, 7, 6, 7), HASH) == "x-20260304-070607-012345"


def test_run_id_of_the_longest_name_is_a_label_value() -> None:
    run_id = make_run_id("a" * 40, WHEN, HASH)
    assert len(run_id) == 63
    assert not plan_module.label_problems({"trainworks-run-id": run_id})


@pytest.mark.parametrize(
    ("name", "code_hash"),
    [("Forecast", HASH), ("a" * 41, HASH), ("forecast", "abc"), ("forecast", "ab+/=cdef")],
)
def test_run_id_refuses_what_is_not_label_safe(name: str, code_hash: str) -> None:
    with pytest.raises(PlanError):
        make_run_id(name, WHEN, code_hash)


# ----------------------------------------------------------------------------------------- plans
def test_plan_run_fields(project: Path) -> None:
    plan = make_plan(project, service_account="sa@p.iam.gserviceaccount.com")
    assert plan.run_id == plan.display_name == "forecast-20260304-050607-012345"
    assert (plan.machine_type, plan.accelerator_type, plan.accelerator_count) == (
        "n1-standard-4",
        "ACCELERATOR_TYPE_UNSPECIFIED",
        0,
    )
    assert (plan.worker_count, plan.requested_workers, plan.hardware, plan.gpu_type, plan.threads) == (
        1,
        1,
        "cpu",
        None,
        4,
    )
    assert (plan.image_uri, plan.python, plan.package_uri, plan.config_uri) == (
        "python:3.11",
        "python3",
        PACKAGE_URI,
        CONFIG_URI,
    )
    assert plan.service_account == "sa@p.iam.gserviceaccount.com"
    assert (plan.region, plan.entry_module, plan.args) == ("", "forecast.train", ("--epochs", "3"))


def test_plan_workers_come_from_the_config_or_the_argument(project: Path) -> None:
    assert make_plan(project, workers=3).worker_count == 3
    assert make_plan(project, workers=3).requested_workers == 3
    from_config = make_plan(project, **{"workers": 5})
    assert (from_config.worker_count, from_config.requested_workers) == (5, 5)
    with pytest.raises(PlanError, match="workers: must be >= 1"):
        make_plan(project, workers=0)


def test_plan_of_a_gpu_machine_names_its_gpu(project: Path) -> None:
    plan = make_plan(project, hardware={"profile": "gpu", "machine_type": "a2-ultragpu-2g"})
    assert (plan.hardware, plan.gpu_type, plan.accelerator_type, plan.accelerator_count, plan.threads) == (
        "gpu",
        "A100_80GB",
        "NVIDIA_A100_80GB",
        2,
        12,
    )


@pytest.mark.parametrize(
    ("package_uri", "config_uri"),
    [("/tmp/pkg.zip", CONFIG_URI), (PACKAGE_URI, "gs://my-code/"), ("gs://Bad_Bucket/x.zip", CONFIG_URI)],
)
def test_plan_needs_gcs_object_uris(project: Path, package_uri: str, config_uri: str) -> None:
    with pytest.raises(PlanError):
        plan_run(config(project), run_id="r", package_uri=package_uri, config_uri=config_uri)


def test_with_workers_and_in_region_return_copies(project: Path) -> None:
    plan = make_plan(project, workers=4)
    fewer = plan.with_workers(2)
    placed = fewer.in_region("europe-west4")
    assert (fewer.worker_count, fewer.requested_workers, fewer.region) == (2, 4, "")
    assert (placed.worker_count, placed.region) == (2, "europe-west4")
    assert (plan.worker_count, plan.region) == (4, "")
    with pytest.raises(PlanError):
        plan.with_workers(0)


def test_to_dict_is_json_safe_and_complete(project: Path) -> None:
    plan = make_plan(project, workers=2, hardware={"profile": "gpu", "gpu_type": "L4"}).in_region("us-east1")
    summary = plan.to_dict()
    assert json.loads(json.dumps(summary)) == summary
    assert set(summary) == {f.name for f in plan.__dataclass_fields__.values()}
    assert summary["args"] == ["--epochs", "3"]
    assert (summary["machine_type"], summary["gpu_type"], summary["region"]) == (
        "g2-standard-4",
        "L4",
        "us-east1",
    )
    assert RunPlan(**{**summary, "args": tuple(summary["args"])}) == plan


def test_thread_env() -> None:
    env = thread_env(6)
    assert set(env) == set(THREAD_ENV_NAMES)
    assert {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"} <= set(env)
    assert set(env.values()) == {"6"}
    with pytest.raises(PlanError):
        thread_env(0)


# ----------------------------------------------------------------------------------------- job bodies
def test_one_worker_is_one_pool(project: Path) -> None:
    plan = make_plan(project)
    body = build_custom_job(plan)
    pools = body["jobSpec"]["workerPoolSpecs"]
    assert len(pools) == 1
    assert pools[0]["replicaCount"] == "1"
    assert pools[0]["machineSpec"] == {"machineType": "n1-standard-4"}  # no accelerator fields for cpu
    container = pools[0]["containerSpec"]
    assert container["imageUri"] == "python:3.11"
    assert container["command"] == ["python3", "-c", BOOTSTRAP_CODE]
    assert container["args"] == [
        "--package-uri",
        PACKAGE_URI,
        "--module",
        "forecast.train",
        "--",
        "--epochs",
        "3",
    ]
    assert body["displayName"] == plan.display_name
    assert set(body["jobSpec"]) == {"workerPoolSpecs"}  # nothing optional unless asked for
    strict_parse(body)


def test_three_workers_are_a_primary_and_two_identical_replicas(project: Path) -> None:
    plan = make_plan(project, workers=3, hardware={"profile": "gpu", "gpu_type": "T4", "gpu_count": 2})
    body = build_custom_job(plan, env={"SEED": "1"})
    first, second = body["jobSpec"]["workerPoolSpecs"]
    assert (first["replicaCount"], second["replicaCount"]) == ("1", "2")
    assert (
        first["machineSpec"]
        == second["machineSpec"]
        == {
            "machineType": "n1-standard-8",
            "acceleratorType": "NVIDIA_TESLA_T4",
            "acceleratorCount": 2,
        }
    )
    assert first["containerSpec"] == second["containerSpec"]
    # Copies, not one shared dict: changing one pool leaves the other alone.
    second["containerSpec"]["env"].append({"name": "X", "value": "y"})
    second["machineSpec"]["machineType"] = "changed"
    assert first["containerSpec"]["env"][-1]["name"] != "X"
    assert first["machineSpec"]["machineType"] == "n1-standard-8"


def test_fewer_granted_workers_shrink_pool_one(project: Path) -> None:
    plan = make_plan(project, workers=5).with_workers(2)
    pools = build_custom_job(plan)["jobSpec"]["workerPoolSpecs"]
    assert [p["replicaCount"] for p in pools] == ["1", "1"]
    assert len(build_custom_job(plan.with_workers(1))["jobSpec"]["workerPoolSpecs"]) == 1


def test_env_is_sorted_with_ours_and_the_users_and_the_user_wins(project: Path) -> None:
    plan = make_plan(project, hardware={"threads": 3})
    body = build_custom_job(plan, env={"OMP_NUM_THREADS": "1", "SEED": "42"})
    env = body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"]
    names = [e["name"] for e in env]
    assert names == sorted(names)
    values = {e["name"]: e["value"] for e in env}
    assert values["TRAINWORKS_RUN_ID"] == plan.run_id
    assert values["TRAINWORKS_CONFIG_URI"] == CONFIG_URI
    assert values["OMP_NUM_THREADS"] == "1"  # the user's setting wins over the thread default
    assert values["MKL_NUM_THREADS"] == values["OPENBLAS_NUM_THREADS"] == values["NUMEXPR_NUM_THREADS"] == "3"
    assert values["SEED"] == "42"
    assert len(names) == len(set(names))


@pytest.mark.parametrize(
    ("env", "field"),
    [({"1X": "y"}, "env.1X"), ({"X": ""}, "env.X"), ({f"V{i}": "v" for i in range(100)}, "env")],
)
def test_bad_env_is_refused(project: Path, env: dict[str, str], field: str) -> None:
    with pytest.raises(PlanError) as info:
        build_custom_job(make_plan(project), env=env)
    assert info.value.field == field


def test_labels_carry_the_run_id(project: Path) -> None:
    plan = make_plan(project)
    body = build_custom_job(plan, labels={"team": "ml", "trainworks-code-hash": "0123456789ab"})
    assert body["labels"] == {
        "team": "ml",
        "trainworks-code-hash": "0123456789ab",
        "trainworks-run-id": "forecast-20260304-050607-012345",
    }
    assert build_custom_job(plan)["labels"] == {"trainworks-run-id": plan.run_id}
    assert build_custom_job(plan, labels={"trainworks-run-id": plan.run_id})["labels"] == {
        "trainworks-run-id": plan.run_id
    }


@pytest.mark.parametrize(
    ("labels", "field"),
    [
        ({"trainworks-run-id": "other"}, "labels.trainworks-run-id"),
        ({"Team": "ml"}, "labels.Team"),
        ({"team": "M L"}, "labels.team"),
        ({f"l{i}": "v" for i in range(64)}, "labels"),
    ],
)
def test_bad_labels_are_refused(project: Path, labels: dict[str, str], field: str) -> None:
    with pytest.raises(PlanError) as info:
        build_custom_job(make_plan(project), labels=labels)
    assert info.value.field == field


def test_optional_job_spec_fields(project: Path) -> None:
    plan = make_plan(project, service_account="trainer@p.iam.gserviceaccount.com")
    body = build_custom_job(
        plan,
        base_output_dir="gs://out/runs/",
        scheduling=SchedulingConfig(timeout=5400, restart_job_on_worker_restart=True, strategy="FLEX_START"),
    )
    spec = body["jobSpec"]
    assert spec["serviceAccount"] == "trainer@p.iam.gserviceaccount.com"
    assert spec["baseOutputDirectory"] == {"outputUriPrefix": "gs://out/runs/"}
    assert spec["scheduling"] == {
        "timeout": "5400s",
        "restartJobOnWorkerRestart": True,
        "strategy": "FLEX_START",
    }
    strict_parse(body)
    fractional = build_custom_job(plan, scheduling=SchedulingConfig(timeout=1.5))
    assert fractional["jobSpec"]["scheduling"] == {"timeout": "1.5s"}
    assert "scheduling" not in build_custom_job(plan, scheduling=SchedulingConfig())["jobSpec"]


def test_too_many_argument_characters_are_refused(project: Path) -> None:
    plan = make_plan(project, workers=2, args=["x" * 50_000])
    with pytest.raises(PlanError) as info:
        build_custom_job(plan)
    assert info.value.field == "args"


@pytest.mark.parametrize("workers", [1, 2, 7])
@pytest.mark.parametrize(
    "hw",
    [
        {},
        {"machine_type": "e2-highmem-4", "threads": 2},
        {"profile": "gpu", "gpu_type": "T4"},
        {"profile": "gpu", "gpu_type": "V100", "gpu_count": 8},
        {"profile": "gpu", "gpu_type": "L4", "gpu_count": 2},
        {"profile": "gpu", "gpu_type": "A100", "gpu_count": 16},
        {"profile": "gpu", "gpu_type": "A100_80GB", "gpu_count": 4},
        {"profile": "gpu", "gpu_type": "H100"},
        {"profile": "gpu", "gpu_type": "H100_MEGA", "gpu_count": 8},
        {"profile": "gpu", "gpu_type": "H200", "gpu_count": 8},
        {"profile": "gpu", "machine_type": "g2-standard-32"},
    ],
)
def test_every_body_passes_the_strict_official_proto_parse(
    project: Path, hw: dict[str, Any], workers: int
) -> None:
    cfg = config(
        project,
        hardware=hw,
        workers=workers,
        labels={"team": "ml"},
        env={"SEED": "7"},
        base_output_dir="gs://out/x",
        service_account="sa@p.iam.gserviceaccount.com",
        scheduling={"timeout": "2h", "restart_job_on_worker_restart": True, "strategy": "SPOT"},
    )
    plan = plan_run(
        cfg, run_id=make_run_id(cfg.name, WHEN, HASH), package_uri=PACKAGE_URI, config_uri=CONFIG_URI
    )
    body = build_custom_job(
        plan, labels=cfg.labels, env=cfg.env, base_output_dir=cfg.base_output_dir, scheduling=cfg.scheduling
    )
    job = strict_parse(body)
    # What the proto holds is what was planned (int64 strings and enum names included).
    assert json_format.MessageToDict(job) == body
    pools = job.job_spec.worker_pool_specs
    assert sum(p.replica_count for p in pools) == workers
    assert pools[0].machine_spec.accelerator_count == plan.accelerator_count
