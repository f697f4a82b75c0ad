"""The official SDK's `CustomJob.from_local_script(...)` end to end against a host-mode server.

The SDK builds an sdist of the script, uploads it with google-cloud-storage (STORAGE_EMULATOR_HOST: the
server's GCS JSON API) and sends a container job whose command is `pip install --upgrade pip && pip3 install
-q --user /gcs/<bucket>/<sdist> && python3 -m aiplatform_custom_trainer_script.task ARGS`. In host mode that
runs in the host executor environment: pip works offline from the server's pip settings, installs land in the
replica's private user base (gone for the next job), and the server's own environment is left as it was.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform, aiplatform_v1, storage
from google.cloud.aiplatform import initializer
from google.cloud.aiplatform import jobs as sdk_jobs

from tests.kinds.custom_jobs.test_python_package import build_wheel
from tests.support.logs import replica_output
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_job

STAGING_BUCKET = "local-script-staging"
#: The server's pip (its "executor image" settings): no index, so nothing leaves this host and `pip install
#: --upgrade pip` finds nothing newer; no build isolation, so the sdist builds with the image's setuptools.
OFFLINE_PIP = {"PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

SCRIPT = """\
import json, os, sys

print("script args:", " ".join(sys.argv[1:]))
print("script file:", __file__)
# AIP_MODEL_DIR is a gs:// URI; the bucket is mounted at /gcs, as Cloud Storage FUSE shows it on Vertex.
model_dir = "/gcs/" + os.environ["AIP_MODEL_DIR"][len("gs://"):]
os.makedirs(model_dir, exist_ok=True)
with open(os.path.join(model_dir, "result.json"), "w") as out:
    json.dump({"args": sys.argv[1:]}, out)
"""


def server_environment_state() -> dict[str, int]:
    """What `pip install` into the server's environment would change: its distributions and their records,
    and its scripts (byte-code caches are left out: importing a module may write one)."""
    prefix = Path(sys.prefix)
    state: dict[str, int] = {}
    for site_packages in prefix.glob("lib/python3*/site-packages"):
        for entry in site_packages.iterdir():
            if entry.name == "__pycache__":
                continue
            record = entry / "RECORD" if entry.name.endswith(".dist-info") else entry
            state[str(entry.relative_to(prefix))] = record.stat().st_mtime_ns if record.exists() else 0
    for script in (prefix / "bin").iterdir():
        state[str(script.relative_to(prefix))] = script.lstat().st_mtime_ns
    return state


@pytest.fixture(scope="module")
def offline_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path_factory.mktemp("home"), env=OFFLINE_PIP).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def sdk(offline_server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> Any:
    # A fresh SDK configuration per test, as in test_official_client.py; the SDK's storage client finds the
    # server's GCS JSON API through STORAGE_EMULATOR_HOST.
    monkeypatch.setattr(initializer, "global_config", initializer._Config())
    monkeypatch.setattr(sdk_jobs, "_JOB_WAIT_TIME", 0.1)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", offline_server.url)
    initializer.global_config.init(
        project=PROJECT,
        location=LOCATION,
        api_endpoint=offline_server.url,
        api_transport="rest",
        credentials=AnonymousCredentials(),
        staging_bucket=f"gs://{STAGING_BUCKET}",
    )
    return aiplatform


def replica_logs(server: ServerProcess, job_name: str) -> list[str]:
    """workerpool0-0's log lines, through the server's logs extension."""
    path = f"/trainworks/v1/{server.parent}/customJobs/{job_name.rsplit('/', 1)[-1]}/logs"
    with server.client() as client:
        response = client.get(path, params={"task": "workerpool0-0"})
    assert response.status_code == 200, response.text
    entries = [json.loads(line) for line in response.text.splitlines() if line.strip()]
    return [e["text"] for e in entries if e.get("task") == "workerpool0-0"]


def test_from_local_script_runs_in_host_mode_without_touching_the_server(
    sdk: Any, offline_server: ServerProcess, tmp_path: Path
) -> None:
    script = tmp_path / "task.py"
    script.write_text(SCRIPT)
    before = server_environment_state()
    bucket = storage.Client(project=PROJECT, credentials=AnonymousCredentials()).create_bucket(STAGING_BUCKET)

    job = sdk.CustomJob.from_local_script(
        display_name="local-script",
        script_path=str(script),
        container_uri="python:3.11",
        args=["--epochs", "3", "--lr=0.5"],
        replica_count=1,
        requirements=[],
    )
    job.run()
    assert job.state == aiplatform_v1.JobState.JOB_STATE_SUCCEEDED

    # The SDK's own command, unchanged: it upgraded pip and installed the sdist with --user from /gcs.
    command = job.gca_resource.job_spec.worker_pool_specs[0].container_spec.command
    assert command[:2] == ["sh", "-c"]
    assert command[2].startswith(
        f"pip install --upgrade pip && pip3 install -q --user /gcs/{STAGING_BUCKET}/"
    )
    staged = [blob.name for blob in bucket.list_blobs()]
    assert any(name.endswith("aiplatform_custom_trainer_script-0.1.tar.gz") for name in staged), staged

    # The script ran with its arguments, from the replica's private user base.
    lines = replica_logs(offline_server, job.resource_name)
    assert "script args: --epochs 3 --lr=0.5" in lines, lines
    job_id = job.resource_name.rsplit("/", 1)[-1]
    user_base = offline_server.home / "jobs" / job_id / "workerpool0-0" / ".local"
    [file_line] = [line for line in lines if line.startswith("script file: ")]
    assert Path(file_line.removeprefix("script file: ")).is_relative_to(user_base)

    # What it wrote under AIP_MODEL_DIR (through /gcs) is an object the storage API serves.
    model_dir = job.gca_resource.job_spec.base_output_directory.output_uri_prefix.rstrip("/") + "/model/"
    result_name = model_dir[len(f"gs://{STAGING_BUCKET}/") :] + "result.json"
    assert json.loads(bucket.blob(result_name).download_as_text()) == {"args": ["--epochs", "3", "--lr=0.5"]}

    # pip upgraded nothing and installed nothing in the server's environment.
    assert server_environment_state() == before


def run_shell_job(server: ServerProcess, script: str) -> tuple[dict[str, Any], str]:
    """A host-mode container job running `sh -c script`; (the finished job, its replica's stdout+stderr)."""
    body = {
        "displayName": "shell",
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": "python:3.11", "command": ["sh", "-c", script]},
                }
            ]
        },
    }
    with server.client() as client:
        created = client.post(f"/v1/{server.parent}/customJobs", json=body).json()
        done = wait_job(client, created["name"])
    run_dir = server.home / "jobs" / created["name"].rsplit("/", 1)[-1] / "workerpool0-0"
    return done, replica_output(run_dir) + replica_output(run_dir, "stderr")


def test_installs_stay_in_their_replica(offline_server: ServerProcess) -> None:
    build_wheel(offline_server.home / "buckets" / "wheels")
    wheel = "/gcs/wheels/trainer_pkg-0.1-py3-none-any.whl"
    before = server_environment_state()

    # Installed without --user: the executor environment's pip still installs into the replica's user base.
    done, output = run_shell_job(
        offline_server,
        f'pip install -q {wheel} && python3 -c "import trainer_pkg; print(trainer_pkg.__file__)"',
    )
    assert done["state"] == "JOB_STATE_SUCCEEDED", output
    assert "/workerpool0-0/.local/lib/" in output

    # The next job starts from the image again: the package is not there.
    done, output = run_shell_job(offline_server, 'python3 -c "import trainer_pkg"')
    assert done["state"] == "JOB_STATE_FAILED"
    assert "No module named 'trainer_pkg'" in output

    # pip refuses to remove what belongs to the server's environment.
    done, output = run_shell_job(
        offline_server, "pip uninstall -y pyyaml; python3 -m pip uninstall -y pyyaml"
    )
    assert "outside environment" in output, output
    assert server_environment_state() == before
