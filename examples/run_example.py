"""`make run`: start a server, submit the example DDP job, follow it to success, stop the server.

Everything it starts is stopped by PID before it exits; its state lives in .trainworks-run/.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
HOME = ROOT / ".trainworks-run"
PARENT = "projects/example-project/locations/us-central1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


BUCKET = "example-bucket"
SCRIPT = "code/ddp_train.py"


def stage_code(client: httpx.Client) -> None:
    """The training script goes to the bucket, as on Vertex: replicas see it under /gcs (nothing of the
    host's /tmp, where a checkout may lie, shows inside a replica)."""
    made = client.post("/storage/v1/b", params={"project": "example-project"}, json={"name": BUCKET})
    if made.status_code != 409:  # 409: it is there from an earlier run
        made.raise_for_status()
    client.post(
        f"/upload/storage/v1/b/{BUCKET}/o",
        params={"uploadType": "media", "name": SCRIPT},
        content=(ROOT / "examples" / "ddp_train.py").read_bytes(),
        headers={"Content-Type": "text/x-python"},
    ).raise_for_status()


def job_body() -> dict[str, object]:
    container = {
        "imageUri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
        "command": ["python3", f"/gcs/{BUCKET}/{SCRIPT}"],
        "args": ["--epochs", "40"],
    }
    machine = {"machineType": "n1-standard-4"}
    return {
        "displayName": "example-ddp-linear-regression",
        "labels": {"example": "ddp"},
        "jobSpec": {
            "workerPoolSpecs": [
                {"machineSpec": machine, "replicaCount": "1", "containerSpec": container},
                {"machineSpec": machine, "replicaCount": "2", "containerSpec": container},
            ],
            "baseOutputDirectory": {"outputUriPrefix": f"gs://{BUCKET}/ddp-run"},
            "scheduling": {"timeout": "600s"},
        },
    }


def main() -> int:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    HOME.mkdir(exist_ok=True)
    log = open(HOME / "server.log", "ab")  # noqa: SIM115 - the server writes to it until it stops
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainworks.cli.main",
            "serve",
            "--port",
            str(port),
            "--home",
            str(HOME),
            "--container-runtime",
            "host",
        ],
        stdout=log,
        stderr=log,
    )
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if server.poll() is not None or time.monotonic() > deadline:
                    print((HOME / "server.log").read_text()[-4000:], file=sys.stderr)
                    print("the server did not start", file=sys.stderr)
                    return 1
                time.sleep(0.1)
            print(f"Trainworks server on {url} (home {HOME})")
            stage_code(client)
            created = client.post(f"/v1/{PARENT}/customJobs", json=job_body())
            created.raise_for_status()
            job = created.json()
            name = job["name"]
            print(f"Submitted {name} ({job['displayName']}): 1 primary + 2 workers")
            logs_path = f"/trainworks/v1/{name}/logs"
            with client.stream("GET", logs_path, params={"follow": "true"}, timeout=None) as stream:
                for line in stream.iter_lines():
                    if line:
                        entry = json.loads(line)
                        print(f"  [{entry['task']}] {entry['text']}")
            job = client.get(f"/v1/{name}").json()
            print(f"Job state: {job['state']}")
            if job["state"] != "JOB_STATE_SUCCEEDED":
                print(json.dumps(job.get("error", {}), indent=2), file=sys.stderr)
                return 1
            model_dir = HOME / "buckets" / "example-bucket" / "ddp-run" / "model"
            result = json.loads((model_dir / "result.json").read_text())
            print(f"Model: gs://example-bucket/ddp-run/model/ -> {model_dir}")
            print(
                f"Learned y = {result['weight']:.3f}x + {result['bias']:.3f} (target 3x - 2), "
                f"final loss {result['loss']:.5f}, {result['world_size']} replicas"
            )
            job_dir = HOME / "jobs" / name.rsplit("/", 1)[-1]
            print(f"Job folder: {job_dir} (replica logs in <task>/.trainworks-log/, read through the API)")
            return 0
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


if __name__ == "__main__":
    sys.exit(main())
