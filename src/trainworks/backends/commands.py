"""What each worker pool runs: the argv for a replica, by task kind and container runtime. Pure."""

from __future__ import annotations

import json
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


def podman_argv(
    pool: dict[str, Any],
    env: dict[str, str],
    container_name: str,
    gcs_root: Path | None,
    podman: str = "podman",
) -> list[str]:
    """`podman run` for a container task: host network, an init process, env passed by name."""
    spec = pool["containerSpec"]
    argv = [
        podman,
        "run",
        "--rm",
        "--init",
        "--network=host",
        f"--name={container_name}",
        "--pull=never",
    ]
    for name in sorted(env):
        argv.append(f"--env={name}")  # the value comes from podman's own environment
    if gcs_root is not None:
        argv.append(f"--volume={gcs_root}:/gcs")
    command = [expand(c, env) for c in spec.get("command", [])]
    if command:
        argv.append("--entrypoint=" + json.dumps(command))  # JSON form keeps every word intact
    argv.append(spec["imageUri"])
    argv.extend(expand(a, env) for a in spec.get("args", []))
    return argv
