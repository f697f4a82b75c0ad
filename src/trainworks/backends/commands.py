"""What each worker pool runs: the argv for a replica, by task kind and container runtime. Pure."""

from __future__ import annotations

import json
import shlex
from collections.abc import Collection
from pathlib import Path
from typing import Any

from trainworks.contract.environment import expand


class TaskError(Exception):
    """The worker pool cannot run on this server as configured."""


def pool_env(pool: dict[str, Any]) -> list[tuple[str, str]]:
    task = pool.get("containerSpec") or pool.get("pythonPackageSpec") or {}
    return [(e["name"], e.get("value", "")) for e in task.get("env", [])]


def host_argv(pool: dict[str, Any], env: dict[str, str], python: Path | None = None) -> list[str]:
    """argv for running a pool's task directly on this host. `$(VAR)` in command and args is expanded."""
    if "containerSpec" in pool:
        spec = pool["containerSpec"]
        command = list(spec.get("command", []))
        if not command:
            raise TaskError(
                f"the container image {spec.get('imageUri', '')!r} cannot run here: this server runs "
                "containers in host mode (no container runtime), which needs containerSpec.command; "
                "set command, or start the server with --container-runtime podman"
            )
        argv = command + list(spec.get("args", []))
    else:
        spec = pool["pythonPackageSpec"]
        if python is None:
            raise TaskError("the python package environment is not ready")
        argv = [str(python), "-m", spec["pythonModule"], *spec.get("args", [])]
    return [expand(a, env) for a in argv]


PACKAGES_MOUNT = "/trainworks/packages"


def _package_script(module: str, packages: list[str]) -> str:
    """sh script run in the executor image: install the job's packages, then `python -m module "$@"`."""
    paths = " ".join(shlex.quote(f"{PACKAGES_MOUNT}/{name}") for name in packages)
    return (
        "set -e; PY=$(command -v python3 || command -v python) || "
        "{ echo 'trainworks: the executor image has no python3 or python' >&2; exit 127; }; "
        "PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore "
        f'"$PY" -m pip install --quiet --no-warn-script-location {paths}; '
        f'exec "$PY" -m {shlex.quote(module)} "$@"'
    )


def podman_argv(
    pool: dict[str, Any],
    env: dict[str, str],
    container_name: str,
    gcs_root: Path | None,
    podman: str = "podman",
    pull: str = "never",
    explicit_env: Collection[str] = (),
    packages_dir: Path | None = None,
    packages: list[str] | None = None,
    labels: dict[str, str] | None = None,
) -> list[str]:
    """`podman run` for a replica: host network, an init process, env passed by name.

    Env values come from podman's own environment (`--env NAME`), so they never show in argv; only names
    in `explicit_env` (ones podman needs for itself) are passed as NAME=VALUE. A containerSpec runs its
    image with `command` as the entrypoint (JSON form keeps every word intact) and `args`; a
    pythonPackageSpec runs its executorImageUri with the package files of `packages_dir` mounted read-only
    at /trainworks/packages, installed with pip, then `python -m pythonModule args`.
    """
    argv = [
        podman,
        "run",
        "--rm",
        "--init",
        "--network=host",
        f"--name={container_name}",
        f"--pull={pull}",
        "--log-driver=passthrough",  # the container writes straight to the replica's log files
    ]
    for key, value in sorted((labels or {}).items()):
        argv.append(f"--label={key}={value}")
    for name in sorted(env):
        # the value comes from podman's own environment unless podman needs that variable itself
        argv.append(f"--env={name}={env[name]}" if name in explicit_env else f"--env={name}")
    if gcs_root is not None:
        argv.append(f"--volume={gcs_root}:/gcs")
    if "containerSpec" in pool:
        spec = pool["containerSpec"]
        command = [expand(c, env) for c in spec.get("command", [])]
        if command:
            argv.append("--entrypoint=" + json.dumps(command))
        argv.append(spec["imageUri"])
    else:
        spec = pool["pythonPackageSpec"]
        if packages_dir is None or not packages:
            raise TaskError("the python packages of this worker pool are not ready")
        argv.append(f"--volume={packages_dir}:{PACKAGES_MOUNT}:ro")
        script = _package_script(spec["pythonModule"], packages)
        argv.append("--entrypoint=" + json.dumps(["/bin/sh", "-c", script, spec["pythonModule"]]))
        argv.append(spec["executorImageUri"])
    argv.extend(expand(a, env) for a in spec.get("args", []))
    return argv
