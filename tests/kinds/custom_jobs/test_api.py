"""customJobs REST behaviour through a real server: names, get, list (pagination, filter, readMask), delete as
a long-running operation, operations, and the google.rpc error bodies of unknown routes and methods."""

from __future__ import annotations

import base64
import copy
import json
import re
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google.cloud import aiplatform_v1
from google.protobuf import json_format

from tests.support.jobs import job, python_pool
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_for, wait_job

SLEEP = "import time; time.sleep(120)"
NAME_RE = re.compile(rf"^projects/(\d+)/locations/{LOCATION}/customJobs/(\d+)$")
OP_RE = re.compile(rf"^projects/(\d+)/locations/{LOCATION}/customJobs/(\d+)/operations/(\d+)$")
ALT_INT = "?%24alt=json%3Benum-encoding%3Dint"
DELETE_METADATA = "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata"
EMPTY = "type.googleapis.com/google.protobuf.Empty"


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def unique_parent() -> str:
    """A parent under a project ID of its own, so list results are exactly this test's jobs."""
    return f"projects/p-{uuid.uuid4().hex[:12]}/locations/{LOCATION}"


def create(http: httpx.Client, parent: str, body: dict[str, Any], query: str = "") -> dict[str, Any]:
    response = http.post(f"/v1/{parent}/customJobs{query}", json=body)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def google_error(response: httpx.Response, status: str) -> dict[str, Any]:
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert error["code"] == response.status_code
    assert error["status"] == status, error
    assert isinstance(error["message"], str) and error["message"]
    for detail in error.get("details", []):
        assert detail["@type"].startswith("type.googleapis.com/google.rpc."), detail
    return error  # type: ignore[no-any-return]


def violation_fields(error: dict[str, Any]) -> list[str]:
    return [v["field"] for d in error.get("details", []) for v in d.get("fieldViolations", [])]


def job_id(name: str) -> str:
    return name.rsplit("/", 1)[1]


def camel_keys_only(value: Any, path: str = "") -> None:
    """No snake_case key anywhere in a response (map keys such as labels excepted)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if path.endswith(("labels", "webAccessUris")):
                continue
            assert "_" not in key, f"{path}.{key}"
            camel_keys_only(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            camel_keys_only(item, f"{path}[{i}]")


# ---------------------------------------------------------------------------------- create and get


def test_create_returns_a_queued_job_named_by_project_number(
    http: httpx.Client, server: ServerProcess
) -> None:
    created = create(http, server.parent, job(python_pool("pass"), name="named"))
    assert created["state"] == "JOB_STATE_QUEUED"
    match = NAME_RE.match(created["name"])
    assert match, created["name"]
    number, jid = match.groups()
    assert number != PROJECT and int(jid) > 0
    assert created["displayName"] == "named"
    assert created["createTime"].endswith("Z") and created["updateTime"].endswith("Z")
    assert "startTime" not in created and "endTime" not in created and "error" not in created

    # The same project ID always maps to the same number; another project gets another one.
    again = create(http, server.parent, job(python_pool("pass"), name="named-2"))
    assert NAME_RE.match(again["name"]).group(1) == number  # type: ignore[union-attr]
    assert job_id(again["name"]) != jid
    other = create(http, unique_parent(), job(python_pool("pass")))
    assert NAME_RE.match(other["name"]).group(1) != number  # type: ignore[union-attr]


def test_get_by_project_id_and_by_number(http: httpx.Client, server: ServerProcess) -> None:
    created = create(http, server.parent, job(python_pool("pass"), name="get-me"))
    number, jid = NAME_RE.match(created["name"]).groups()  # type: ignore[union-attr]
    by_id = http.get(f"/v1/{server.parent}/customJobs/{jid}")
    by_number = http.get(f"/v1/projects/{number}/locations/{LOCATION}/customJobs/{jid}")
    beta = http.get(f"/v1beta1/{created['name']}")
    for response in (by_id, by_number, beta):
        assert response.status_code == 200, response.text
        assert response.json()["name"] == created["name"]
        assert response.json()["displayName"] == "get-me"
    # Another project or location does not see it.
    google_error(http.get(f"/v1/{unique_parent()}/customJobs/{jid}"), "NOT_FOUND")
    google_error(http.get(f"/v1/projects/{PROJECT}/locations/europe-west4/customJobs/{jid}"), "NOT_FOUND")
    wait_job(http, created["name"])


@pytest.mark.parametrize("bad_id", ["123", "9223372036854775807", "abc", "12a", "-5", "99999999999999999999"])
def test_get_unknown_or_malformed_id_is_not_found(
    http: httpx.Client, server: ServerProcess, bad_id: str
) -> None:
    response = http.get(f"/v1/{server.parent}/customJobs/{bad_id}")
    assert response.status_code == 404, response.text
    google_error(response, "NOT_FOUND")
    assert http.post(f"/v1/{server.parent}/customJobs/{bad_id}:cancel", json={}).status_code == 404
    assert http.delete(f"/v1/{server.parent}/customJobs/{bad_id}").status_code == 404


def test_output_only_fields_in_the_create_body_are_ignored(http: httpx.Client, server: ServerProcess) -> None:
    body = job(python_pool("pass"), name="outputs")
    body.update(
        {
            "name": "projects/other/locations/elsewhere/customJobs/1",
            "state": "JOB_STATE_SUCCEEDED",
            "createTime": "2001-01-01T00:00:00Z",
            "startTime": "2001-01-01T00:00:01Z",
            "endTime": "2001-01-01T00:00:02Z",
            "updateTime": "2001-01-01T00:00:03Z",
            "error": {"code": 5, "message": "ignored"},
            "webAccessUris": {"workerpool0-0": "https://example.test"},
            "satisfiesPzs": True,
        }
    )
    created = create(http, server.parent, body)
    assert NAME_RE.match(created["name"]) and created["name"] != body["name"]
    assert created["state"] == "JOB_STATE_QUEUED"
    assert not created["createTime"].startswith("2001")
    for key in ("startTime", "endTime", "error", "webAccessUris", "satisfiesPzs"):
        assert key not in created, key
    stored = http.get(f"/v1/{created['name']}").json()
    assert not stored["createTime"].startswith("2001") and "webAccessUris" not in stored
    wait_job(http, created["name"])


SNAKE_BODY = {
    "display_name": "snake-case",
    "labels": {"team_name": "ml"},
    "job_spec": {
        "worker_pool_specs": [
            {
                "machine_spec": {
                    "machine_type": "n1-standard-4",
                    "accelerator_type": 5,
                    "accelerator_count": 1,
                },
                "replica_count": 1,
                "container_spec": {
                    "image_uri": "python:3.11",
                    "command": [sys.executable, "-c", "pass"],
                    "env": [{"name": "A_B", "value": "x"}],
                },
                "disk_spec": {"boot_disk_type": "pd-standard", "boot_disk_size_gb": "150"},
            },
            {},
        ],
        "scheduling": {"timeout": "3600.000s", "strategy": 4, "restart_job_on_worker_restart": True},
        "base_output_directory": {"output_uri_prefix": "gs://test-bucket/snake"},
        "reserved_ip_ranges": [],
        "enable_web_access": False,
    },
}

CANONICAL_SPEC = {
    "workerPoolSpecs": [
        {
            "machineSpec": {
                "machineType": "n1-standard-4",
                "acceleratorType": "NVIDIA_TESLA_T4",
                "acceleratorCount": 1,
            },
            "replicaCount": "1",
            "containerSpec": {
                "imageUri": "python:3.11",
                "command": [sys.executable, "-c", "pass"],
                "env": [{"name": "A_B", "value": "x"}],
            },
            "diskSpec": {"bootDiskType": "pd-standard", "bootDiskSizeGb": 150},
        },
        {},
    ],
    "scheduling": {"timeout": "3600s", "strategy": "SPOT", "restartJobOnWorkerRestart": True},
    "baseOutputDirectory": {"outputUriPrefix": "gs://test-bucket/snake"},
}


def with_names(body: dict[str, Any], query: str, message: Any = aiplatform_v1.CustomJob) -> dict[str, Any]:
    """`body` with enum names: an ALT_INT request gets its enums as numbers (checked to be the official
    descriptors' numbers here), which read back as the names."""
    if query != ALT_INT:
        return body
    assert isinstance(body.get("state", 0), int)
    return json_format.MessageToDict(json_format.ParseDict(body, message.pb()()))


@pytest.mark.parametrize("query", ["", ALT_INT, "?$alt=json"])
def test_snake_case_and_int_enums_come_back_canonical(
    http: httpx.Client, server: ServerProcess, query: str
) -> None:
    created = with_names(create(http, server.parent, copy.deepcopy(SNAKE_BODY), query), query)
    camel_keys_only(created)
    assert created["displayName"] == "snake-case"
    assert created["labels"] == {"team_name": "ml"}
    assert created["jobSpec"] == CANONICAL_SPEC
    assert created["state"] == "JOB_STATE_QUEUED"
    fetched = http.get(f"/v1/{created['name']}{query}")
    assert fetched.status_code == 200, fetched.text
    assert with_names(fetched.json(), query)["jobSpec"] == CANONICAL_SPEC
    listed = http.get(
        f"/v1/{server.parent}/customJobs{query}", params={"filter": 'display_name="snake-case"'}
    )
    assert listed.status_code == 200, listed.text
    jobs = with_names(listed.json(), query, aiplatform_v1.ListCustomJobsResponse)["customJobs"]
    assert all(j["jobSpec"] == CANONICAL_SPEC for j in jobs)
    wait_job(http, created["name"])


def test_durations_are_written_as_seconds(http: httpx.Client, server: ServerProcess) -> None:
    for sent, written in [
        ("0.5s", "0.500s"),
        ("1.000001s", "1.000001s"),
        ("90.0s", "90s"),
        ("604800s", "604800s"),
    ]:
        body = job(python_pool("pass"), name="durations")
        body["jobSpec"]["scheduling"] = {"timeout": sent}
        created = create(http, server.parent, body)
        assert created["jobSpec"]["scheduling"]["timeout"] == written, sent
        wait_job(http, created["name"])


# ------------------------------------------------------------------------------------------- list


def list_jobs(http: httpx.Client, parent: str, **params: Any) -> httpx.Response:
    return http.get(f"/v1/{parent}/customJobs", params=params)


def all_pages(
    http: httpx.Client, parent: str, size_key: str, token_key: str, size: int, **params: Any
) -> list[list[str]]:
    pages: list[list[str]] = []
    token = ""
    while True:
        query = {size_key: size, **params}
        if token:
            query[token_key] = token
        response = list_jobs(http, parent, **query)
        assert response.status_code == 200, response.text
        body = response.json()
        pages.append([j["name"] for j in body.get("customJobs", [])])
        token = body.get("nextPageToken", "")
        if not token:
            return pages
        assert len(pages) < 20, "pagination does not end"


def test_list_pages_cover_every_job_once_newest_first(http: httpx.Client) -> None:
    parent = unique_parent()
    created = [create(http, parent, job(python_pool("pass"), name=f"page-{i}"))["name"] for i in range(7)]
    newest_first = list(reversed(created))
    for size_key, token_key in [("pageSize", "pageToken"), ("page_size", "page_token")]:
        pages = all_pages(http, parent, size_key, token_key, 3)
        assert [len(p) for p in pages] == [3, 3, 1]
        assert [name for page in pages for name in page] == newest_first
    assert all_pages(http, parent, "pageSize", "pageToken", 7) == [newest_first]
    assert all_pages(http, parent, "pageSize", "pageToken", 100) == [newest_first]
    # No pageSize: a default page holds them all.
    body = list_jobs(http, parent).json()
    assert [j["name"] for j in body["customJobs"]] == newest_first and "nextPageToken" not in body
    # An empty collection is an empty response.
    assert list_jobs(http, unique_parent()).json().get("customJobs", []) == []
    for name in created:
        wait_job(http, name)
    # Jobs changing state do not move between pages.
    pages = all_pages(http, parent, "pageSize", "pageToken", 2)
    assert [name for page in pages for name in page] == newest_first


def test_page_token_is_bound_to_its_filter(http: httpx.Client) -> None:
    parent = unique_parent()
    for i in range(3):
        create(http, parent, job(python_pool("pass"), name=f"token-{i}"))
    first = list_jobs(http, parent, pageSize=1, filter='display_name:"token-*"').json()
    token = first["nextPageToken"]
    same = list_jobs(http, parent, pageSize=1, pageToken=token, filter='display_name:"token-*"')
    assert same.status_code == 200, same.text
    other = list_jobs(http, parent, pageSize=1, pageToken=token, filter='display_name="token-0"')
    assert violation_fields(google_error(other, "INVALID_ARGUMENT")) == ["page_token"]
    no_filter = list_jobs(http, parent, pageSize=1, pageToken=token)
    assert violation_fields(google_error(no_filter, "INVALID_ARGUMENT")) == ["page_token"]
    garbage = list_jobs(http, parent, pageToken="not-a-token")
    assert violation_fields(google_error(garbage, "INVALID_ARGUMENT")) == ["page_token"]


@pytest.mark.parametrize("size", ["abc", "-1", "1.5", ""])
def test_invalid_page_size(http: httpx.Client, server: ServerProcess, size: str) -> None:
    response = list_jobs(http, server.parent, pageSize=size)
    if size == "":
        assert response.status_code == 200  # an empty parameter is the default
        return
    assert violation_fields(google_error(response, "INVALID_ARGUMENT")) == ["page_size"]


@pytest.fixture(scope="module")
def filter_jobs(http: httpx.Client) -> Iterator[tuple[str, dict[str, dict[str, Any]]]]:
    """Four jobs in a project of their own, each waited into the state the filters expect."""
    parent = unique_parent()
    specs = [
        ("alpha-1", {"team": "ml", "tier": "gold"}, "pass", "JOB_STATE_SUCCEEDED"),
        ("alpha-2", {"team": "ml"}, "import sys; sys.exit(3)", "JOB_STATE_FAILED"),
        ("beta-1", {"team": "infra"}, SLEEP, "JOB_STATE_RUNNING"),
        ("beta-2", {}, SLEEP, "JOB_STATE_CANCELLED"),
    ]
    jobs: dict[str, dict[str, Any]] = {}
    for name, labels, code, _ in specs:
        body = job(python_pool(code), name=name)
        if labels:
            body["labels"] = labels
        jobs[name] = create(http, parent, body)
    wait_job(http, jobs["beta-2"]["name"], {"JOB_STATE_RUNNING"})
    assert http.post(f"/v1/{jobs['beta-2']['name']}:cancel", json={}).status_code == 200
    for name, _, _, state in specs:
        jobs[name] = wait_job(http, jobs[name]["name"], {state})
    try:
        yield parent, jobs
    finally:
        http.post(f"/v1/{jobs['beta-1']['name']}:cancel", json={})
        wait_job(http, jobs["beta-1"]["name"])


def _filters(jobs: dict[str, dict[str, Any]]) -> list[tuple[str, set[str]]]:
    after_alpha_2 = jobs["alpha-2"]["createTime"]
    everyone = set(jobs)
    return [
        ('state="JOB_STATE_SUCCEEDED"', {"alpha-1"}),
        ("state=JOB_STATE_RUNNING", {"beta-1"}),
        ('state!="JOB_STATE_FAILED"', everyone - {"alpha-2"}),
        ('display_name="alpha-1"', {"alpha-1"}),
        ('display_name!="alpha-1"', everyone - {"alpha-1"}),
        ('display_name:"alpha-*"', {"alpha-1", "alpha-2"}),
        ('displayName:"beta*"', {"beta-1", "beta-2"}),
        ('display_name:"*-2"', {"alpha-2", "beta-2"}),
        ("labels.team=ml", {"alpha-1", "alpha-2"}),
        ('labels.team="infra"', {"beta-1"}),
        ("labels.tier:*", {"alpha-1"}),
        ("labels.team:*", {"alpha-1", "alpha-2", "beta-1"}),
        ("NOT labels.team:*", {"beta-2"}),
        ('NOT display_name="alpha-1"', everyone - {"alpha-1"}),
        ('state="JOB_STATE_SUCCEEDED" OR state="JOB_STATE_FAILED"', {"alpha-1", "alpha-2"}),
        ('state="JOB_STATE_SUCCEEDED" AND display_name:"alpha-*"', {"alpha-1"}),
        ('state!="JOB_STATE_FAILED" OR display_name="alpha-2"', everyone),
        ('labels.team=ml AND (state="JOB_STATE_FAILED" OR display_name="beta-1")', {"alpha-2"}),
        ('(labels.team=infra OR labels.tier=gold) AND NOT state="JOB_STATE_RUNNING"', {"alpha-1"}),
        (f'create_time>"{after_alpha_2}"', {"beta-1", "beta-2"}),
        (f'create_time>="{after_alpha_2}"', {"alpha-2", "beta-1", "beta-2"}),
        (f'create_time<"{after_alpha_2}"', {"alpha-1"}),
        (f'create_time="{after_alpha_2}"', {"alpha-2"}),
        ('create_time<"2000-01-01T00:00:00Z"', set()),
        ('create_time>"2000-01-01T00:00:00Z"', everyone),
        ('state="JOB_STATE_CANCELLED"', {"beta-2"}),
    ]


def test_filters_select_the_right_jobs(
    http: httpx.Client, filter_jobs: tuple[str, dict[str, dict[str, Any]]]
) -> None:
    parent, jobs = filter_jobs
    by_name = {j["name"]: display for display, j in jobs.items()}
    for text, expected in _filters(jobs):
        response = list_jobs(http, parent, filter=text)
        assert response.status_code == 200, (text, response.text)
        got = {by_name[j["name"]] for j in response.json().get("customJobs", [])}
        assert got == expected, text
        # The same filter paginates to the same set.
        paged = {
            by_name[n]
            for page in all_pages(http, parent, "pageSize", "pageToken", 1, filter=text)
            for n in page
        }
        assert paged == expected, text


@pytest.fixture
def fresh_http(server: ServerProcess) -> Iterator[httpx.Client]:
    """A client of its own, for requests that may get a 500: the server then drops the connection."""
    with server.client() as client:
        yield client


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"t": "0001-01-01T00:00:00+01:00"}, id="timestamp before year 1"),
        pytest.param({"i": float("inf")}, id="infinite id"),
        pytest.param({"i": 2**70}, id="id beyond int64"),
        pytest.param({"i": "x"}, id="id not a number"),
        pytest.param({"t": 5}, id="timestamp not a string"),
        pytest.param({"f": "0" * 16}, id="other filter"),
    ],
)
def test_forged_page_tokens_are_invalid_argument(fresh_http: httpx.Client, changes: dict[str, Any]) -> None:
    http = fresh_http
    parent = unique_parent()
    for i in range(2):
        create(http, parent, job(python_pool("pass"), name=f"forge-{i}"))
    token = list_jobs(http, parent, pageSize=1).json()["nextPageToken"]
    data = {**json.loads(base64.urlsafe_b64decode(token)), **changes}  # white-box: the token is base64 JSON
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).decode()
    error = google_error(list_jobs(http, parent, pageSize=1, pageToken=forged), "INVALID_ARGUMENT")
    assert violation_fields(error) == ["page_token"]


def test_operations_page_token_beyond_int64_is_invalid_argument(
    fresh_http: httpx.Client, server: ServerProcess
) -> None:
    http = fresh_http
    forged = base64.urlsafe_b64encode(str(2**70).encode()).decode()
    response = http.get(f"/v1/{server.parent}/operations", params={"pageToken": forged})
    assert violation_fields(google_error(response, "INVALID_ARGUMENT")) == ["page_token"]


def test_filter_with_thousands_of_terms_is_a_client_error(
    fresh_http: httpx.Client, server: ServerProcess
) -> None:
    http = fresh_http
    response = list_jobs(http, server.parent, filter=" OR ".join(["state=1"] * 3000))
    error = google_error(response, "INVALID_ARGUMENT")
    assert violation_fields(error) == ["filter"]
    assert "at most 200 comparisons" in error["message"]


@pytest.mark.parametrize(
    "text",
    [
        "state=",
        "bogus=1",
        'state="NOT_A_STATE"',
        '(display_name="x"',
        'create_time>"yesterday"',
        "display_name",
        "labels.=x",
        'state="JOB_STATE_RUNNING" AND',
    ],
)
def test_bad_filter_names_filter(http: httpx.Client, server: ServerProcess, text: str) -> None:
    error = google_error(list_jobs(http, server.parent, filter=text), "INVALID_ARGUMENT")
    assert violation_fields(error) == ["filter"]


def test_read_mask_limits_fields(
    http: httpx.Client, filter_jobs: tuple[str, dict[str, dict[str, Any]]]
) -> None:
    parent, _ = filter_jobs
    for mask in ("displayName,state", "display_name,state", "state, displayName"):
        response = list_jobs(http, parent, readMask=mask)
        assert response.status_code == 200, response.text
        listed = response.json()["customJobs"]
        assert len(listed) == 4
        assert all(set(j) == {"displayName", "state"} for j in listed), listed
    snake = list_jobs(http, parent, read_mask="labels,name").json()["customJobs"]
    assert all(set(j) <= {"labels", "name"} and "name" in j for j in snake), snake
    nested = list_jobs(http, parent, readMask="jobSpec.workerPoolSpecs").json()["customJobs"]
    assert all(set(j) == {"jobSpec"} for j in nested), nested


# ------------------------------------------------------------------------ delete and operations


def test_delete_of_a_running_job_is_failed_precondition(http: httpx.Client, server: ServerProcess) -> None:
    created = create(http, server.parent, job(python_pool(SLEEP), name="busy"))
    name = created["name"]
    queued = http.delete(f"/v1/{name}")
    assert google_error(queued, "FAILED_PRECONDITION")["code"] == 400
    wait_job(http, name, {"JOB_STATE_RUNNING"})
    running = http.delete(f"/v1/{name}")
    assert running.status_code == 400
    assert "JOB_STATE_RUNNING" in google_error(running, "FAILED_PRECONDITION")["message"]
    assert http.post(f"/v1/{name}:cancel", json={}).status_code == 200
    assert wait_job(http, name)["state"] == "JOB_STATE_CANCELLED"
    assert http.get(f"/v1/{name}").status_code == 200  # still there


def _op_done(http: httpx.Client, url: str) -> dict[str, Any] | None:
    response = http.get(url)
    assert response.status_code == 200, response.text
    op = response.json()
    return op if op.get("done") else None


def test_delete_of_a_finished_job_is_an_operation(http: httpx.Client, server: ServerProcess) -> None:
    created = create(http, server.parent, job(python_pool("pass"), name="to-delete"))
    name = created["name"]
    assert wait_job(http, name)["state"] == "JOB_STATE_SUCCEEDED"

    response = http.delete(f"/v1/{server.parent}/customJobs/{job_id(name)}")  # by project ID
    assert response.status_code == 200, response.text
    op = response.json()
    match = OP_RE.match(op["name"])
    assert match, op["name"]
    assert op["name"].startswith(name + "/operations/")
    assert op["metadata"]["@type"] == DELETE_METADATA
    generic = op["metadata"]["genericMetadata"]
    assert generic["createTime"].endswith("Z") and generic["updateTime"].endswith("Z")
    assert op.get("done") in (None, True)
    assert "error" not in op

    # The official client polls under /ui/; the REST path under /v1/ answers the same.
    done = wait_for(lambda: _op_done(http, f"/ui/{op['name']}"), what="the delete operation to finish")
    assert done["name"] == op["name"]
    assert done["response"] == {"@type": EMPTY} and "error" not in done
    assert done["metadata"]["@type"] == DELETE_METADATA
    assert done["metadata"]["genericMetadata"]["updateTime"] >= generic["createTime"]
    assert _op_done(http, f"/v1/{op['name']}") == done
    waited = http.post(f"/v1/{op['name']}:wait", json={"timeout": "10s"})
    assert waited.status_code == 200, waited.text
    assert waited.json() == done

    google_error(http.get(f"/v1/{name}"), "NOT_FOUND")
    google_error(http.delete(f"/v1/{name}"), "NOT_FOUND")
    listed = [j["name"] for j in list_jobs(http, server.parent, pageSize=1000).json().get("customJobs", [])]
    assert name not in listed

    # The operation is listed at location level and under the job.
    location_ops = http.get(f"/v1/{server.parent}/operations", params={"pageSize": 1000})
    assert location_ops.status_code == 200, location_ops.text
    assert op["name"] in [o["name"] for o in location_ops.json().get("operations", [])]
    job_ops = http.get(f"/v1/{name}/operations")
    assert job_ops.status_code == 200, job_ops.text
    assert [o["name"] for o in job_ops.json()["operations"]] == [op["name"]]
    # ...and by project ID as well as by number.
    by_id = http.get(
        f"/v1/{server.parent}/customJobs/{job_id(name)}/operations/{op['name'].rsplit('/', 1)[1]}"
    )
    assert by_id.status_code == 200 and by_id.json() == done


def test_operation_wait_without_a_body_and_bad_timeouts(http: httpx.Client, server: ServerProcess) -> None:
    created = create(http, server.parent, job(python_pool("pass"), name="wait-op"))
    wait_job(http, created["name"])
    op = http.delete(f"/v1/{created['name']}").json()
    waited = http.post(f"/v1/{op['name']}:wait", json={"timeout": "30s"})
    assert waited.status_code == 200 and waited.json()["done"] is True
    assert http.post(f"/ui/{op['name']}:wait").json()["done"] is True
    for bad in ("soon", 10, "-"):
        error = google_error(http.post(f"/v1/{op['name']}:wait", json={"timeout": bad}), "INVALID_ARGUMENT")
        assert violation_fields(error) == ["timeout"]


def test_unknown_operations_are_not_found(http: httpx.Client, server: ServerProcess) -> None:
    for path in (
        f"/v1/{server.parent}/operations/123",
        f"/v1/{server.parent}/operations/abc",
        f"/ui/{server.parent}/operations/123",
        f"/v1/{server.parent}/customJobs/123/operations/456",
    ):
        google_error(http.get(path), "NOT_FOUND")
    google_error(http.post(f"/v1/{server.parent}/operations/123:wait", json={}), "NOT_FOUND")


# ------------------------------------------------------------------------- routes and methods


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/nope"),
        ("GET", "/v2/projects/p/locations/l/customJobs"),
        ("GET", "/v1/projects/p/locations/l/trainingWidgets"),
        ("POST", "/v1/projects/p/locations/l/customJobs:list"),
        ("GET", "/"),
    ],
)
def test_unknown_routes_are_not_found(http: httpx.Client, method: str, path: str) -> None:
    response = http.request(method, path)
    assert response.status_code == 404, response.text
    google_error(response, "NOT_FOUND")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/v1/{parent}/customJobs/123"),
        ("PATCH", "/v1/{parent}/customJobs"),
        ("DELETE", "/v1/{parent}/customJobs"),
        ("PUT", "/v1/{parent}/operations/123"),
        ("POST", "/v1/{parent}/customJobs/123"),
    ],
)
def test_wrong_method_is_405_with_a_google_body(
    http: httpx.Client, server: ServerProcess, method: str, path: str
) -> None:
    response = http.request(method, path.format(parent=server.parent))
    assert response.status_code == 405, response.text
    google_error(response, "UNIMPLEMENTED")


@pytest.mark.parametrize("location", ["UPPER", "a" * 70, "us_central1", "-x"])
def test_bad_location_is_invalid_argument(http: httpx.Client, location: str) -> None:
    response = http.get(f"/v1/projects/p/locations/{location}/customJobs")
    assert violation_fields(google_error(response, "INVALID_ARGUMENT")) == ["parent"]


def test_project_number_too_long_is_invalid_argument(http: httpx.Client) -> None:
    response = http.get(f"/v1/projects/{'1' * 25}/locations/us-central1/customJobs")
    assert violation_fields(google_error(response, "INVALID_ARGUMENT")) == ["parent"]


def test_server_error_keeps_the_connection_usable(http: httpx.Client, server: ServerProcess) -> None:
    # A forged operations token used to reach the database as a 500; any answer must leave keep-alive intact.
    forged = base64.urlsafe_b64encode(str(2**70).encode()).decode()
    first = http.get(f"/v1/{server.parent}/operations", params={"pageToken": forged})
    assert first.status_code == 400
    assert http.get("/healthz").status_code == 200
