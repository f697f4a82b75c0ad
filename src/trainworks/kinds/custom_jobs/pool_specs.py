"""Turn gcloud-style `custom-jobs create` flags and a --config file into a CustomJob body.

Pure parsing, no network: --worker-pool-spec, durations, the --config file merged under the flags, and the
pools that run a package made from --local-package-path. The kind-agnostic flag parsers are in
`kernel.flags`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainworks.kernel.flags import (
    camelize,
    disk_spec,
    duration_seconds,
    machine_spec,
    parse_dict,
    parse_dicts,
    read_config,
    split_lists,
)
from trainworks.kernel.names import FlagError

# ====================================================================== --worker-pool-spec
#: Keys of --worker-pool-spec, as gcloud's custom-jobs create has them (plus disk-type/disk-size).
WORKER_POOL_SPEC_KEYS: dict[str, type] = {
    "machine-type": str,
    "replica-count": int,
    "accelerator-type": str,
    "accelerator-count": int,
    "container-image-uri": str,
    "executor-image-uri": str,
    "python-module": str,
    "disk-type": str,
    "disk-size": int,
}

#: gcloud keys for packaging local code inside --worker-pool-spec, and what trainworks has instead.
LOCAL_PACKAGING_KEYS = {
    "local-package-path": "the --local-package-path flag",
    "script": "the --script flag (with --local-package-path)",
    "requirements": "the --requirements flag (with --local-package-path)",
    "extra-packages": "--python-package-uris",
    "extra-dirs": "a folder inside --local-package-path",
    "output-image-uri": "an executor image: trainworks does not build images",
}

_WORKER_POOL_SPEC_FLAG = "--worker-pool-spec"


def _valid_accelerator_types() -> list[str]:
    from trainworks.catalog.accelerators import AcceleratorType

    return sorted(a.name for a in AcceleratorType if a.name.startswith(("NVIDIA", "TPU")))


def parse_worker_pool_spec(
    value: str, python_package_uris: list[str] | None = None, local_package: bool = False
) -> dict[str, Any]:
    """One `--worker-pool-spec` value -> a WorkerPoolSpec (camelCase JSON), checked as gcloud does.

    An empty value gives `{}`, which skips that pool. With `local_package` (--local-package-path), a pool
    without an image runs the package: `apply_local_package` fills in its executor image and module.
    """
    flag = _WORKER_POOL_SPEC_FLAG
    spec = value.strip()
    if not spec:
        return {}
    keys = set(parse_dict(spec, flag, None))
    unsupported = sorted(keys.intersection(LOCAL_PACKAGING_KEYS))
    if unsupported:
        key = unsupported[0]
        raise FlagError(
            flag,
            f"key [{key}] is not supported in --worker-pool-spec: use {LOCAL_PACKAGING_KEYS[key]}. "
            "trainworks packages local code as a Python package run by an executor image",
        )
    fields = parse_dict(spec, flag, WORKER_POOL_SPEC_KEYS)
    if "machine-type" not in fields or not fields["machine-type"]:
        raise FlagError(flag, "key [machine-type] required in dict arg but not provided")
    if "accelerator-count" in fields and "accelerator-type" not in fields:
        raise FlagError(flag, "key [accelerator-type] required as [accelerator-count] is specified")
    accelerator = fields.get("accelerator-type")
    if accelerator is not None:
        valid = _valid_accelerator_types()
        if accelerator not in valid:
            raise FlagError(
                flag,
                f"found invalid value of [accelerator-type]: {accelerator}. "
                f"Available values are [{', '.join(valid)}]",
            )
    has_container = "container-image-uri" in fields
    has_executor = "executor-image-uri" in fields
    if (has_container and has_executor) or not (has_container or has_executor or local_package):
        raise FlagError(flag, "exactly one of keys [executor-image-uri, container-image-uri] is required")
    if has_container and "python-module" in fields:
        raise FlagError(flag, "key [python-module] is not allowed together with key [container-image-uri]")
    if has_executor and not fields.get("python-module") and not local_package:
        raise FlagError(flag, "key [python-module] is required with key [executor-image-uri]")
    replicas = fields.get("replica-count", 1)
    if replicas < 1:
        raise FlagError(flag, f"key [replica-count] must be at least 1, got {replicas}")

    pool: dict[str, Any] = {"machineSpec": machine_spec(fields), "replicaCount": str(replicas)}
    disk = disk_spec(fields)
    if disk is not None:
        pool["diskSpec"] = disk
    if has_container:
        pool["containerSpec"] = {"imageUri": fields["container-image-uri"]}
    else:
        package: dict[str, Any] = {"packageUris": list(python_package_uris or [])}
        if fields.get("executor-image-uri"):
            package["executorImageUri"] = fields["executor-image-uri"]
        if fields.get("python-module"):
            package["pythonModule"] = fields["python-module"]
        # The wire order of a pythonPackageSpec: image, packages, module.
        pool["pythonPackageSpec"] = {
            k: package[k] for k in ("executorImageUri", "packageUris", "pythonModule") if k in package
        }
    return pool


def parse_worker_pool_specs(
    values: list[str], python_package_uris: list[str] | None = None, local_package: bool = False
) -> list[dict[str, Any]]:
    """Every `--worker-pool-spec` flag in order: the Nth flag is pool N."""
    if len(values) > 4:
        raise FlagError(_WORKER_POOL_SPEC_FLAG, f"at most 4 worker pools are allowed, got {len(values)}")
    pools = [parse_worker_pool_spec(v, python_package_uris, local_package) for v in values]
    if pools and not pools[0]:
        raise FlagError(
            _WORKER_POOL_SPEC_FLAG, "empty value is not allowed for the first --worker-pool-spec flag"
        )
    return pools


# ====================================================================== durations
def parse_duration(value: str, flag: str = "--timeout") -> str:
    """`3600`, `3600s`, `90m`, `1h30m`, `2d` -> proto Duration JSON (`"5400s"`)."""
    seconds = duration_seconds(value)
    if seconds is None:
        raise FlagError(flag, f"[{value}] is not a duration; use e.g. 3600s, 90m, 1h30m or 2d")
    if seconds <= 0:
        raise FlagError(flag, f"[{value}] must be a positive duration")
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds:.9f}".rstrip("0") + "s"


# ====================================================================== --config
def load_config(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read a --config file (YAML or JSON). Returns (job fields, CustomJobSpec).

    The file holds a CustomJobSpec like gcloud's --config; a whole CustomJob (with `jobSpec`) is also
    accepted, its displayName and labels then serve as defaults for the flags.
    """
    data = read_config(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FlagError(
            "--config", f"{path} must hold a mapping (a CustomJobSpec), not {type(data).__name__}"
        )
    data = camelize(data)
    job: dict[str, Any] = {}
    spec = data
    if "jobSpec" in data:
        spec = data.pop("jobSpec") or {}
        job = data
        if not isinstance(spec, dict):
            raise FlagError("--config", "jobSpec must be a mapping")
    pools = spec.get("workerPoolSpecs")
    if isinstance(pools, dict):  # gcloud's own help shows a single pool without a list
        spec["workerPoolSpecs"] = [pools]
    elif pools is not None and not isinstance(pools, list):
        raise FlagError("--config", "workerPoolSpecs must be a list of worker pool specs")
    return job, spec


# ====================================================================== --local-package-path
@dataclass(frozen=True)
class LocalPackage:
    """The package made from --local-package-path, for the pools that run it."""

    package_uri: str
    python_module: str | None  # --script or --python-module; a pool's python-module key wins
    executor_image_uri: str | None  # --executor-image-uri; a pool's executor-image-uri key wins


def check_local_package_flags(
    local_package_path: Path | None,
    script: str | None,
    python_module: str | None,
    requirements: list[str] | None,
    executor_image_uri: str | None,
) -> None:
    """The packaging flags need --local-package-path; --script and --python-module exclude each other."""
    if local_package_path is None:
        given = {
            "--script": script,
            "--python-module": python_module,
            "--requirements": requirements,
            "--executor-image-uri": executor_image_uri,
        }
        for flag, value in given.items():
            if value:
                raise FlagError(flag, "only applies with --local-package-path (local code to package)")
    if script and python_module:
        raise FlagError("--script", "give --script or --python-module, not both")


def apply_local_package(pools: list[dict[str, Any]], package: LocalPackage) -> None:
    """Every pool without a container image runs the package (first in its packageUris), in place."""
    runs = 0
    for index, pool in enumerate(pools):
        if not pool or "containerSpec" in pool:
            continue  # a skipped pool, or one running its own image (e.g. a reduction server)
        spec = pool.setdefault("pythonPackageSpec", {})
        image = spec.get("executorImageUri") or package.executor_image_uri
        if not image:
            raise FlagError(
                "--executor-image-uri",
                f"worker pool {index} needs an executor image to run the package: pass --executor-image-uri "
                "or executor-image-uri in its --worker-pool-spec (there is no default image)",
            )
        module = spec.get("pythonModule") or package.python_module
        if not module:
            raise FlagError(
                "--script",
                f"worker pool {index} has no module to run: pass --script (a file in --local-package-path) "
                "or --python-module, or python-module in its --worker-pool-spec",
            )
        extra = [uri for uri in spec.get("packageUris") or [] if uri != package.package_uri]
        pool["pythonPackageSpec"] = {
            **spec,
            "executorImageUri": image,
            "packageUris": [package.package_uri, *extra],
            "pythonModule": module,
        }
        runs += 1
    if not runs:
        raise FlagError(
            "--local-package-path",
            "no worker pool runs the package: every pool has a container-image-uri; "
            "leave container-image-uri out of the pools that should run it",
        )


# ====================================================================== the CustomJob body
def _merge_env_vars(existing: list[dict[str, Any]], updates: dict[str, str]) -> list[dict[str, Any]]:
    """Env entries of a pool with `updates` replacing same-named ones (appended at the end)."""
    out = [dict(e) for e in existing if e.get("name") not in updates]
    out.extend({"name": k, "value": v} for k, v in updates.items())
    return out


def _apply_task_flags(
    pools: list[dict[str, Any]],
    arg_list: list[str] | None,
    command_list: list[str] | None,
    env: dict[str, str],
    package_uris: list[str] | None,
) -> None:
    """Set --args, --env-vars, --command and --python-package-uris on every pool's task, in place."""
    for pool in pools:
        container, package = pool.get("containerSpec"), pool.get("pythonPackageSpec")
        for task in (container, package):
            if not isinstance(task, dict):
                continue
            if arg_list is not None:
                task["args"] = list(arg_list)
            if env:
                task["env"] = _merge_env_vars(task.get("env") or [], env)
        if isinstance(container, dict) and command_list is not None:
            container["command"] = list(command_list)
        if isinstance(package, dict) and package_uris is not None:
            package["packageUris"] = list(package_uris)


def build_custom_job(
    *,
    display_name: str | None,
    worker_pool_specs: list[str] | None = None,
    config: Path | None = None,
    args: list[str] | None = None,
    command: list[str] | None = None,
    labels: list[str] | None = None,
    env_vars: list[str] | None = None,
    python_package_uris: list[str] | None = None,
    base_output_dir: str | None = None,
    timeout: str | None = None,
    service_account: str | None = None,
    network: str | None = None,
    persistent_resource_id: str | None = None,
    enable_web_access: bool = False,
    enable_dashboard_access: bool = False,
    local_package: LocalPackage | None = None,
) -> dict[str, Any]:
    """The CustomJob body of `create`: --config first, then the flags on top (as gcloud merges them)."""
    job: dict[str, Any] = {}
    spec: dict[str, Any] = {}
    if config is not None:
        job, spec = load_config(config)
    package_uris = split_lists(python_package_uris)
    if worker_pool_specs:
        spec["workerPoolSpecs"] = parse_worker_pool_specs(
            list(worker_pool_specs), package_uris, local_package is not None
        )
    pools: list[dict[str, Any]] = spec.get("workerPoolSpecs") or []
    if not pools:
        raise FlagError(
            _WORKER_POOL_SPEC_FLAG,
            "at least one --worker-pool-spec (or a --config with workerPoolSpecs) is required",
        )
    if not all(isinstance(p, dict) for p in pools):
        raise FlagError("--config", "every entry of workerPoolSpecs must be a mapping")

    arg_list = split_lists(args)
    command_list = split_lists(command)
    env = parse_dicts(env_vars, "--env-vars")
    _apply_task_flags(pools, arg_list, command_list, env, package_uris)
    if local_package is not None:
        apply_local_package(pools, local_package)

    if base_output_dir:
        spec["baseOutputDirectory"] = {"outputUriPrefix": base_output_dir}
    if timeout:
        if not isinstance(spec.get("scheduling"), dict):
            spec["scheduling"] = {}
        spec["scheduling"]["timeout"] = parse_duration(timeout)
    if service_account:
        spec["serviceAccount"] = service_account
    if network:
        spec["network"] = network
    if persistent_resource_id:
        spec["persistentResourceId"] = persistent_resource_id
    if enable_web_access:
        spec["enableWebAccess"] = True
    if enable_dashboard_access:
        spec["enableDashboardAccess"] = True

    name = display_name or job.get("displayName")
    if not name:
        raise FlagError("--display-name", "a display name is required")
    body: dict[str, Any] = {k: v for k, v in job.items() if k not in ("displayName", "labels")}
    body["displayName"] = name
    body["jobSpec"] = spec
    merged_labels = dict(job.get("labels") or {})
    merged_labels.update(parse_dicts(labels, "--labels"))
    if merged_labels:
        body["labels"] = merged_labels
    return body


__all__ = [
    "LOCAL_PACKAGING_KEYS",
    "WORKER_POOL_SPEC_KEYS",
    "LocalPackage",
    "apply_local_package",
    "build_custom_job",
    "check_local_package_flags",
    "load_config",
    "parse_duration",
    "parse_worker_pool_spec",
    "parse_worker_pool_specs",
]
