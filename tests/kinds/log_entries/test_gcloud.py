"""The real gcloud reading job logs through the server's Cloud Logging API (`api_endpoint_overrides/logging`):
`ai custom-jobs stream-logs` following a running job, `ai hp-tuning-jobs stream-logs` on a tuning job, and
`logging read`.

gcloud's stream-logs polls entries:list with a lower bound that moves past what it printed, and holds back the
newest 5 seconds; it asks for the job once, when it starts, and stops after two empty polls only if the job
had already ended then: following a job that was running, it never stops by itself (against Vertex AI too),
so the test stops it once the job's last line came.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.gcloud import GCLOUD, Gcloud, gcloud_for, needs_gcloud
from tests.support.jobs import job, python_pool
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_for, wait_job

pytestmark = needs_gcloud

TRIAL = (
    "import sys, hypertune\n"
    "x = float(sys.argv[-1].split('=')[1])\n"
    "print(f'trial says x={x}', flush=True)\n"
    "hypertune.HyperTune().report_hyperparameter_tuning_metric(\n"
    "    hyperparameter_metric_tag='score', metric_value=x)\n"
)
READ_ME = "import sys\nfor i in range(8):\n    print(f'read me {i}')\nprint('oops', file=sys.stderr)\n"


@pytest.fixture(scope="module")
def gcloud(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Gcloud:
    configured = gcloud_for(server, tmp_path_factory.mktemp("gcloud-logs"))
    configured.ok("config", "set", "api_endpoint_overrides/logging", f"{server.url}/")
    return configured


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@pytest.fixture(scope="module")
def started(server: ServerProcess, http: httpx.Client) -> dict[str, str]:
    """The jobs the later tests read, started first: they run while the first test follows its own."""
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "containerSpec": {"imageUri": "python:3.11", "command": [sys.executable, "-c", TRIAL]},
    }
    body = {
        "displayName": "gcloud-logs-tune",
        "studySpec": {
            "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}],
        },
        "maxTrialCount": 2,
        "parallelTrialCount": 2,
        "trialJobSpec": {"workerPoolSpecs": [pool]},
    }
    tuning = http.post(f"/v1/{server.parent}/hyperparameterTuningJobs", json=body)
    assert tuning.status_code == 200, tuning.text
    read = http.post(f"/v1/{server.parent}/customJobs", json=job(python_pool(READ_ME)))
    assert read.status_code == 200, read.text
    return {"tuning": tuning.json()["name"], "read": read.json()["name"]}


def columns(line: str) -> list[str]:
    """A line of stream-logs' output: severity, time, task and message, tab-separated."""
    return line.rstrip("\n").split("\t")


class Follower:
    """gcloud running in the background, its output lines collected as they come."""

    def __init__(self, gcloud: Gcloud, *args: str) -> None:
        assert GCLOUD is not None
        self.process = subprocess.Popen(
            [GCLOUD, *args], env=gcloud.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def messages(self) -> list[str]:
        return [columns(line)[-1] for line in list(self.lines)]

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.reader.join(timeout=10)
        assert self.process.stderr is not None
        return self.process.stderr.read()


def test_custom_jobs_stream_logs_follows_a_running_job(
    started: dict[str, str], gcloud: Gcloud, http: httpx.Client, server: ServerProcess, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    code = (
        "import json, os, sys, time\n"
        "print('before the gate', flush=True)\n"
        "print('a warning on stderr', file=sys.stderr, flush=True)\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.05)\n"
        "print(json.dumps({'severity': 'NOTICE', 'message': 'after the gate', 'step': 1}), flush=True)\n"
    )
    name = http.post(f"/v1/{server.parent}/customJobs", json=job(python_pool(code))).json()["name"]
    job_id = name.rsplit("/", 1)[1]
    wait_job(http, name, {"JOB_STATE_RUNNING"})
    follower = Follower(
        gcloud, "ai", "custom-jobs", "stream-logs", job_id, f"--region={LOCATION}", "--polling-interval=1"
    )
    try:
        wait_for(
            lambda: "before the gate" in follower.messages(), timeout=90, what="the first line in gcloud"
        )
        assert "after the gate" not in follower.messages()
        gate.touch()
        assert wait_job(http, name)["state"] == "JOB_STATE_SUCCEEDED"
        wait_for(
            lambda: "Job completed successfully." in follower.messages(),
            timeout=90,
            what="the job's last entry",
        )
    finally:
        gate.touch()
        errors = follower.stop()
    shown = [columns(line) for line in follower.lines]
    messages = [row[-1] for row in shown]
    for line in ("before the gate", "a warning on stderr", "after the gate"):
        assert messages.count(line) == 1, (line, messages, errors)
    order = [
        messages.index(line) for line in ("before the gate", "after the gate", "Job completed successfully.")
    ]
    assert order == sorted(order)
    by_message = {row[-1]: row for row in shown}
    assert by_message["before the gate"][0] == "INFO" and by_message["before the gate"][2] == "workerpool0-0"
    assert by_message["a warning on stderr"][0] == "ERROR"
    assert by_message["after the gate"][0] == "NOTICE"  # jsonPayload: its severity and message
    assert by_message["Job completed successfully."][2] == "service"


def test_hp_tuning_jobs_stream_logs_shows_the_trials(
    gcloud: Gcloud, http: httpx.Client, started: dict[str, str]
) -> None:
    name = started["tuning"]
    done: dict[str, Any] = wait_for(
        lambda: (j := http.get(f"/v1/{name}").json()).get("state") == "JOB_STATE_SUCCEEDED" and j,
        timeout=120,
        what="the tuning job to succeed",
    )
    # The job has ended: gcloud stops by itself once it has printed everything.
    streamed = gcloud(
        "ai",
        "hp-tuning-jobs",
        "stream-logs",
        name.rsplit("/", 1)[1],
        f"--region={LOCATION}",
        "--polling-interval=1",
        timeout=120,
    )
    assert streamed.returncode == 0, streamed.stderr
    rows = [columns(line) for line in streamed.stdout.splitlines()]
    trial_lines = [row for row in rows if row[-1].startswith("trial says x=")]
    assert len(trial_lines) == len(done["trials"]) == 2
    assert all(row[0] == "INFO" and row[2] == "workerpool0-0" for row in trial_lines)
    xs = sorted(f"trial says x={t['parameters'][0]['value']}" for t in done["trials"])
    assert sorted(row[-1] for row in trial_lines) == xs


def test_logging_read_returns_the_entries(
    gcloud: Gcloud, http: httpx.Client, started: dict[str, str]
) -> None:
    name = started["read"]
    assert wait_job(http, name)["state"] == "JOB_STATE_SUCCEEDED"
    job_id = name.rsplit("/", 1)[1]
    query = f"resource.type=ml_job AND resource.labels.job_id={job_id}"
    newest = json.loads(gcloud.ok("logging", "read", query, "--format=json", "--limit=4"))
    every = http.post(
        "/v2/entries:list",
        json={"resourceNames": [f"projects/{PROJECT}"], "filter": query, "orderBy": "timestamp desc"},
    ).json()["entries"]
    assert [e["insertId"] for e in newest] == [e["insertId"] for e in every[:4]]  # newest first, as asked
    assert newest[0]["textPayload"] == "Job completed successfully."
    oldest = json.loads(gcloud.ok("logging", "read", query, "--format=json", "--order=asc", "--limit=50"))
    assert [e["insertId"] for e in oldest] == [e["insertId"] for e in every[::-1]]
    lines = [e["textPayload"] for e in oldest if e["resource"]["labels"]["task_name"] == "workerpool0-0"]
    assert lines[:8] == [f"read me {i}" for i in range(8)] and "oops" in lines
    errors = json.loads(gcloud.ok("logging", "read", f"{query} AND severity>=ERROR", "--format=json"))
    assert [e["textPayload"] for e in errors] == ["oops"] and errors[0]["severity"] == "ERROR"
    refused = gcloud("logging", "read", f"{query} AND severity>=LOUD")
    assert refused.returncode != 0 and "invalid severity 'LOUD'" in refused.stderr
