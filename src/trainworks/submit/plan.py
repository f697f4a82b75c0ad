"""Pure planning: a run configuration becomes a :class:`RunPlan`, and a plan becomes a CustomJob body.

No I/O, no clock and no randomness here: times and hashes come in as arguments, and the machine catalog
(package data, read once) is the only thing consulted.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from trainworks.catalog import machines
from trainworks.storage.gcs import StoragePathError, parse_gcs_uri
from trainworks.submit.bootstrap import BOOTSTRAP_CODE
from trainworks.submit.config import (
    GPU_SHORT_NAMES,
    GPU_TYPES,
    MAX_ENV,
    MAX_LABELS,
    MAX_NAME_CHARS,
    RUN_ID_LABEL,
    HardwareConfig,
    RunConfig,
    SchedulingConfig,
    label_problems,
)

UNSPECIFIED = machines.UNSPECIFIED
DEFAULT_CPU_MACHINE = "n1-standard-4"
# n1 machines for attachable GPUs are sized at four vCPUs per GPU (1 -> n1-standard-4, 2 -> 8, 4 -> 16 ...).
N1_VCPUS_PER_GPU = 4
N1_GPUS = frozenset({"T4", "V100", "P100", "P4", "K80"})
# GPUs that come built into their machine type: GPUs per replica -> machine type.
BUILT_IN_GPU_MACHINES: dict[str, dict[int, str]] = {
    "L4": {1: "g2-standard-4", 2: "g2-standard-24", 4: "g2-standard-48", 8: "g2-standard-96"},
    "A100": {**{n: f"a2-highgpu-{n}g" for n in (1, 2, 4, 8)}, 16: "a2-megagpu-16g"},
    "A100_80GB": {n: f"a2-ultragpu-{n}g" for n in (1, 2, 4, 8)},
    "H100": {n: f"a3-highgpu-{n}g" for n in (1, 2, 4, 8)},
    "H100_MEGA": {8: "a3-megagpu-8g"},
    "H200": {8: "a3-ultragpu-8g"},
}
THREAD_ENV_NAMES = (
    "OMP_NUM_THREADS",  # OpenMP: PyTorch, scikit-learn, XGBoost, LightGBM
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "NUMEXPR_MAX_THREADS",  # numexpr refuses NUM above MAX (64 by default)
    "TF_NUM_INTRAOP_THREADS",
)
MAX_ARGS_CHARS = 100_000  # all args of all pools together, as Vertex AI allows
_CODE_HASH = re.compile(r"^[a-z0-9]{6}")
_NAME = re.compile(r"^[a-z]([a-z0-9-]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CATALOG = "the machine catalog (trainworks/catalog/machines.json)"


class PlanError(ValueError):
    """A run that cannot be planned; `field` is the run-configuration path at fault, when there is one."""

    def __init__(self, message: str, field: str | None = None) -> None:
        self.message = message
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


@dataclass(frozen=True)
class ResolvedHardware:
    machine_type: str
    accelerator_type: str  # AcceleratorType enum name, or ACCELERATOR_TYPE_UNSPECIFIED
    accelerator_count: int
    threads: int  # intra-op threads per replica


@dataclass(frozen=True)
class RunPlan:
    """Everything decided about a run before it is submitted (one region, one worker count)."""

    run_id: str
    display_name: str
    machine_type: str
    accelerator_type: str
    accelerator_count: int
    worker_count: int  # replicas to ask for (the capacity walk may lower it)
    requested_workers: int  # what the configuration (or the command line) asked for
    hardware: str  # "cpu" or "gpu"
    gpu_type: str | None  # short name (T4, A100_80GB ...), None for cpu
    threads: int
    image_uri: str
    python: str
    package_uri: str
    config_uri: str
    service_account: str = ""
    region: str = ""  # "" until the walk picks one
    entry_module: str = ""
    args: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe summary for telemetry (nothing in a plan is secret)."""
        out = dataclasses.asdict(self)
        out["args"] = list(self.args)
        return out

    def with_workers(self, workers: int) -> RunPlan:
        if workers < 1:
            raise PlanError(f"must be >= 1, got {workers}", "workers")
        return dataclasses.replace(self, worker_count=workers)

    def in_region(self, region: str) -> RunPlan:
        return dataclasses.replace(self, region=region)


# ----------------------------------------------------------------------------------------- hardware
def _catalog_machine(name: str, needed_for: str) -> machines.MachineType:
    machine = machines.machine_type(name)
    if machine is None:
        raise PlanError(f"{_CATALOG} has no {name}, needed for {needed_for}", "hardware")
    return machine


def _counts_text(counts: list[int]) -> str:
    text = [str(c) for c in counts]
    return text[0] if len(text) == 1 else ", ".join(text[:-1]) + " or " + text[-1]


def _mismatch_field(machine: machines.MachineType, accelerator: str, count: int) -> str:
    """Which setting a rejected explicit machine/GPU combination is reported on."""
    if machine.accelerator_type is not None:
        return "hardware.gpu_count" if accelerator == machine.accelerator_type else "hardware.gpu_type"
    info = machines.accelerator(accelerator)
    if info is None or machine.family not in info.allowed_families:
        return "hardware.machine_type"
    # A count no machine of this family takes is the count's fault; otherwise the machine is too big.
    family = [m for m in machines.machine_types() if m.family == machine.family]
    if all(machines.check_accelerator(m, accelerator, count) for m in family):
        return "hardware.gpu_count"
    return "hardware.machine_type"


def _n1_machine(short: str, accelerator: str, count: int) -> machines.MachineType:
    standard = sorted(
        (m for m in machines.machine_types() if m.name.startswith("n1-standard-")), key=lambda m: m.vcpus
    )
    if not standard:
        raise PlanError(f"{_CATALOG} has no n1-standard machine types, needed for {short}", "hardware")
    fitting = [m for m in standard if machines.check_accelerator(m, accelerator, count) is None]
    if not fitting:
        allowed = [
            c
            for c in range(1, 17)
            if any(machines.check_accelerator(m, accelerator, c) is None for m in standard)
        ]
        raise PlanError(
            f"{short} takes {_counts_text(allowed)} GPUs per replica, got {count}", "hardware.gpu_count"
        )
    big_enough = [m for m in fitting if m.vcpus >= N1_VCPUS_PER_GPU * count]
    # The per-count vCPU limits can be below four per GPU: then the largest machine that is allowed.
    return big_enough[0] if big_enough else fitting[-1]


def _conventional_machine(short: str, accelerator: str, count: int) -> machines.MachineType:
    if short in N1_GPUS:
        return _n1_machine(short, accelerator, count)
    table = BUILT_IN_GPU_MACHINES[short]
    if count not in table:
        raise PlanError(
            f"{short} takes {_counts_text(sorted(table))} GPUs per replica "
            f"({', '.join(table[c] for c in sorted(table))}), got {count}",
            "hardware.gpu_count",
        )
    machine = _catalog_machine(table[count], f"{count} x {short}")
    problem = machines.check_accelerator(machine, accelerator, count)
    if problem:
        raise PlanError(f"{_CATALOG} does not match the GPU table: {problem}", "hardware")
    return machine


def resolve_hardware(hw: HardwareConfig) -> ResolvedHardware:
    """The machine type, accelerator and threads per replica for a hardware section."""
    if hw.profile == "cpu":
        name = hw.machine_type or DEFAULT_CPU_MACHINE
        machine = _catalog_machine(name, "the cpu profile")
        if machine.accelerator_type is not None:
            raise PlanError(f"{name} comes with GPUs; use profile: gpu", "hardware.machine_type")
        return ResolvedHardware(name, UNSPECIFIED, 0, hw.threads or machine.vcpus)

    explicit = _catalog_machine(hw.machine_type, "hardware.machine_type") if hw.machine_type else None
    if hw.gpu_type is not None:
        accelerator = GPU_TYPES[hw.gpu_type]
    elif explicit is not None and explicit.accelerator_type is not None:
        accelerator = explicit.accelerator_type
    else:
        raise PlanError(f"required when profile is gpu: one of {', '.join(GPU_TYPES)}", "hardware.gpu_type")
    short = GPU_SHORT_NAMES[accelerator]
    count = hw.gpu_count
    if count is None:
        built_in = explicit is not None and explicit.accelerator_type == accelerator
        count = explicit.accelerator_count if explicit is not None and built_in else 1
    if count < 1:
        raise PlanError(f"must be >= 1 when profile is gpu, got {count}", "hardware.gpu_count")

    if explicit is not None:
        problem = machines.check_accelerator(explicit, accelerator, count)
        if problem:
            raise PlanError(problem, _mismatch_field(explicit, accelerator, count))
        machine = explicit
    else:
        machine = _conventional_machine(short, accelerator, count)
    return ResolvedHardware(machine.name, accelerator, count, hw.threads or max(1, machine.vcpus // count))


# ----------------------------------------------------------------------------------------- the plan
def make_run_id(name: str, when: datetime, code_hash: str) -> str:
    """``<name>-<yyyymmdd-hhmmss>-<hash[:6]>``: lowercase and label-safe. An aware `when` is taken in UTC, a
    naive one as it is."""
    if len(name) > MAX_NAME_CHARS or not _NAME.match(name):
        raise PlanError(
            f"{name!r} must be at most {MAX_NAME_CHARS} lowercase letters, digits and hyphens, starting with "
            "a letter",
            "name",
        )
    digest = code_hash.lower()
    if not _CODE_HASH.match(digest):
        raise PlanError(f"code hash {code_hash!r} must start with 6 letters or digits (a hex digest)")
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return f"{name}-{when:%Y%m%d-%H%M%S}-{digest[:6]}"


def _gcs_uri(value: str, what: str) -> str:
    try:
        path = parse_gcs_uri(value)
    except StoragePathError as exc:
        raise PlanError(f"{what} must be a gs:// object URI: {exc}") from None
    if not path.key or path.key.endswith("/"):
        raise PlanError(f"{what} {value!r} names no object")
    return value


def plan_run(
    cfg: RunConfig, *, run_id: str, package_uri: str, config_uri: str, workers: int | None = None
) -> RunPlan:
    """The plan for one run; `workers` overrides the configuration's count. The region is left empty."""
    requested = cfg.workers if workers is None else workers
    if requested < 1:
        raise PlanError(f"must be >= 1, got {requested}", "workers")
    hardware = resolve_hardware(cfg.hardware)
    gpu_type = GPU_SHORT_NAMES[hardware.accelerator_type] if hardware.accelerator_count else None
    return RunPlan(
        run_id=run_id,
        display_name=run_id,
        machine_type=hardware.machine_type,
        accelerator_type=hardware.accelerator_type,
        accelerator_count=hardware.accelerator_count,
        worker_count=requested,
        requested_workers=requested,
        hardware=cfg.hardware.profile,
        gpu_type=gpu_type,
        threads=hardware.threads,
        image_uri=cfg.image,
        python=cfg.python,
        package_uri=_gcs_uri(package_uri, "package_uri"),
        config_uri=_gcs_uri(config_uri, "config_uri"),
        service_account=cfg.service_account,
        region="",
        entry_module=cfg.entry_module,
        args=tuple(cfg.args),
    )


def thread_env(threads: int) -> dict[str, str]:
    """The environment that caps intra-op threads of the usual numeric libraries at `threads`."""
    if threads < 1:
        raise PlanError(f"must be >= 1, got {threads}", "hardware.threads")
    return {name: str(threads) for name in THREAD_ENV_NAMES}


# ----------------------------------------------------------------------------------------- the job body
def _duration(seconds: float) -> str:
    """proto3 JSON Duration: ``"600s"``, ``"1.5s"``."""
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds:.9f}".rstrip("0") + "s"


def _labels(plan: RunPlan, labels: Mapping[str, str] | None) -> dict[str, str]:
    given = dict(labels or {})
    if given.get(RUN_ID_LABEL, plan.run_id) != plan.run_id:
        raise PlanError(f"{RUN_ID_LABEL} is the submitter's own label", f"labels.{RUN_ID_LABEL}")
    merged = {**given, RUN_ID_LABEL: plan.run_id}
    problems = label_problems(merged)
    if problems:
        key, message = problems[0]
        raise PlanError(message, f"labels.{key}")
    if len(merged) > MAX_LABELS:
        raise PlanError(f"at most {MAX_LABELS} labels per job (ours included), got {len(merged)}", "labels")
    return merged


def _env(plan: RunPlan, env: Mapping[str, str] | None) -> list[dict[str, str]]:
    merged = {
        "TRAINWORKS_RUN_ID": plan.run_id,
        "TRAINWORKS_CONFIG_URI": plan.config_uri,
        **thread_env(plan.threads),
        **dict(env or {}),  # the user's settings win
    }
    for name, value in merged.items():
        if not _ENV_NAME.match(name):
            raise PlanError(f"{name!r} is not a valid environment variable name", f"env.{name}")
        if not value:
            raise PlanError("the value must not be empty (Vertex AI treats it as unset)", f"env.{name}")
    if len(merged) > MAX_ENV:
        raise PlanError(
            f"at most {MAX_ENV} environment variables per replica, got {len(merged)} with the submitter's "
            f"{len(merged) - len(env or {})}",
            "env",
        )
    return [{"name": name, "value": merged[name]} for name in sorted(merged)]


def _scheduling(scheduling: SchedulingConfig | None) -> dict[str, Any]:
    if scheduling is None:
        return {}
    out: dict[str, Any] = {}
    if scheduling.timeout is not None:
        out["timeout"] = _duration(scheduling.timeout)
    if scheduling.restart_job_on_worker_restart:
        out["restartJobOnWorkerRestart"] = True
    if scheduling.strategy is not None:
        out["strategy"] = scheduling.strategy
    return out


def build_custom_job(
    plan: RunPlan,
    *,
    labels: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    base_output_dir: str | None = None,
    scheduling: SchedulingConfig | None = None,
) -> dict[str, Any]:
    """The CustomJob body as the REST API takes it (camelCase JSON, int64 as strings).

    Pool 0 is the single primary replica; with more workers, pool 1 carries the rest on an identical machine
    and container, so every replica runs the same bootstrap and finds its rank in CLUSTER_SPEC.
    """
    machine_spec: dict[str, Any] = {"machineType": plan.machine_type}
    if plan.accelerator_count > 0:
        machine_spec["acceleratorType"] = plan.accelerator_type
        machine_spec["acceleratorCount"] = plan.accelerator_count
    container_spec: dict[str, Any] = {
        "imageUri": plan.image_uri,
        "command": [plan.python, "-c", BOOTSTRAP_CODE],
        "args": ["--package-uri", plan.package_uri, "--module", plan.entry_module, "--", *plan.args],
        "env": _env(plan, env),
    }
    pools: list[dict[str, Any]] = [
        {"machineSpec": copy.deepcopy(machine_spec), "replicaCount": "1", "containerSpec": container_spec}
    ]
    if plan.worker_count > 1:
        pools.append(
            {
                "machineSpec": copy.deepcopy(machine_spec),
                "replicaCount": str(plan.worker_count - 1),
                "containerSpec": copy.deepcopy(container_spec),
            }
        )
    total_args = sum(len(a) for pool in pools for a in pool["containerSpec"]["args"])
    if total_args > MAX_ARGS_CHARS:
        raise PlanError(
            f"all arguments of all worker pools together must be at most {MAX_ARGS_CHARS} characters, "
            f"got {total_args}",
            "args",
        )

    job_spec: dict[str, Any] = {"workerPoolSpecs": pools}
    if plan.service_account:
        job_spec["serviceAccount"] = plan.service_account
    if base_output_dir:
        job_spec["baseOutputDirectory"] = {"outputUriPrefix": base_output_dir}
    sched = _scheduling(scheduling)
    if sched:
        job_spec["scheduling"] = sched
    return {"displayName": plan.display_name, "labels": _labels(plan, labels), "jobSpec": job_spec}
