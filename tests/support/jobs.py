"""Builders for job bodies used across the tests."""

from __future__ import annotations

import sys
from typing import Any

MACHINE = {"machineType": "n1-standard-4"}


def python_pool(
    code: str, replicas: int = 1, env: dict[str, str] | None = None, args: list[str] | None = None
) -> dict[str, Any]:
    container: dict[str, Any] = {"imageUri": "python:3.11", "command": [sys.executable, "-c", code]}
    if args:
        container["args"] = args
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {"machineSpec": MACHINE, "replicaCount": str(replicas), "containerSpec": container}


def job(*pools: dict[str, Any], name: str = "test-job", **spec: Any) -> dict[str, Any]:
    return {"displayName": name, "jobSpec": {"workerPoolSpecs": list(pools), **spec}}
