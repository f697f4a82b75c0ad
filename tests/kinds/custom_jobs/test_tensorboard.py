"""TensorBoard on a job's AIP_TENSORBOARD_LOG_DIR: a real job writes scalars with torch's SummaryWriter,
`trainworks tensorboard NAME` launches the real TensorBoard on them, and its HTTP API shows the run."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.support.jobs import job, python_pool
from tests.support.server import LOCATION, PROJECT, ServerProcess, free_port, wait_for, wait_job

WRITER = (
    "import os\n"
    "from torch.utils.tensorboard import SummaryWriter\n"
    "log_dir = os.environ['AIP_TENSORBOARD_LOG_DIR']\n"
    "assert log_dir == 'gs://tb-bucket/run1/logs/', log_dir\n"
    "writer = SummaryWriter('/gcs/' + log_dir[len('gs://'):])  # the bucket's FUSE view, as on Vertex\n"
    "for step in range(5):\n"
    "    writer.add_scalar('train/loss', 1.0 / (step + 1), step)\n"
    "writer.close()\n"
)


def cli(server: ServerProcess, *args: str) -> list[str]:
    common = ["--endpoint", server.url, "--project", PROJECT, "--region", LOCATION]
    return [sys.executable, "-m", "trainworks.cli.main", "tensorboard", *args, *common]


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_tensorboard_serves_the_scalars_a_job_wrote(server: ServerProcess, tmp_path: Path) -> None:
    body = job(python_pool(WRITER), baseOutputDirectory={"outputUriPrefix": "gs://tb-bucket/run1"})
    with server.client() as client:
        name = client.post(f"/v1/{server.parent}/customJobs", json=body).json()["name"]
        done = wait_job(client, name)
        assert done["state"] == "JOB_STATE_SUCCEEDED", done
        info = client.get(f"/trainworks/v1/{name}/tensorboard").json()
    log_dir = server.home / "buckets" / "tb-bucket" / "run1" / "logs"
    assert info == {"name": name, "logDir": "gs://tb-bucket/run1/logs/", "localPath": str(log_dir)}
    assert list(log_dir.glob("events.out.tfevents.*"))

    port = free_port()
    # stderr to a file: TensorBoard shares it, and a pipe it held open would block a read of it.
    stderr = tmp_path / "cli.stderr"
    with open(stderr, "w") as sink:
        command = cli(server, name.rsplit("/", 1)[-1], "--port", str(port))
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=sink, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()  # printed once TensorBoard listens
        assert url == f"http://127.0.0.1:{port}/", (url, stderr.read_text())
        with httpx.Client(base_url=url, timeout=10) as tensorboard:

            def tags() -> dict | None:
                found = tensorboard.get("data/plugin/scalars/tags").json()
                return found if "train/loss" in found.get(".", {}) else None

            wait_for(tags, timeout=60, interval=0.2, what="TensorBoard to load the job's scalars")
            points = tensorboard.get("data/plugin/scalars/scalars", params={"run": ".", "tag": "train/loss"})
            assert [(step, round(value, 4)) for _, step, value in points.json()] == [
                (step, round(1.0 / (step + 1), 4)) for step in range(5)
            ]
        wait_for(lambda: "Press Ctrl-C" in stderr.read_text(), what="the CLI to wait for Ctrl-C")
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr.read_text()
    assert "Stopping TensorBoard." in stderr.read_text()
    assert not listening(port)  # the CLI stopped its TensorBoard


def test_job_without_base_output_directory_has_no_log_dir(server: ServerProcess) -> None:
    with server.client() as client:
        name = client.post(f"/v1/{server.parent}/customJobs", json=job(python_pool("pass"))).json()["name"]
        response = client.get(f"/trainworks/v1/{name}/tensorboard")
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["status"] == "FAILED_PRECONDITION"
        assert "jobSpec.baseOutputDirectory" in error["message"]
        missing = client.get(f"/trainworks/v1/{server.parent}/customJobs/424242/tensorboard")
        assert missing.status_code == 404
    result = subprocess.run(
        cli(server, name.rsplit("/", 1)[-1], "--port", str(free_port())),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "jobSpec.baseOutputDirectory" in result.stderr
    assert result.stdout == ""
