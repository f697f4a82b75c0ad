"""Builders for job bodies used across the tests."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.support.server import wait_for

MACHINE = {"machineType": "n1-standard-4"}

# The end of a multi-replica job's script, for tests that check what every replica did: the job ends with its
# primary (the others are stopped then, as on Vertex), so the primary ends only once every other replica has
# come this far. Each connects to the primary's port from CLUSTER_SPEC; the primary accepts them all.
END_TOGETHER = """
import json as _json, os as _os, socket as _socket, time as _time
_spec = _json.loads(_os.environ["CLUSTER_SPEC"])
_host, _port = _spec["cluster"]["workerpool0"][0].rsplit(":", 1)
if _spec["task"]["type"] == "workerpool0":
    with _socket.create_server((_host, int(_port))) as _server:
        _server.settimeout(120)
        for _ in range(sum(len(a) for a in _spec["cluster"].values()) - 1):
            _server.accept()[0].close()
else:
    _deadline = _time.monotonic() + 120
    while _time.monotonic() < _deadline:
        try:
            _socket.create_connection((_host, int(_port))).close()
            break
        except OSError:
            _time.sleep(0.05)  # the primary is not listening yet
"""


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


def three_trial_study(folder: Path, name: str) -> dict[str, Any]:
    """A tuning job of three parallel trials maximising -(x - 1)^2 over x in [-3, 3] (its trial script is
    written into `folder`)."""
    script = folder / "trial.py"
    script.write_text(
        "import argparse, hypertune\n"
        "p = argparse.ArgumentParser(); p.add_argument('--x', type=float); a, _ = p.parse_known_args()\n"
        "hypertune.HyperTune().report_hyperparameter_tuning_metric(\n"
        "    hyperparameter_metric_tag='score', metric_value=-(a.x - 1) ** 2, global_step=1)\n"
    )
    container = {"imageUri": "python:3.11", "command": [sys.executable, str(script)]}
    pool = {"machineSpec": MACHINE, "replicaCount": "1", "containerSpec": container}
    return {
        "displayName": name,
        "studySpec": {
            "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": -3, "maxValue": 3}}],
        },
        "maxTrialCount": 3,
        "parallelTrialCount": 3,
        "trialJobSpec": {"workerPoolSpecs": [pool]},
    }


def gapic_job(
    display_name: str, code: str = "pass", labels: dict[str, str] | None = None, api: Any = None
) -> Any:
    """A one-replica container CustomJob message of the GAPIC package `api` (default aiplatform_v1; v1beta1
    too): host mode runs `code`, the image is only recorded."""
    if api is None:
        from google.cloud import aiplatform_v1 as api  # here: most users of these builders never need it

    return api.CustomJob(
        display_name=display_name,
        labels=labels or {},
        job_spec=api.CustomJobSpec(
            worker_pool_specs=[
                api.WorkerPoolSpec(
                    machine_spec=api.MachineSpec(machine_type=MACHINE["machineType"]),
                    replica_count=1,
                    container_spec=api.ContainerSpec(
                        image_uri="python:3.11", command=[sys.executable, "-c", code]
                    ),
                )
            ]
        ),
    )


def wait_for_state(get: Callable[..., Any], name: str, states: Iterable[str], timeout: float = 120) -> Any:
    """What `get(name=name)` (a GAPIC client's get of a job or pipeline) answers once its state is one of
    `states`, by name: v1 and v1beta1 enums never compare equal."""
    wanted = set(states)

    def check() -> Any:
        got = get(name=name)
        return got if got.state.name in wanted else None

    return wait_for(check, timeout=timeout, what=f"{name} to reach {sorted(wanted)}")
