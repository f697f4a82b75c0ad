"""Tokens scoped to projects, against a real server: every surface refuses another project's token (403
PERMISSION_DENIED naming the project) and serves the right one; buckets follow their owning project; a revoked
token is refused at once; no credential ever shows in a response body or the server's log.

The tokens are made and revoked with the real CLI (`trainworks admin tokens`) on the server's own home, while
the server runs: token A for project alpha, token B for project beta, a stored admin token, and the admin
token of `--api-token`.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from google.api_core import exceptions
from google.auth import api_key
from google.cloud import aiplatform_v1, storage
from google.oauth2.credentials import Credentials
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.support import command_forks
from tests.support.jobs import MACHINE
from tests.support.server import ServerProcess, wait_for, wait_job
from trainworks.storage.bucket_projects import bucket_project
from trainworks.store.database import Database
from trainworks.tokens.rules import TokenError
from trainworks.tokens.store import TokenStore

LOC = "us-central1"
FLAG = "flag-admin-" + secrets.token_urlsafe(16)
TABULAR = "gs://google-cloud-aiplatform/schema/dataset/metadata/tabular_1.0.0.yaml"


def tokens_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return command_forks.run_cli(["admin", "tokens", *args, "--home", str(home)], timeout=120)


def make_token(home: Path, *args: str) -> str:
    made = tokens_cli(home, "create", *args)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("tw_") and "\n" not in token
    return token


def parent(project: str) -> str:
    return f"projects/{project}/locations/{LOC}"


def sleeper(name: str = "sleeper", **spec: Any) -> dict[str, Any]:
    pool = {
        "machineSpec": MACHINE,
        "replicaCount": "1",
        "containerSpec": {"imageUri": "x", "command": ["sleep", "600"]},
    }
    return {"displayName": name, "jobSpec": {"workerPoolSpecs": [pool], **spec}}


@dataclass
class World:
    server: ServerProcess
    a: str
    b: str
    admin: str
    seen: list[str] = field(default_factory=list)  # every response body, checked for credentials

    @property
    def secrets(self) -> list[str]:
        return [FLAG, self.a, self.b, self.admin]

    def _record(self, response: httpx.Response) -> None:
        response.read()
        self.seen.append(response.text + json.dumps(dict(response.headers)))

    def http(self, token: str | None, how: str = "bearer") -> httpx.Client:
        headers: dict[str, str] = {}
        params: dict[str, str] = {}
        if token is not None and how == "bearer":
            headers["authorization"] = f"Bearer {token}"
        elif token is not None and how == "header":
            headers["x-goog-api-key"] = token
        elif token is not None:
            params["key"] = token
        return self.server.client(headers=headers, params=params, event_hooks={"response": [self._record]})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    home = tmp_path_factory.mktemp("tokens")
    a = make_token(home, "--project", "alpha", "--description", "team alpha")
    b = make_token(home, "--project", "beta")
    admin = make_token(home, "--admin", "--description", "operator")
    server = ServerProcess(home=home, args=["--api-token", FLAG, "--access-log"]).start()
    try:
        yield World(server, a, b, admin)
    finally:
        server.stop()


def refused(response: httpx.Response, named: str | None = None) -> None:
    """A 403 PERMISSION_DENIED whose message names `named` (default: the project of the request's path)."""
    assert response.status_code == 403, (response.request.method, response.request.url, response.text)
    error = response.json()["error"]
    assert error["status"] == "PERMISSION_DENIED"
    assert (named or project_of(response.request.url.path)) in error["message"]


def ok(response: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, (response.request.method, response.request.url, response.text)
    return response.json() if response.content else {}


def project_of(path: str) -> str:
    """The project segment of a path or resource name, as a refusal quotes it."""
    return "'" + path.split("projects/", 1)[1].split("/", 1)[0] + "'"


def wait_done(http: httpx.Client, op_name: str) -> dict[str, Any]:
    return wait_for(  # type: ignore[no-any-return]
        lambda: (lambda op: op if op.get("done") else None)(http.get(f"/v1/{op_name}").json()),
        timeout=120,
        what=f"operation {op_name}",
    )


# ====================================================================== the REST API
def test_custom_jobs_logs_and_shell_follow_the_project(world: World, tmp_path: Path) -> None:
    with world.http(world.a) as a, world.http(world.b) as b:
        theirs = ok(b.post(f"/v1/{parent('beta')}/customJobs", json=sleeper()))["name"]
        their_id = theirs.rsplit("/", 1)[-1]
        marker = tmp_path / "started"
        body = sleeper()
        body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["command"] = [
            "sh",
            "-c",
            f"touch {marker}; exec sleep 600",
        ]
        mine = ok(a.post(f"/v1/{parent('alpha')}/customJobs", json=body))["name"]
        my_id = mine.rsplit("/", 1)[-1]
        try:
            # Another project's: every verb, the v1beta1 paths, the extensions, by ID or by number.
            for response in (
                a.get(f"/v1/{parent('beta')}/customJobs"),
                a.post(f"/v1/{parent('beta')}/customJobs", json=sleeper()),
                a.get(f"/v1/{theirs}"),
                a.get(f"/v1beta1/{theirs}"),
                a.post(f"/v1/{theirs}:cancel", json={}),
                a.delete(f"/v1/{theirs}"),
                a.get(f"/trainworks/v1/{parent('beta')}/customJobs/{their_id}/logs"),
                a.get(f"/trainworks/v1/{parent('beta')}/customJobs/{their_id}/status"),
                a.get(f"/trainworks/v1/{parent('beta')}/costs"),
                a.get(f"/trainworks/v1/{parent('beta')}/capacity"),
            ):
                refused(response)  # the project as the path names it: an ID, or the number in a name
            assert theirs.split("/")[1].isdigit()
            # Its own, by ID and by the number the server gave it.
            assert my_id in [
                j["name"].rsplit("/", 1)[-1]
                for j in ok(a.get(f"/v1/{parent('alpha')}/customJobs"))["customJobs"]
            ]
            ok(a.get(f"/v1/{mine}"))
            ok(a.get(f"/v1beta1/{mine}"))
            ok(a.get(f"/trainworks/v1/{parent('alpha')}/customJobs/{my_id}/logs"))
            ok(a.get(f"/trainworks/v1/{parent('alpha')}/costs"))

            # The shell: the same check before the upgrade, header or ?key=.
            wait_for(marker.exists, timeout=120, what="the replica to start")
            wait_job(a, mine, {"JOB_STATE_RUNNING"})
            url = (
                f"ws://127.0.0.1:{world.server.port}/trainworks/v1/{parent('alpha')}/customJobs/{my_id}:shell"
            )
            with pytest.raises(InvalidStatus) as denied:
                connect(url + "?command=true", additional_headers={"authorization": f"Bearer {world.b}"})
            assert denied.value.response.status_code == 403
            error = json.loads(denied.value.response.body)["error"]
            assert error["status"] == "PERMISSION_DENIED" and "'alpha'" in error["message"]
            assert world.b not in denied.value.response.body.decode()
            with connect(f"{url}?tty=0&command=echo%20shell-ok&key={world.a}") as ws:
                seen = b""
                while b"shell-ok" not in seen:
                    message = ws.recv(timeout=60)
                    seen += message if isinstance(message, bytes) else b""
        finally:
            ok(a.post(f"/v1/{mine}:cancel", json={}))
            ok(b.post(f"/v1/{theirs}:cancel", json={}))
        assert wait_job(a, mine)["state"] == "JOB_STATE_CANCELLED"
        wait_job(b, theirs)
        wait_done(a, ok(a.delete(f"/v1/{mine}"))["name"])
        refused(a.delete(f"/v1/{theirs}"))
        ok(b.delete(f"/v1/{theirs}"))


def test_tuning_jobs_follow_the_project(world: World) -> None:
    body = {
        "displayName": "tune",
        "studySpec": {
            "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}],
        },
        "maxTrialCount": 1,
        "parallelTrialCount": 1,
        "trialJobSpec": sleeper()["jobSpec"],
    }
    with world.http(world.a) as a, world.http(world.b) as b:
        theirs = ok(b.post(f"/v1/{parent('beta')}/hyperparameterTuningJobs", json=body))["name"]
        mine = ok(a.post(f"/v1/{parent('alpha')}/hyperparameterTuningJobs", json=body))["name"]
        for response in (
            a.get(f"/v1/{parent('beta')}/hyperparameterTuningJobs"),
            a.post(f"/v1/{parent('beta')}/hyperparameterTuningJobs", json=body),
            a.get(f"/v1/{theirs}"),
            a.post(f"/v1/{theirs}:cancel", json={}),
            a.delete(f"/v1/{theirs}"),
        ):
            refused(response)
        ok(a.get(f"/v1/{parent('alpha')}/hyperparameterTuningJobs"))
        ok(a.get(f"/v1/{mine}"))
        ok(a.post(f"/v1/{mine}:cancel", json={}))
        ok(b.post(f"/v1/{theirs}:cancel", json={}))
        wait_job(a, mine)
        wait_job(b, theirs)
        ok(a.delete(f"/v1/{mine}"))


def test_persistent_resources_and_operations_follow_the_project(world: World) -> None:
    body = {"resourcePools": [{"machineSpec": MACHINE, "replicaCount": "1"}]}
    rid = f"pr-{uuid.uuid4().hex[:8]}"
    with world.http(world.a) as a, world.http(world.b) as b:
        refused(
            a.post(
                f"/v1/{parent('beta')}/persistentResources", params={"persistentResourceId": rid}, json=body
            ),
            "'beta'",
        )
        op = ok(
            a.post(
                f"/v1/{parent('alpha')}/persistentResources", params={"persistentResourceId": rid}, json=body
            )
        )
        done = wait_done(a, op["name"])
        name = done["response"]["name"]
        op_id = op["name"].rsplit("/", 1)[-1]
        # The operation under the project as the client named it, and under the number the server gave.
        for path in (
            f"/v1/{parent('alpha')}/persistentResources/{rid}/operations/{op_id}",
            f"/ui/{parent('alpha')}/persistentResources/{rid}/operations/{op_id}",
            f"/v1/{op['name']}",
        ):
            ok(a.get(path))
            refused(b.get(path), project_of(path))
        for path in (
            f"/v1/{name}",
            f"/v1/{parent('alpha')}/persistentResources",
            f"/v1/{parent('alpha')}/operations",
        ):
            ok(a.get(path))
            refused(b.get(path), project_of(path))
        refused(b.post(f"/v1/{op['name']}:cancel", json={}), project_of(op["name"]))
        refused(b.delete(f"/v1/{name}"), project_of(name))
        wait_done(a, ok(a.delete(f"/v1/{name}"))["name"])


def test_models_datasets_pipelines_and_clusters_follow_the_project(world: World) -> None:
    missing = "1234567"
    with world.http(world.a) as a:
        for collection, version in (
            ("models", "v1"),
            ("datasets", "v1"),
            ("trainingPipelines", "v1"),
            ("modelDevelopmentClusters", "v1beta1"),
        ):
            ok(a.get(f"/{version}/{parent('alpha')}/{collection}"))
            assert a.get(f"/{version}/{parent('alpha')}/{collection}/{missing}").status_code == 404
            refused(a.get(f"/{version}/{parent('beta')}/{collection}"), "'beta'")
            refused(a.get(f"/{version}/{parent('beta')}/{collection}/{missing}"), "'beta'")
        model = {"displayName": "m", "artifactUri": "gs://whatever/m/", "containerSpec": {"imageUri": "x"}}
        refused(a.post(f"/v1/{parent('beta')}/models:upload", json={"model": model}), "'beta'")
        refused(a.post(f"/v1/{parent('beta')}/datasets", json={"displayName": "d"}), "'beta'")
        refused(a.post(f"/v1/{parent('beta')}/trainingPipelines", json={"displayName": "p"}), "'beta'")
        refused(a.delete(f"/v1/{parent('beta')}/datasets/{missing}"), "'beta'")


def test_project_numbers_name_the_same_project(world: World) -> None:
    with world.http(world.admin) as admin, world.http(world.a) as a:
        numbers = {}
        for project in ("alpha", "beta"):
            job = ok(admin.post(f"/v1/{parent(project)}/customJobs", json=sleeper()))
            numbers[project] = job["name"].split("/")[1]
            ok(admin.post(f"/v1/{job['name']}:cancel", json={}))
        ok(a.get(f"/v1/{parent(numbers['alpha'])}/customJobs"))
        refused(a.get(f"/v1/{parent(numbers['beta'])}/customJobs"), numbers["beta"])


def test_the_official_client_gets_permission_denied(world: World) -> None:
    by_key = aiplatform_v1.JobServiceClient(
        transport="rest", client_options={"api_endpoint": world.server.url, "api_key": world.a}
    )
    by_bearer = aiplatform_v1.JobServiceClient(
        transport="rest",
        credentials=Credentials(token=world.a),
        client_options={"api_endpoint": world.server.url},
    )
    for client in (by_key, by_bearer):
        list(client.list_custom_jobs(parent=parent("alpha")))
        # Over REST the client raises by HTTP status: Forbidden (PermissionDenied is gRPC's name for it);
        # the body it got is the google.rpc PERMISSION_DENIED status.
        with pytest.raises(exceptions.Forbidden) as denied:
            list(client.list_custom_jobs(parent=parent("beta")))
        assert denied.value.response.json()["error"]["status"] == "PERMISSION_DENIED"
        assert "'beta'" in denied.value.message
        with pytest.raises(exceptions.Forbidden):
            client.get_custom_job(name=f"{parent('beta')}/customJobs/1")


def test_requests_without_a_valid_token_are_refused(world: World) -> None:
    for token, message in ((None, "missing"), ("tw_" + "x" * 43, "not valid"), ("nope", "not valid")):
        with world.http(token) as anyone:
            for path in (
                f"/v1/{parent('alpha')}/customJobs",
                "/storage/v1/b/alpha-any",
                "/openapi.json",
                "/metrics",
            ):
                refused(anyone.get(path), message)
    with world.http(None) as anyone:
        assert anyone.get("/healthz").status_code == 200
        assert anyone.get("/console/").status_code == 200  # the console's pages carry no data
        assert anyone.get("/console/assets/api.js").status_code == 200
    with world.http(world.b) as b:
        ok(b.get("/openapi.json"))  # no project's data: any valid token
    for how in ("bearer", "header", "key"):  # the same answer however the token comes
        with world.http(world.a, how) as a:
            ok(a.get(f"/v1/{parent('alpha')}/customJobs"))
            refused(a.get(f"/v1/{parent('beta')}/customJobs"))


def test_metrics_need_an_admin_token(world: World) -> None:
    with world.http(world.a) as a:
        refused(a.get("/metrics"), "admin")
    for token in (world.admin, FLAG):
        with world.http(token) as admin:
            assert "trainworks_" in admin.get("/metrics").text


def test_console_calls_carry_the_project_check(world: World) -> None:
    """The console's data comes from the REST paths with its bearer token; its refusal names the project,
    not the token, so the console shows it instead of asking for another token (api.js refusedForToken)."""
    with world.http(world.a) as a:
        response = a.get(f"/v1/{parent('beta')}/customJobs", params={"pageSize": 50, "filter": ""})
        refused(response, "'beta'")
        message = response.json()["error"]["message"]
        assert "API key" not in message and "bearer" not in message.lower()
        ok(a.get(f"/v1/{parent('alpha')}/customJobs", params={"pageSize": 50}))
        ok(a.get(f"/trainworks/v1/{parent('alpha')}/costs", params={"by": "job"}))


# ====================================================================== storage
def test_buckets_belong_to_the_project_that_made_them(world: World) -> None:
    mine, theirs = f"alpha-{uuid.uuid4().hex[:8]}", f"beta-{uuid.uuid4().hex[:8]}"
    with world.http(world.a) as a, world.http(world.b) as b, world.http(world.admin) as admin:
        refused(a.post("/storage/v1/b", params={"project": "beta"}, json={"name": theirs}), "'beta'")
        refused(a.post("/storage/v1/b", json={"name": theirs}), "project")
        ok(a.post("/storage/v1/b", params={"project": "alpha"}, json={"name": mine}))
        ok(b.post("/storage/v1/b", params={"project": "beta"}, json={"name": theirs}))
        assert bucket_project(world.server.home / "buckets", mine) == "alpha"

        listed = [i["name"] for i in ok(a.get("/storage/v1/b", params={"project": "alpha"})).get("items", [])]
        assert mine in listed and theirs not in listed
        refused(a.get("/storage/v1/b", params={"project": "beta"}), "'beta'")
        refused(a.get("/storage/v1/b"), "project")
        everything = [i["name"] for i in ok(admin.get("/storage/v1/b")).get("items", [])]
        assert {mine, theirs} <= set(everything)

        media = {"uploadType": "media", "name": "data/x.txt"}
        ok(a.post(f"/upload/storage/v1/b/{mine}/o", params=media, content=b"alpha data"))
        ok(b.post(f"/upload/storage/v1/b/{theirs}/o", params=media, content=b"beta data"))
        obj = quote("data/x.txt", safe="")
        for response in (
            b.get(f"/storage/v1/b/{mine}"),
            b.get(f"/storage/v1/b/{mine}/o"),
            b.get(f"/storage/v1/b/{mine}/o/{obj}"),
            b.get(f"/storage/v1/b/{mine}/o/{obj}", params={"alt": "media"}),
            b.get(f"/download/storage/v1/b/{mine}/o/{obj}", params={"alt": "media"}),
            b.post(f"/upload/storage/v1/b/{mine}/o", params=media, content=b"overwrite"),
            b.delete(f"/storage/v1/b/{mine}/o/{obj}"),
            b.delete(f"/storage/v1/b/{mine}"),
            # Copies name two buckets: each must be theirs.
            b.post(f"/storage/v1/b/{mine}/o/{obj}/rewriteTo/b/{theirs}/o/stolen"),
            b.post(f"/storage/v1/b/{theirs}/o/{obj}/copyTo/b/{mine}/o/planted"),
        ):
            refused(response, f"'{mine}'")
        assert (
            a.get(f"/download/storage/v1/b/{mine}/o/{obj}", params={"alt": "media"}).content == b"alpha data"
        )
        assert [i["name"] for i in ok(a.get(f"/storage/v1/b/{mine}/o"))["items"]] == ["data/x.txt"]

        # A resumable session is good only under the bucket it was started in.
        started = a.post(
            f"/upload/storage/v1/b/{mine}/o", params={"uploadType": "resumable"}, json={"name": "big.bin"}
        )
        upload_id = started.headers["x-guploader-uploadid"]
        hijack = b.put(f"/upload/storage/v1/b/{theirs}/o", params={"upload_id": upload_id}, content=b"x")
        assert hijack.status_code == 404
        ok(a.put(f"/upload/storage/v1/b/{mine}/o", params={"upload_id": upload_id}, content=b"mine"))

        assert a.delete(f"/storage/v1/b/{mine}/o/{obj}").status_code == 204

        # A folder an operator made by hand belongs to no project: admin tokens only.
        (world.server.home / "buckets" / "by-hand").mkdir(exist_ok=True)
        refused(a.get("/storage/v1/b/by-hand"), "no project")
        ok(admin.get("/storage/v1/b/by-hand"))
        with world.http(FLAG) as flag:
            ok(flag.get("/storage/v1/b/by-hand/o"))


def test_google_cloud_storage_with_a_scoped_api_key(world: World) -> None:
    bucket = f"sdk-{uuid.uuid4().hex[:8]}"

    def client(token: str, project: str) -> storage.Client:
        return storage.Client(
            project=project,
            credentials=api_key.Credentials(token),
            client_options={"api_endpoint": world.server.url},
        )

    alpha, beta = client(world.a, "alpha"), client(world.b, "beta")
    alpha.create_bucket(bucket)
    alpha.bucket(bucket).blob("hello.txt").upload_from_string(b"from alpha")
    assert alpha.bucket(bucket).blob("hello.txt").download_as_bytes() == b"from alpha"
    assert bucket in [b.name for b in alpha.list_buckets()]
    assert bucket not in [b.name for b in beta.list_buckets()]
    with pytest.raises(exceptions.Forbidden):
        beta.bucket(bucket).blob("hello.txt").download_as_bytes()
    with pytest.raises(exceptions.Forbidden):
        beta.bucket(bucket).blob("planted.txt").upload_from_string(b"from beta")
    with pytest.raises(exceptions.Forbidden):
        list(beta.list_blobs(bucket))


def test_a_job_may_not_name_another_projects_bucket(world: World) -> None:
    theirs, fresh = f"beta-out-{uuid.uuid4().hex[:8]}", f"fresh-{uuid.uuid4().hex[:8]}"
    root = world.server.home / "buckets"
    with world.http(world.a) as a, world.http(world.b) as b:
        ok(b.post("/storage/v1/b", params={"project": "beta"}, json={"name": theirs}))
        body = sleeper(baseOutputDirectory={"outputUriPrefix": f"gs://{theirs}/out"})
        response = a.post(f"/v1/{parent('alpha')}/customJobs", json=body)
        field = "custom_job.job_spec.base_output_directory.output_uri_prefix"
        refused(response, field)
        details = response.json()["error"]["details"]
        assert any(v["field"] == field for d in details for v in d.get("fieldViolations", []))
        # Inputs too: a package in another project's bucket.
        pkg = sleeper()
        pool = pkg["jobSpec"]["workerPoolSpecs"][0]
        del pool["containerSpec"]
        pool["pythonPackageSpec"] = {
            "executorImageUri": "python:3.11",
            "packageUris": [f"gs://{theirs}/trainer.tar.gz"],
            "pythonModule": "trainer.task",
        }
        refused(
            a.post(f"/v1/{parent('alpha')}/customJobs", json=pkg),
            "custom_job.job_spec.worker_pool_specs[0].python_package_spec.package_uris[0]",
        )
        tuning = {
            "displayName": "t",
            "studySpec": {
                "metrics": [{"metricId": "m", "goal": "MAXIMIZE"}],
                "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}],
            },
            "maxTrialCount": 1,
            "parallelTrialCount": 1,
            "trialJobSpec": body["jobSpec"],
        }
        refused(
            a.post(f"/v1/{parent('alpha')}/hyperparameterTuningJobs", json=tuning),
            "hyperparameter_tuning_job.trial_job_spec.base_output_directory.output_uri_prefix",
        )
        # A dataset may not read another project's bucket either.
        dataset = {
            "displayName": "d",
            "metadataSchemaUri": TABULAR,
            "metadata": {"inputConfig": {"gcsSource": {"uri": [f"gs://{theirs}/x.csv"]}}},
        }
        refused(a.post(f"/v1/{parent('alpha')}/datasets", json=dataset), "dataset.metadata.input_config")

        # An unowned output bucket is claimed for the job's project, and then refused to the others.
        job = ok(
            a.post(
                f"/v1/{parent('alpha')}/customJobs",
                json=sleeper(baseOutputDirectory={"outputUriPrefix": f"gs://{fresh}/o"}),
            )
        )
        assert bucket_project(root, fresh) == "alpha"
        ok(a.post(f"/v1/{job['name']}:cancel", json={}))
        refused(
            b.post(
                f"/v1/{parent('beta')}/customJobs",
                json=sleeper(baseOutputDirectory={"outputUriPrefix": f"gs://{fresh}/o"}),
            ),
            "custom_job.job_spec",
        )
        # Its folder may not exist yet: another project cannot take the name meanwhile.
        assert b.post("/storage/v1/b", params={"project": "beta"}, json={"name": fresh}).status_code in (
            403,
            409,
        )


def test_without_tokens_a_job_still_may_not_name_another_projects_bucket(fresh_server: ServerProcess) -> None:
    with fresh_server.client() as http:
        ok(http.post("/storage/v1/b", params={"project": "beta"}, json={"name": "owned-by-beta"}))
        ok(http.post("/storage/v1/b", json={"name": "no-owner"}))  # no project: unowned, as before
        body = sleeper(baseOutputDirectory={"outputUriPrefix": "gs://owned-by-beta/out"})
        refused(
            http.post(f"/v1/{parent('alpha')}/customJobs", json=body),
            "custom_job.job_spec.base_output_directory.output_uri_prefix",
        )
        job = ok(
            http.post(
                f"/v1/{parent('alpha')}/customJobs",
                json=sleeper(baseOutputDirectory={"outputUriPrefix": "gs://no-owner/out"}),
            )
        )
        ok(http.post(f"/v1/{job['name']}:cancel", json={}))
        # Ended before the server stops: a replica the teardown had not stopped yet would outlive it.
        assert wait_job(http, job["name"])["state"] == "JOB_STATE_CANCELLED"
        assert bucket_project(fresh_server.home / "buckets", "no-owner") == "alpha"
        # The project's listing shows its buckets; without a project, every bucket (auth is off).
        assert [i["name"] for i in ok(http.get("/storage/v1/b", params={"project": "beta"}))["items"]] == [
            "owned-by-beta"
        ]
        assert {"owned-by-beta", "no-owner"} <= {i["name"] for i in ok(http.get("/storage/v1/b"))["items"]}
        # Deleting a bucket frees its name.
        assert http.delete("/storage/v1/b/owned-by-beta").status_code == 204
        ok(http.post("/storage/v1/b", params={"project": "alpha"}, json={"name": "owned-by-beta"}))
        assert bucket_project(fresh_server.home / "buckets", "owned-by-beta") == "alpha"


# ====================================================================== token management
def test_a_revoked_token_is_refused_at_once(world: World) -> None:
    home = world.server.home
    token = make_token(home, "--project", "alpha", "--description", "short-lived")
    listed = tokens_cli(home, "list", "--format", "json")
    records = json.loads(listed.stdout)
    record = next(r for r in records if r["description"] == "short-lived")
    assert token not in listed.stdout and "token" not in record and record["projects"] == ["alpha"]
    with world.http(token, how="key") as http:
        ok(http.get(f"/v1/{parent('alpha')}/customJobs"))
        revoked = tokens_cli(home, "revoke", record["id"])
        assert revoked.returncode == 0, revoked.stderr
        refused(http.get(f"/v1/{parent('alpha')}/customJobs"), "not valid")
        refused(http.get("/openapi.json"), "not valid")
    with pytest.raises(TokenError, match="no token has the ID"):
        TokenStore(Database(f"sqlite:///{home / 'trainworks.db'}", migrate=False)).revoke("no-such-id")
    bad = tokens_cli(home, "create", "--project", "Not A Project")
    assert bad.returncode == 2 and "invalid project" in bad.stderr


def test_a_first_stored_token_turns_auth_on(fresh_server: ServerProcess) -> None:
    with fresh_server.client() as http:
        ok(http.get(f"/v1/{parent('alpha')}/customJobs"))  # no tokens yet: open, as before
        token = make_token(fresh_server.home, "--project", "alpha")
        wait_for(
            lambda: http.get(f"/v1/{parent('alpha')}/customJobs").status_code == 403,
            timeout=30,
            what="auth to turn on",
        )
        ok(http.get(f"/v1/{parent('alpha')}/customJobs", headers={"authorization": f"Bearer {token}"}))


def test_stored_tokens_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    on_pg = ("--database-url", postgres_url)
    token = make_token(home, "--project", "alpha", *on_pg)
    server = ServerProcess(home=home, args=list(on_pg)).start()
    try:
        with server.client(headers={"authorization": f"Bearer {token}"}) as http:
            ok(http.get(f"/v1/{parent('alpha')}/customJobs"))
            refused(http.get(f"/v1/{parent('beta')}/customJobs"))
            record = json.loads(tokens_cli(home, "list", "--format", "json", *on_pg).stdout)[0]
            assert tokens_cli(home, "revoke", record["id"], *on_pg).returncode == 0
            refused(http.get(f"/v1/{parent('alpha')}/customJobs"), "not valid")
    finally:
        server.stop()


# ====================================================================== credentials in logs
def _use_every_way(server: ServerProcess, tokens: list[str], marker: str) -> None:
    """Each token as a bearer header, an API-key header and `?key=`, on allowed and refused paths, and
    as `?key=` on the shell WebSocket (whose request line uvicorn itself logs)."""
    for token in tokens:
        for how in (
            {"headers": {"authorization": f"Bearer {token}"}},
            {"headers": {"x-goog-api-key": token}},
            {"params": {"key": token}},
        ):
            with server.client(**how) as http:  # type: ignore[arg-type]
                http.get(f"/v1/{parent('alpha')}/customJobs")
                http.get(f"/v1/{parent('beta')}/customJobs/{marker}")
                http.get("/storage/v1/b/by-hand/o")
        with pytest.raises(InvalidStatus):
            url = f"ws://127.0.0.1:{server.port}/trainworks/v1/{parent('beta')}/customJobs/{marker}:shell"
            connect(f"{url}?key={token}")
    with server.client() as http:
        http.get(f"/v1/{parent('alpha')}/customJobs/{marker}-last")


def test_credentials_never_reach_the_text_log(world: World) -> None:
    marker = "9" * 12
    _use_every_way(world.server, [*world.secrets, "tw_not-a-real-token-but-shaped-like-one"], marker)
    log = wait_for(
        lambda: (lambda t: t if f"{marker}-last" in t else None)(world.server.log_path.read_text()),
        timeout=30,
        what="the access line of the last request",
    )
    assert f"customJobs/{marker}:shell" in log and "key=[REDACTED]" in log  # uvicorn's WebSocket line
    for secret in [*world.secrets, "tw_not-a-real-token-but-shaped-like-one"]:
        assert secret not in log


def test_credentials_never_reach_the_json_log(tmp_path: Path) -> None:
    home = tmp_path / "home"
    stored = make_token(home, "--project", "alpha")
    flag = "json-flag-" + secrets.token_urlsafe(16)
    wrong = "wrong-" + secrets.token_urlsafe(8)
    server = ServerProcess(home=home, args=["--api-token", flag, "--log-format", "json"]).start()
    try:
        marker = "8" * 12
        _use_every_way(server, [stored, flag, wrong], marker)
        text = wait_for(
            lambda: (lambda t: t if f"{marker}-last" in t else None)(server.log_path.read_text()),
            timeout=30,
            what="the access line of the last request",
        )
    finally:
        server.stop()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert any(line.get("logger") == "trainworks.access" for line in lines)
    assert any("WebSocket" in line["message"] and "key=[REDACTED]" in line["message"] for line in lines)
    assert stored not in text and flag not in text and wrong not in text


def test_no_response_carried_a_credential(world: World) -> None:
    """Every response body and header this module's requests got (this test runs last in the module)."""
    assert len(world.seen) > 100
    for body in world.seen:
        for secret in world.secrets:
            assert secret not in body
