"""pythonPackageSpec: packages fetched from gs://, installed into a cached environment, run with -m."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

from tests.support.logs import replica_output
from tests.support.server import ServerProcess, wait_job

TASK = """
import json, os, sys
env = os.environ
print(json.dumps({"argv": sys.argv[1:], "job": env["CLOUD_ML_JOB_ID"], "greeting": env["GREETING"]}))
"""


def build_wheel(target: Path, version: str = "0.1") -> Path:
    """A minimal, valid pure-Python wheel, built by hand so the test needs no build backend."""
    name = f"trainer_pkg-{version}"
    files = {
        "trainer_pkg/__init__.py": "",
        "trainer_pkg/task.py": TASK,
        f"{name}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: trainer-pkg\nVersion: {version}\n",
        f"{name}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{name}.dist-info/RECORD,,")
    files[f"{name}.dist-info/RECORD"] = "\n".join(record) + "\n"
    wheel = target / f"trainer_pkg-{version}-py3-none-any.whl"
    wheel.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def _job(uri: str) -> dict:
    spec = {
        "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.2-4:latest",
        "packageUris": [uri],
        "pythonModule": "trainer_pkg.task",
        "args": ["--lr", "0.1"],
        "env": [{"name": "GREETING", "value": "hi $(CLOUD_ML_JOB_ID)"}],
    }
    return {
        "displayName": "pkg",
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "pythonPackageSpec": spec,
                }
            ]
        },
    }


def test_python_package_job_runs_and_environment_is_cached(server: ServerProcess) -> None:
    build_wheel(server.home / "buckets" / "pkgs" / "dist")
    uri = "gs://pkgs/dist/trainer_pkg-0.1-py3-none-any.whl"
    outputs = []
    with server.client() as client:
        for _ in range(2):
            created = client.post(f"/v1/{server.parent}/customJobs", json=_job(uri)).json()
            done = wait_job(client, created["name"], timeout=300)
            job_dir = server.home / "jobs" / created["name"].rsplit("/", 1)[-1]
            run_dir = job_dir / "workerpool0-0"
            assert done["state"] == "JOB_STATE_SUCCEEDED", replica_output(run_dir, "stderr")
            outputs.append((replica_output(run_dir), created["name"]))
    for stdout, name in outputs:
        job_id = name.rsplit("/", 1)[-1]
        assert f'"argv": ["--lr", "0.1"], "job": "{job_id}", "greeting": "hi {job_id}"' in stdout
    venvs = [p for p in (server.home / "cache" / "venvs").iterdir() if p.is_dir()]
    assert len(venvs) == 1  # the second job reused the environment


def test_missing_package_fails_the_job_clearly(server: ServerProcess) -> None:
    with server.client() as client:
        created = client.post(f"/v1/{server.parent}/customJobs", json=_job("gs://pkgs/nope.whl")).json()
        done = wait_job(client, created["name"])
    assert done["state"] == "JOB_STATE_FAILED"
    assert "gs://pkgs/nope.whl does not exist" in done["error"]["message"]
