"""The official Node.js client (`@google-cloud/aiplatform` 6.x from the npm registry, pinned in
tests/node/package-lock.json) over its default transport, gRPC, against a real server's --grpc-port on an
insecure loopback channel: create, get, list (filter and paging), cancel, delete as an LRO, and errors with
their gRPC codes and field violations. tests/node/job_service.js does the calls and prints JSON; this checks
it. `make test` installs Node.js (Debian) and the client (`npm ci`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.paths import REPO
from tests.support.server import LOCATION, ServerProcess, free_port

NODE_DIR = REPO / "tests" / "node"
NODE = shutil.which("node")
JOB_NAME = re.compile(rf"^projects/\d+/locations/{LOCATION}/customJobs/\d+$")
NOT_FOUND, INVALID_ARGUMENT = 5, 3  # google.rpc.Code


@pytest.fixture(scope="module")
def grpc_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def grpc_server(tmp_path_factory: pytest.TempPathFactory, grpc_port: int) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path_factory.mktemp("node"), args=["--grpc-port", str(grpc_port)]).start()
    try:
        yield proc
    finally:
        proc.stop()


def run_node(script: str, *args: str) -> dict[str, Any]:
    if NODE is None:
        pytest.skip("node is missing: scripts/install-test-deps.sh installs Debian's nodejs")
    if not (NODE_DIR / "node_modules" / "@google-cloud" / "aiplatform").is_dir():
        pytest.skip("the Node client is not installed: `make test` runs `npm ci` in tests/node")
    # No GCE metadata server probe (google-auth-library looks for one): the tests talk only to loopback.
    env = {**os.environ, "METADATA_SERVER_DETECTION": "none"}
    done = subprocess.run(
        [NODE, str(NODE_DIR / script), *args],
        cwd=NODE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_job_service_over_grpc(grpc_server: ServerProcess, grpc_port: int) -> None:
    out = run_node("job_service.js", str(grpc_port), grpc_server.parent, sys.executable)

    created = out["created"]
    assert JOB_NAME.match(created["name"]), created
    assert created["displayName"].startswith("node-")
    assert created["state"] == "JOB_STATE_QUEUED"
    assert out["got"] == {
        "name": created["name"],
        "labels": {"client": "node"},
        "machineType": "n1-standard-4",
    }

    # Both jobs of this run, newest first; one a page, the second page reached by the page token.
    assert len(out["listed"]) == 2 and created["name"] in out["listed"]
    assert out["pages"] == [[name] for name in out["listed"]]

    assert out["cancelled"] == {"state": "JOB_STATE_CANCELLED", "errorCode": 1}  # CANCELLED

    # The delete LRO, followed to its end by the client's operations client (over gRPC too).
    deleted = next(name for name in out["listed"] if name != created["name"])
    assert out["deleteOperation"].startswith(f"{deleted}/operations/")
    assert out["deleted"] is True
    assert out["afterDelete"]["code"] == NOT_FOUND
    assert out["afterDelete"]["message"] == f"CustomJob {deleted} not found."

    assert out["notFound"]["code"] == NOT_FOUND
    assert out["notFound"]["message"].endswith("/customJobs/999999999 not found.")
    invalid = out["invalid"]
    assert invalid["code"] == INVALID_ARGUMENT
    assert invalid["violations"] == [
        {"field": "job_spec.worker_pool_specs", "description": "at least one worker pool spec is required"}
    ]
    assert invalid["message"] == (
        "Invalid value for job_spec.worker_pool_specs: at least one worker pool spec is required"
    )
