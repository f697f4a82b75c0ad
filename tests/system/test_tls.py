"""TLS on both APIs (`serve --tls-cert/--tls-key`) with the local CA of `trainworks admin tls init`, against a
real server process: HTTPS with the CA trusted, clients that do not trust it refused, the GAPIC client over
gRPC with TLS, replicas calling back over HTTPS, and the official SDK as a user runs it:
`aiplatform.init(api_endpoint="localhost:PORT")` with no api_transport (gRPC over TLS) and the CA named by
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, in a process of its own (gRPC reads the variable once, when it starts)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import certifi
import grpc
import httpx
import pytest
from google.api_core import exceptions
from google.cloud import aiplatform_v1

from tests.kinds.tuning_jobs.test_api import TRIAL
from tests.support.jobs import gapic_job, job, python_pool
from tests.support.rpc import gapic
from tests.support.server import LOCATION, PROJECT, ServerProcess, free_port, wait_job
from trainworks.cli.serve import storage_url
from trainworks.tls import REPLICA_TRUST_FILE, TRUST_VARIABLES, load_server_tls, replica_trust_env

CLI = [sys.executable, "-m", "trainworks.cli.main"]
BUCKET = "tls-bucket"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


class TlsServer(ServerProcess):
    """A server on HTTPS: its URL, and the fixture's health check, speak https://."""

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The helper's files, made by the command a user runs."""
    folder = tmp_path_factory.mktemp("tls") / "tls"
    done = cli("admin", "tls", "init", "--dir", str(folder))
    assert done.returncode == 0, done.stderr
    assert f"--tls-cert {folder}/server.pem --tls-key {folder}/server-key.pem" in done.stdout
    assert f"export GRPC_DEFAULT_SSL_ROOTS_FILE_PATH={folder}/ca.pem" in done.stdout
    assert f"export REQUESTS_CA_BUNDLE={folder}/ca.pem" in done.stdout
    assert "Made a new CA" in done.stderr and "Issued the server certificate" in done.stderr
    return folder


@pytest.fixture(scope="module")
def ca(material: Path) -> Path:
    return material / "ca.pem"


@pytest.fixture(scope="module")
def grpc_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, material: Path, ca: Path, grpc_port: int
) -> Iterator[TlsServer]:
    args = ["--grpc-port", str(grpc_port), "--tls-cert", str(material / "server.pem")]
    args += ["--tls-key", str(material / "server-key.pem")]
    # The server keeps this host's roots; the fixture's health check (httpx, in this process) trusts the CA.
    system = os.environ.get("SSL_CERT_FILE") or ssl.get_default_verify_paths().openssl_cafile
    proc = TlsServer(home=tmp_path_factory.mktemp("home"), args=args, env={"SSL_CERT_FILE": system})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SSL_CERT_FILE", str(ca))
        proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def https(server: TlsServer, ca: Path) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, verify=ssl.create_default_context(cafile=ca), timeout=30
    ) as client:
        yield client


# ------------------------------------------------------------------------------------------- the helper
def test_init_keeps_the_ca_and_reissues_only_for_new_names(material: Path, tmp_path: Path) -> None:
    for key in ("ca-key.pem", "server-key.pem"):
        assert (material / key).stat().st_mode & 0o777 == 0o600
    copy = tmp_path / "tls"
    shutil.copytree(material, copy)
    again = cli("admin", "tls", "init", "--dir", str(copy))
    assert again.returncode == 0, again.stderr
    assert "Kept the CA" in again.stderr and "Kept the server certificate" in again.stderr
    for name in ("ca.pem", "ca-key.pem", "server.pem", "server-key.pem"):
        assert (copy / name).read_bytes() == (material / name).read_bytes(), name

    more = cli(
        "admin", "tls", "init", "--dir", str(copy), "--name", "trainworks.internal", "--format", "json"
    )
    assert more.returncode == 0, more.stderr
    made = json.loads(more.stdout)
    assert (made["caCreated"], made["certIssued"]) == (False, True)
    assert (copy / "ca.pem").read_bytes() == (material / "ca.pem").read_bytes()
    tls = load_server_tls(copy / "server.pem", copy / "server-key.pem")
    assert set(tls.names) == {"localhost", "trainworks.internal", "127.0.0.1", "::1"}
    assert tls.ca == (material / "ca.pem").read_bytes()  # server.pem ends in the CA: the server knows it


@pytest.mark.parametrize(
    ("flags", "flag", "message"),
    [
        (["--tls-cert", "{dir}/server.pem"], "--tls-cert", "--tls-cert needs --tls-key too"),
        (["--tls-key", "{dir}/server-key.pem"], "--tls-key", "--tls-key needs --tls-cert too"),
        (
            ["--tls-cert", "{dir}/missing.pem", "--tls-key", "{dir}/server-key.pem"],
            "--tls-cert",
            "cannot read {dir}/missing.pem",
        ),
        (
            ["--tls-cert", "{dir}/server.pem", "--tls-key", "{dir}/ca-key.pem"],
            "--tls-key",
            "{dir}/ca-key.pem is not the private key of the certificate in {dir}/server.pem",
        ),
        (
            ["--tls-cert", "{dir}/server-key.pem", "--tls-key", "{dir}/server-key.pem"],
            "--tls-cert",
            "{dir}/server-key.pem holds no PEM certificate",
        ),
    ],
)
def test_serve_refuses_wrong_tls_files_clearly(
    material: Path, tmp_path: Path, flags: list[str], flag: str, message: str
) -> None:
    args = [f.format(dir=material) for f in flags]
    done = cli("serve", "--home", str(tmp_path / "home"), "--port", str(free_port()), *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    flat = " ".join(line.strip(" │╭╮╰╯─") for line in done.stderr.splitlines())  # rich boxes the error
    assert message.format(dir=material) in " ".join(flat.split()), done.stderr
    if "needs" not in message:
        assert f"Invalid value for {flag}" in flat, done.stderr


def test_replicas_are_told_the_https_url_and_trust_only_a_ca_the_server_knows(
    material: Path, tmp_path: Path
) -> None:
    assert storage_url("0.0.0.0", 8443, tls=True) == "https://127.0.0.1:8443"
    assert storage_url("::1", 8443, tls=True) == "https://[::1]:8443"
    tls = load_server_tls(material / "server.pem", material / "server-key.pem")
    env = replica_trust_env(tls, tmp_path / "run")
    bundle = tmp_path / "run" / REPLICA_TRUST_FILE
    assert set(env) == set(TRUST_VARIABLES) and set(env.values()) == {str(bundle)}
    assert bundle.read_bytes().endswith((material / "ca.pem").read_bytes())
    # No TLS, or a certificate whose chain stops short of its root (a CA the system trusts): nothing.
    assert replica_trust_env(None, tmp_path / "none") == {}
    assert replica_trust_env(dataclasses.replace(tls, ca=None), tmp_path / "public") == {}
    assert not (tmp_path / "none").exists() and not (tmp_path / "public").exists()


# --------------------------------------------------------------------------------------------- HTTPS
def test_https_with_the_ca_trusted(server: TlsServer, https: httpx.Client, ca: Path) -> None:
    assert https.get("/healthz").json()["status"] == "ok"
    created = https.post(f"/v1/{server.parent}/customJobs", json=job(python_pool("pass"), name="over-https"))
    assert created.status_code == 200, created.text
    name = created.json()["name"]
    assert https.get(f"/v1/{name}").json()["displayName"] == "over-https"
    # By name too: the certificate is for localhost.
    verify = ssl.create_default_context(cafile=ca)
    assert httpx.get(f"https://localhost:{server.port}/healthz", verify=verify).status_code == 200


def test_clients_that_do_not_trust_the_ca_are_refused(server: TlsServer, grpc_port: int) -> None:
    public_roots = ssl.create_default_context(cafile=certifi.where())
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{server.url}/healthz", verify=public_roots)
    with pytest.raises(httpx.TransportError):  # plain HTTP on the TLS port: no answer
        httpx.get(f"http://127.0.0.1:{server.port}/healthz", timeout=10)

    name = f"projects/{PROJECT}/locations/{LOCATION}/customJobs/1"
    untrusted = grpc.ssl_channel_credentials(root_certificates=Path(certifi.where()).read_bytes())
    for channel in (
        grpc.secure_channel(f"localhost:{grpc_port}", untrusted),
        grpc.insecure_channel(f"localhost:{grpc_port}"),
    ):
        with channel:
            client = gapic(aiplatform_v1.JobServiceClient, channel)
            with pytest.raises(exceptions.ServiceUnavailable):
                client.get_custom_job(name=name, timeout=20)


# ---------------------------------------------------------------------------------------------- gRPC
def test_gapic_client_over_grpc_with_tls(server: TlsServer, ca: Path, grpc_port: int) -> None:
    credentials = grpc.ssl_channel_credentials(root_certificates=ca.read_bytes())
    with grpc.secure_channel(f"localhost:{grpc_port}", credentials) as channel:
        client = gapic(aiplatform_v1.JobServiceClient, channel)
        created = client.create_custom_job(parent=server.parent, custom_job=gapic_job("over-grpc-tls"))
        assert client.get_custom_job(name=created.name).display_name == "over-grpc-tls"
        with pytest.raises(exceptions.NotFound):
            client.get_custom_job(name=f"{server.parent}/customJobs/999999999")


# ------------------------------------------------------------------------------------------- replicas
REPLICA_CALLS_BACK = f"""
import os, urllib.request
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage
url = os.environ["STORAGE_EMULATOR_HOST"]
assert url.startswith("https://"), url
# google-cloud-storage (requests: REQUESTS_CA_BUNDLE), then urllib (Python's ssl: SSL_CERT_FILE).
client = storage.Client(project="{PROJECT}", credentials=AnonymousCredentials())
client.bucket("{BUCKET}").blob("from-replica.txt").upload_from_string("over https")
with urllib.request.urlopen(url + "/storage/v1/b/{BUCKET}/o/from-replica.txt?alt=media") as answer:
    assert answer.read() == b"over https"
print("trust:", os.environ["SSL_CERT_FILE"])
"""


def test_replicas_call_back_over_https(server: TlsServer, https: httpx.Client, ca: Path) -> None:
    made = https.post("/storage/v1/b", params={"project": PROJECT}, json={"name": BUCKET})
    assert made.status_code == 200, made.text
    created = https.post(
        f"/v1/{server.parent}/customJobs", json=job(python_pool(REPLICA_CALLS_BACK), name="calls-back")
    )
    assert created.status_code == 200, created.text
    done = wait_job(https, created.json()["name"])
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    got = https.get(f"/storage/v1/b/{BUCKET}/o/from-replica.txt", params={"alt": "media"})
    assert got.content == b"over https"
    # The replica's bundle: this host's roots and the CA, in its run folder.
    job_id = created.json()["name"].rsplit("/", 1)[-1]
    bundle = (server.home / "jobs" / job_id / "workerpool0-0" / REPLICA_TRUST_FILE).read_bytes()
    assert bundle.endswith(ca.read_bytes()) and len(bundle) > len(ca.read_bytes())


# ------------------------------------------------------------------------------- the SDK, as users run it
SDK = """
import json, sys
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform
from google.cloud.aiplatform import jobs

endpoint, project, location, kind, python, script = sys.argv[1:7]
jobs._JOB_WAIT_TIME = 0.1
# A tuning job's trials run the trial script (it reports with cloudml-hypertune); a custom job just succeeds.
command = [python, script] if kind == "tuning" else [python, "-c", "print('ok')"]
aiplatform.init(
    api_endpoint=endpoint,
    credentials=AnonymousCredentials(),
    project=project,
    location=location,
    staging_bucket="gs://tls-staging",
)
pools = [
    {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "container_spec": {"image_uri": "python:3.11", "command": command},
    }
]
job = aiplatform.CustomJob(display_name="sdk-over-tls", worker_pool_specs=pools)
if kind == "tuning":
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    job = aiplatform.HyperparameterTuningJob(
        display_name="sdk-tune-over-tls",
        custom_job=job,
        metric_spec={"score": "maximize"},
        parameter_spec={"x": hpt.DoubleParameterSpec(min=-3, max=3, scale="linear")},
        max_trial_count=2,
        parallel_trial_count=2,
        search_algorithm="random",
    )
job.run()
print(json.dumps({
    "state": job.state.name,
    "name": job.resource_name,
    "transport": type(job.api_client._transport).__name__,  # no api_transport: the SDK's default
    "trials": len(job.trials) if kind == "tuning" else None,
}))
"""


def run_sdk(kind: str, grpc_port: int, ca: Path, tmp_path: Path) -> dict[str, Any]:
    program, trial = tmp_path / "sdk.py", tmp_path / "trial.py"
    program.write_text(SDK)
    trial.write_text(TRIAL)
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(ca)}
    env.pop("GOOGLE_API_USE_CLIENT_CERTIFICATE", None)
    endpoint = f"localhost:{grpc_port}"
    done = subprocess.run(
        [sys.executable, str(program), endpoint, PROJECT, LOCATION, kind, sys.executable, str(trial)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_sdk_custom_job_runs_over_grpc_with_tls(
    server: TlsServer, grpc_port: int, ca: Path, tmp_path: Path
) -> None:
    out = run_sdk("custom", grpc_port, ca, tmp_path)
    assert out["state"] == "JOB_STATE_SUCCEEDED", out
    assert out["transport"] == "JobServiceGrpcTransport"
    assert "/customJobs/" in out["name"]


def test_sdk_tuning_job_runs_over_grpc_with_tls(
    server: TlsServer, grpc_port: int, ca: Path, tmp_path: Path
) -> None:
    out = run_sdk("tuning", grpc_port, ca, tmp_path)
    assert out["state"] == "JOB_STATE_SUCCEEDED", out
    assert out["transport"] == "JobServiceGrpcTransport"
    assert "/hyperparameterTuningJobs/" in out["name"]
    assert out["trials"] == 2
