"""The submitter end to end against a real server with a limited inventory: staging, capacity walk, follow."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.jobs import END_TOGETHER
from tests.support.server import PROJECT, ServerProcess, inventory_server
from trainworks.code_staging.store import CodeStore
from trainworks.submit.capacity import CapacityExhausted
from trainworks.submit.config import RunConfig, load_run_config
from trainworks.submit.follow import FollowSettings, FollowTimeout, JobFailed, follow_job
from trainworks.submit.submitter import LoggingEvents, submit_run
from trainworks.submit.targets import TrainworksTarget, VertexTarget

# us-east1 has no capacity at all; us-west1 lets a project hold 8 vCPUs: two n1-standard-4 replicas.
INVENTORY = """
regions:
  us-east1:
    stockout: true
    zones:
      us-east1-b: {elastic: true}
  us-west1:
    cpu_quota: 8
    zones:
      us-west1-a: {machines: {n1-standard-4: 10}}
"""

# Each replica prints its line; the replicas end together (END_TOGETHER), so none is stopped before it.
TASK = (
    """
import json, os, sys

from trainer.util import describe
from trainworks.runtime import shard, topology

t = topology()
print("TASK " + json.dumps({
    "rank": t.rank, "world": t.world_size, "args": sys.argv[1:], "shard": list(shard(range(10))),
    "threads": os.environ.get("OMP_NUM_THREADS"), "run": os.environ.get("TRAINWORKS_RUN_ID"),
    "what": describe(),
}), flush=True)
"""
    + END_TOGETHER
    + """
if "--fail" in sys.argv:
    sys.exit("the model diverged")
"""
)


class Recorder(LoggingEvents):
    def __init__(self) -> None:
        self.messages: list[str] = []
        self.warnings: list[str] = []
        self.states: list[str] = []
        self.logs: list[dict[str, Any]] = []
        self.uploaded = 0

    def info(self, message: str) -> None:
        self.messages.append(message)

    def warning(self, message: str) -> None:
        self.warnings.append(message)

    def upload_progress(self, done: int) -> None:
        self.uploaded += done

    def state(self, name: str, state: str) -> None:
        self.states.append(state)

    def log(self, entry: dict[str, Any]) -> None:
        self.logs.append(entry)

    def task_lines(self) -> list[dict[str, Any]]:
        return [json.loads(e["text"][5:]) for e in self.logs if str(e.get("text", "")).startswith("TASK ")]


@pytest.fixture(scope="module")
def regions_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with inventory_server(tmp_path_factory.mktemp("regions"), INVENTORY) as proc:
        yield proc


def write_project(root: Path, server: ServerProcess, **overrides: Any) -> Path:
    pkg = root / "src" / "trainer"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "util.py").write_text("def describe():\n    return 'v1'\n")
    (pkg / "task.py").write_text(TASK)
    config: dict[str, Any] = {
        "name": "forecast",
        "entry_module": "trainer.task",
        "package_dir": "src/trainer",
        "args": ["--epochs", 2],
        "hardware": {"profile": "cpu", "machine_type": "n1-standard-4", "threads": 2},
        "workers": 3,
        "regions": ["us-east1", "us-west1"],
        "image": "python:3.11",
        "python": sys.executable,
        "code_bucket": "gs://code-bucket",
        "labels": {"team": "demand"},
        "target": {"kind": "trainworks", "endpoint": server.url, "project": PROJECT},
        "capacity": {"policy": "FAILOVER", "same_region_retries": 0, "backoff_seconds": 0.1},
        "follow": {"poll_interval": 0.2, "wait_timeout": 300},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    path = root / "run.yaml"
    import yaml

    path.write_text(yaml.safe_dump(config))
    return path


def load(path: Path) -> RunConfig:
    return load_run_config(path)


def bucket_fs(server: ServerProcess) -> Any:
    return CodeStore.for_endpoint(server.url).fs


def test_walk_skips_a_stocked_out_region_and_clamps_workers_to_the_quota(
    regions_server: ServerProcess, tmp_path: Path
) -> None:
    cfg = load(write_project(tmp_path, regions_server))
    events = Recorder()
    run_id, job_name, handle = submit_run(cfg, events=events)

    assert handle.state == "JOB_STATE_SUCCEEDED"
    assert run_id.startswith("forecast-") and "/locations/us-west1/customJobs/" in job_name
    # us-east1 was stocked out at preflight; us-west1's quota grants 2 of the 3 workers.
    outcomes = [(a.region, a.outcome, a.workers) for a in handle.ledger.attempts]
    assert outcomes == [("us-east1", "skipped", None), ("us-west1", "submitted", 2)]
    assert any("2 of the 3 workers" in w for w in events.warnings)
    assert handle.plan.worker_count == 2 and handle.plan.requested_workers == 3

    # The job carries the run id and the walk; its two replicas split the items without a coordinator.
    job = handle.job
    assert job.labels["trainworks-run-id"] == run_id
    assert job.labels["trainworks-capacity"] == "us-east1_skipped__us-west1_submitted"
    assert job.labels["team"] == "demand"
    lines = sorted(events.task_lines(), key=lambda line: line["rank"])
    assert [(line["rank"], line["world"]) for line in lines] == [(0, 2), (1, 2)]
    assert sorted(lines[0]["shard"] + lines[1]["shard"]) == list(range(10))
    assert all(line["args"] == ["--epochs", "2"] and line["threads"] == "2" for line in lines)
    assert all(line["run"] == run_id and line["what"] == "v1" for line in lines)
    assert events.states[-1] == "JOB_STATE_SUCCEEDED"

    # The whole ledger and the run configuration are staged beside the code.
    fs = bucket_fs(regions_server)
    ledger = json.loads(fs.cat_file(handle.ledger_uri[len("gs://") :]))
    assert ledger["region"] == "us-west1" and ledger["preflight"][0]["stockout"] is True
    assert "entry_module: trainer.task" in fs.cat_file(handle.config_uri[len("gs://") :]).decode()
    assert fs.exists(handle.code.uri[len("gs://") :])


def test_a_stockout_seen_after_create_cancels_the_job_and_moves_on(
    regions_server: ServerProcess, tmp_path: Path
) -> None:
    cfg = load(
        write_project(
            tmp_path,
            regions_server,
            workers=2,
            capacity={"preflight": False, "policy": "EAGER_NEXT_REGION"},
        )
    )
    target = TrainworksTarget(regions_server.url, PROJECT)
    try:
        _run_id, job_name, handle = submit_run(cfg, target=target, events=Recorder())
        first = handle.ledger.attempts[0]
        assert (first.region, first.outcome) == ("us-east1", "stockout")
        assert "stock-out in us-east1" in first.detail
        cancelled = first.detail.rsplit("cancelled ", 1)[1].rstrip(")")
        assert target.get_custom_job(cancelled).state.name in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
        assert "/us-west1/" in job_name and handle.state == "JOB_STATE_SUCCEEDED"
    finally:
        target.close()


def test_quota_refusals_exhaust_the_walk(regions_server: ServerProcess, tmp_path: Path) -> None:
    # Without preflight, 4 workers (16 vCPUs) can never fit us-west1's 8-vCPU quota: the create is refused.
    cfg = load(
        write_project(
            tmp_path,
            regions_server,
            workers=4,
            regions=["us-west1"],
            capacity={"preflight": False, "same_region_retries": 1},
        )
    )
    with pytest.raises(CapacityExhausted) as info:
        submit_run(cfg, events=Recorder())
    assert [(a.region, a.try_number, a.outcome) for a in info.value.ledger.attempts] == [
        ("us-west1", 1, "quota"),
        ("us-west1", 2, "quota"),
    ]
    assert "quota" in info.value.ledger.attempts[0].detail


def test_a_failed_job_raises_with_its_error_message(regions_server: ServerProcess, tmp_path: Path) -> None:
    cfg = load(write_project(tmp_path, regions_server, workers=1, regions=["us-west1"], args=["--fail"]))
    with pytest.raises(JobFailed) as info:
        submit_run(cfg, events=Recorder())
    assert info.value.state == "JOB_STATE_FAILED"
    assert info.value.handle is not None and info.value.handle.run_id.startswith("forecast-")
    assert info.value.error_message


def test_unchanged_code_is_not_uploaded_again(regions_server: ServerProcess, tmp_path: Path) -> None:
    path = write_project(tmp_path, regions_server, workers=1, regions=["us-west1"])
    # Code no other test of this server staged.
    (tmp_path / "src" / "trainer" / "salt.py").write_text(f"SALT = {str(tmp_path)!r}\n")
    first_events, second_events = Recorder(), Recorder()
    _, _, first = submit_run(load(path), wait=False, events=first_events)
    _, _, second = submit_run(load(path), wait=False, events=second_events)
    assert first.code.uploaded and first_events.uploaded == first.code.size
    assert not second.code.uploaded and second_events.uploaded == 0
    assert second.code.uri == first.code.uri
    (tmp_path / "src" / "trainer" / "util.py").write_text("def describe():\n    return 'v2'\n")
    _, _, third = submit_run(load(path), wait=False, events=Recorder())
    assert third.code.uploaded and third.code.uri != first.code.uri


def test_the_same_submitter_drives_the_official_client(
    regions_server: ServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # target.kind vertex: the official google-cloud-aiplatform client, here pointed at our server.
    cfg = load(
        write_project(
            tmp_path,
            regions_server,
            workers=2,
            regions=["us-west1"],
            target={"kind": "vertex", "endpoint": regions_server.url, "project": PROJECT},
        )
    )
    target = VertexTarget(PROJECT, regions_server.url)
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)  # the code goes to the endpoint's buckets
    try:
        _run_id, job_name, handle = submit_run(cfg, target=target, events=Recorder())
    finally:
        target.close()
    assert handle.state == "JOB_STATE_SUCCEEDED" and "/us-west1/" in job_name
    assert handle.ledger.preflight == []  # Vertex AI has no preflight: the walk learns from create errors
    assert handle.job.job_spec is not None and handle.job.job_spec.worker_pool_specs[1].replica_count == 1


def test_cli_submit_follows_and_prints_the_handle(regions_server: ServerProcess, tmp_path: Path) -> None:
    path = write_project(tmp_path, regions_server)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainworks.cli.main",
            "submit",
            str(path),
            "--region",
            "us-east1,us-west1",
            "--workers",
            "2",
            "--wait",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    handle = json.loads(out[out.index("{\n") :])
    assert handle["state"] == "JOB_STATE_SUCCEEDED" and handle["region"] == "us-west1"
    assert [a["outcome"] for a in handle["capacity"]["attempts"]] == ["skipped", "submitted"]
    assert "preflight us-east1: stocked out" in run.stderr
    # Logs were streamed while waiting (JSON lines on stdout before the handle).
    assert '"TASK ' in out or "TASK {" in out

    describe = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainworks.cli.main",
            "custom-jobs",
            "describe",
            handle["jobName"],
            "--endpoint",
            regions_server.url,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert describe.returncode == 0, describe.stderr
    assert "us-east1 skipped -> us-west1 submitted" in describe.stdout


def test_cli_submit_reports_config_errors_by_field(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(
        textwrap.dedent("""
        name: Bad_Name
        entry_module: trainer.task
        package_dir: missing
        image: python:3.11
        code_bucket: gs://b
        workerz: 2
    """)
    )
    run = subprocess.run(
        [sys.executable, "-m", "trainworks.cli.main", "submit", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "name" in run.stderr and "workerz" in run.stderr and "workers" in run.stderr


class StallRecorder(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.stalls: list[tuple[str, float]] = []

    def stalled(self, name: str, state: str, seconds: float) -> None:
        self.stalls.append((state, seconds))


def test_following_reports_a_stall_then_gives_up_waiting(regions_server: ServerProcess) -> None:
    # A job in a stocked-out region never starts: the follower reports the stall (without stopping), then its
    # wait runs out; the job itself keeps waiting on the server.
    target = TrainworksTarget(regions_server.url, PROJECT)
    try:
        body = {
            "displayName": "stuck",
            "jobSpec": {
                "workerPoolSpecs": [
                    {
                        "machineSpec": {"machineType": "n1-standard-4"},
                        "replicaCount": "1",
                        "containerSpec": {"imageUri": "python:3.11", "command": [sys.executable, "-c", "0"]},
                    }
                ]
            },
        }
        name = target.create_custom_job("us-east1", body).name
        events = StallRecorder()
        settings = FollowSettings(wait_timeout=1.0, stall_grace=0.25, poll_interval=0.05, stream_logs=False)
        with pytest.raises(FollowTimeout) as info:
            follow_job(target, name, settings, events)
        assert info.value.state == "JOB_STATE_QUEUED"
        assert events.stalls and all(state == "JOB_STATE_QUEUED" for state, _ in events.stalls)
        assert all(seconds >= 0.25 for _, seconds in events.stalls)
        assert len(events.stalls) <= 4  # once per grace period, not once per poll
        assert target.get_custom_job(name).state.name == "JOB_STATE_QUEUED"
        assert "stock-out" in (target.waiting_reason(name) or "")
        target.cancel_custom_job(name)
    finally:
        target.close()
