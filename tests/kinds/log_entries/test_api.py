"""`POST /v2/entries:list` (the Cloud Logging API) over a real server: a 3-replica job whose replicas
interleave stdout, stderr and JSON lines, a small tuning job, every kind of filter, both orders, paging, the
page that a rare match ends early, bad requests, and the official types and client library reading the same
entries."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import logging as cloud_logging
from google.cloud.logging_v2.entries import StructEntry, TextEntry
from google.cloud.logging_v2.types import ListLogEntriesResponse, LogEntry
from google.protobuf import json_format

from tests.support.jobs import END_TOGETHER, job, python_pool
from tests.support.server import PROJECT, ServerProcess, wait_for, wait_job

ROUNDS = 6
SEVERITY_OF_ROUND = ("DEBUG", "WARNING", "CRITICAL")
RANK = {"DEFAULT": 0, "DEBUG": 100, "INFO": 200, "NOTICE": 300, "WARNING": 400, "ERROR": 500, "CRITICAL": 600}
# Each replica writes a stdout line, a stderr line and a JSON line per round, each only once the previous one
# is in its own log (so a replica's lines are timestamped in the order it wrote them, whatever the stream).
# The replicas end together (END_TOGETHER), so no replica is stopped before all its lines are in.
INTERLEAVED = (
    f"""
import glob, json, os, sys, time
task = os.path.basename(os.getcwd())
def logged(line):
    needle = line.encode() + b"\\n"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for path in glob.glob(".trainworks-log/*.entries"):
            with open(path, "rb") as handle:
                if needle in handle.read():
                    return
        time.sleep(0.002)
    sys.exit(f"{{line!r}} never reached the log")
for i in range({ROUNDS}):
    severity = {SEVERITY_OF_ROUND!r}[i % 3]
    structured = json.dumps({{"severity": severity, "message": f"{{task}} json {{i}}", "step": i}})
    for stream, line in ((sys.stdout, f"{{task}} out {{i}}"), (sys.stderr, f"{{task}} err {{i}}"),
                         (sys.stdout, structured)):
        stream.write(line + "\\n")
        stream.flush()
        logged(line)
"""
    + END_TOGETHER
)
TASKS = ("workerpool0-0", "workerpool1-0", "workerpool1-1")
TRIAL = (
    "import sys, hypertune\n"
    "x = float(sys.argv[-1].split('=')[1])\n"
    "print(f'trial line x={x}', flush=True)\n"
    "hypertune.HyperTune().report_hyperparameter_tuning_metric(\n"
    "    hyperparameter_metric_tag='score', metric_value=x)\n"
)


@dataclass
class World:
    job_id: str
    project_number: str
    tuning_id: str
    trial_jobs: dict[str, str]  # trial ID -> its CustomJob's ID
    entries: list[dict[str, Any]]  # the interleaved job's, in time order


def text(entry: dict[str, Any]) -> str:
    """What gcloud shows of an entry: textPayload, or jsonPayload.message."""
    return entry.get("textPayload") or entry.get("jsonPayload", {}).get("message", "")


def post(http: httpx.Client, body: dict[str, Any]) -> httpx.Response:
    return http.post("/v2/entries:list", json=body)


def page(http: httpx.Client, filter_: str, **body: Any) -> dict[str, Any]:
    response = post(http, {"resourceNames": [f"projects/{PROJECT}"], "filter": filter_, **body})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def read_all(http: httpx.Client, filter_: str, **body: Any) -> tuple[list[dict[str, Any]], int]:
    """Every entry the filter matches, following nextPageToken; and how many pages it took."""
    found: list[dict[str, Any]] = []
    pages = 0
    token = ""
    while True:
        answer = page(http, filter_, **body, **({"pageToken": token} if token else {}))
        found += answer.get("entries", [])
        pages += 1
        token = answer.get("nextPageToken", "")
        if not token:
            return found, pages


def of_job(job_id: str, clause: str = "") -> str:
    base = f'resource.type="ml_job" AND resource.labels.job_id="{job_id}"'
    return f"{base} AND ({clause})" if clause else base


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@pytest.fixture(scope="module")
def world(server: ServerProcess, http: httpx.Client) -> World:
    pools = [python_pool(INTERLEAVED), python_pool(INTERLEAVED, replicas=2)]
    created = http.post(f"/v1/{server.parent}/customJobs", json={**job(*pools), "labels": {"team": "logs"}})
    assert created.status_code == 200, created.text
    name = created.json()["name"]
    trial_pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "containerSpec": {"imageUri": "python:3.11", "command": [sys.executable, "-c", TRIAL]},
    }
    tuning = {
        "displayName": "logs-tune",
        "studySpec": {
            "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}],
        },
        "maxTrialCount": 2,
        "parallelTrialCount": 2,
        "trialJobSpec": {"workerPoolSpecs": [trial_pool]},
    }
    tuned = http.post(f"/v1/{server.parent}/hyperparameterTuningJobs", json=tuning)
    assert tuned.status_code == 200, tuned.text
    assert wait_job(http, name)["state"] == "JOB_STATE_SUCCEEDED"
    tuning_name = tuned.json()["name"]
    done = wait_for(
        lambda: (
            (j := http.get(f"/v1/{tuning_name}").json()).get("state", "").endswith(("SUCCEEDED", "FAILED"))
            and j
        ),
        timeout=120,
        what="the tuning job to end",
    )
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    job_id = name.rsplit("/", 1)[1]
    entries, _ = read_all(http, of_job(job_id), pageSize=1000)
    return World(
        job_id=job_id,
        project_number=name.split("/")[1],
        tuning_id=tuning_name.rsplit("/", 1)[1],
        trial_jobs={t["id"]: t["customJob"].rsplit("/", 1)[1] for t in done["trials"]},
        entries=entries,
    )


# ---------------------------------------------------------------------------------------- the entries
def test_every_line_once_in_time_order_with_its_severity(world: World) -> None:
    entries = world.entries
    keys = [(e["timestamp"], e["insertId"]) for e in entries]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    replicas = [e for e in entries if e["resource"]["labels"]["task_name"] != "service"]
    for task in TASKS:
        mine = [e for e in replicas if e["resource"]["labels"]["task_name"] == task]
        written = []
        for i in range(ROUNDS):
            written += [
                (f"{task} out {i}", "INFO"),
                (f"{task} err {i}", "ERROR"),
                (f"{task} json {i}", SEVERITY_OF_ROUND[i % 3]),
            ]
        assert [(text(e), e["severity"]) for e in mine] == written  # each once, in the order written
        for e in mine:
            assert e["resource"] == {
                "type": "ml_job",
                "labels": {"job_id": world.job_id, "task_name": task, "project_id": PROJECT},
            }
            assert e["logName"] == f"projects/{PROJECT}/logs/{task}" and e["labels"] == {"team": "logs"}
            if "jsonPayload" in e:
                assert set(e["jsonPayload"]) == {"message", "step"}  # severity moved to the entry
    assert len(replicas) == 3 * 3 * ROUNDS
    service = [text(e) for e in entries if e["resource"]["labels"]["task_name"] == "service"]
    assert service[-1] == "Job completed successfully." and "Job is running." in service


def test_descending_order_is_the_reverse(http: httpx.Client, world: World) -> None:
    newest_first, _ = read_all(http, of_job(world.job_id), orderBy="timestamp desc", pageSize=1000)
    assert newest_first == world.entries[::-1]


@pytest.mark.parametrize("order", ["timestamp asc", "timestamp desc"])
def test_pages_hold_every_entry_once_in_order(http: httpx.Client, world: World, order: str) -> None:
    found, pages = read_all(http, of_job(world.job_id), orderBy=order, pageSize=7)
    expected = world.entries if order == "timestamp asc" else world.entries[::-1]
    assert found == expected
    assert pages == -(-len(expected) // 7)


def _after(world: World, index: int) -> Callable[[dict[str, Any]], bool]:
    pivot = world.entries[index]
    return lambda e: (e["timestamp"], e["insertId"]) > (pivot["timestamp"], pivot["insertId"])


FILTERS: list[tuple[str, Callable[[World], str], Callable[[World], Callable[[dict[str, Any]], bool]]]] = [
    (
        "severity rank",
        lambda w: "severity>=WARNING",
        lambda w: lambda e: RANK[e.get("severity", "DEFAULT")] >= 400,
    ),
    ("severity name", lambda w: 'severity="error"', lambda w: lambda e: e.get("severity") == "ERROR"),
    ("not severity", lambda w: "-severity=INFO", lambda w: lambda e: e.get("severity") != "INFO"),
    (
        "text has",
        lambda w: 'textPayload:"ERR 2"',
        lambda w: lambda e: "err 2" in e.get("textPayload", "").lower(),
    ),
    (
        "json message has",
        lambda w: 'jsonPayload.message:"json 3"',
        lambda w: lambda e: "json 3" in e.get("jsonPayload", {}).get("message", ""),
    ),
    (
        "json number",
        lambda w: "jsonPayload.step>=4",
        lambda w: lambda e: e.get("jsonPayload", {}).get("step", -1) >= 4,
    ),
    (
        "json equal and task",
        lambda w: 'jsonPayload.step=2 AND resource.labels.task_name="workerpool1-1"',
        lambda w: (
            lambda e: (
                e.get("jsonPayload", {}).get("step") == 2
                and e["resource"]["labels"]["task_name"] == "workerpool1-1"
            )
        ),
    ),
    (
        "tasks or",
        lambda w: 'resource.labels.task_name="workerpool1-0" OR resource.labels.task_name=service',
        lambda w: lambda e: e["resource"]["labels"]["task_name"] in ("workerpool1-0", "service"),
    ),
    (
        "not has",
        lambda w: "NOT resource.labels.task_name:workerpool1",
        lambda w: lambda e: "workerpool1" not in e["resource"]["labels"]["task_name"],
    ),
    (
        "log name",
        lambda w: f'logName="projects/{PROJECT}/logs/workerpool0-0"',
        lambda w: lambda e: e["resource"]["labels"]["task_name"] == "workerpool0-0",
    ),
    ("labels", lambda w: "labels.team=LOGS", lambda w: lambda e: True),
    ("project label", lambda w: f"resource.labels.project_id={PROJECT}", lambda w: lambda e: True),
    ("other type", lambda w: 'resource.type="gce_instance"', lambda w: lambda e: False),
    ("unknown field", lambda w: "jsonPayload.nothing:*", lambda w: lambda e: False),
    (
        "time range",
        lambda w: f'timestamp>="{w.entries[10]["timestamp"]}" AND timestamp<"{w.entries[30]["timestamp"]}"',
        lambda w: lambda e: w.entries[10]["timestamp"] <= e["timestamp"] < w.entries[30]["timestamp"],
    ),
    ("insert id", lambda w: f'insertId>"{w.entries[20]["insertId"]}"', lambda w: _after(w, 20)),
    (
        "gcloud's lower bound",
        lambda w: (
            f'((timestamp="{w.entries[20]["timestamp"]}" AND insertId>"{w.entries[20]["insertId"]}") '
            f'OR timestamp>"{w.entries[20]["timestamp"]}")'
        ),
        lambda w: _after(w, 20),
    ),
]


@pytest.mark.parametrize(("label", "clause", "expected"), FILTERS, ids=[f[0] for f in FILTERS])
def test_filters(
    http: httpx.Client,
    world: World,
    label: str,
    clause: Callable[[World], str],
    expected: Callable[[World], Callable[[dict[str, Any]], bool]],
) -> None:
    found, _ = read_all(http, of_job(world.job_id, clause(world)), pageSize=1000)
    assert found == [e for e in world.entries if expected(world)(e)]
    if label not in ("other type", "unknown field"):
        assert found, label


def test_without_a_job_id_every_job_of_the_project(http: httpx.Client, world: World) -> None:
    found, _ = read_all(http, 'labels.team="logs" AND severity>=ERROR', pageSize=1000)
    assert found == [e for e in world.entries if RANK[e.get("severity", "DEFAULT")] >= 500]
    either, _ = read_all(
        http,
        f"resource.labels.job_id={world.job_id} OR resource.labels.job_id={world.tuning_id}",
        pageSize=1000,
    )
    assert {e["resource"]["labels"]["job_id"] for e in either} == {world.job_id, world.tuning_id}
    late = world.entries[-1]["timestamp"]
    assert all(e["timestamp"] >= late for e in read_all(http, f'timestamp>="{late}"')[0])


@pytest.mark.parametrize("job_id", ["abc", "9999999999999999999", "0", "١٢"])
def test_a_job_id_no_job_has_finds_nothing(http: httpx.Client, job_id: str) -> None:
    assert page(http, of_job(job_id)) == {}


def test_projects_by_id_or_number_and_no_other(http: httpx.Client, world: World) -> None:
    by_number = post(
        http,
        {
            "resourceNames": [f"projects/{world.project_number}"],
            "filter": of_job(world.job_id),
            "pageSize": 1000,
        },
    )
    assert by_number.status_code == 200 and by_number.json()["entries"] == world.entries
    other = post(http, {"resourceNames": ["projects/someone-else"], "filter": of_job(world.job_id)})
    assert other.status_code == 200 and other.json() == {}
    both = post(
        http,
        {
            "resourceNames": ["projects/someone-else", f"projects/{PROJECT}"],
            "filter": of_job(world.job_id),
            "pageSize": 1000,
        },
    )
    assert both.json()["entries"] == world.entries


def test_tuning_job_entries_are_its_trials_with_their_ids(http: httpx.Client, world: World) -> None:
    found, _ = read_all(http, of_job(world.tuning_id), pageSize=1000)
    lines = [e for e in found if text(e).startswith("trial line")]
    assert len(lines) == 2
    assert {e["labels"]["ml.googleapis.com/trial_id"] for e in lines} == set(world.trial_jobs)
    assert {e["resource"]["labels"]["job_id"] for e in found} == {world.tuning_id}
    assert all(e["resource"]["labels"]["task_name"] in ("workerpool0-0", "service") for e in found)
    one = read_all(http, of_job(world.tuning_id, 'labels."ml.googleapis.com/trial_id"="2"'), pageSize=1000)[0]
    assert one and all(e["labels"]["ml.googleapis.com/trial_id"] == "2" for e in one)
    # A trial's own CustomJob by its ID: the same lines, under that ID.
    own = read_all(http, of_job(world.trial_jobs["1"], 'textPayload:"trial line"'))[0]
    assert [text(e) for e in own] == [
        text(e) for e in lines if e["labels"]["ml.googleapis.com/trial_id"] == "1"
    ]
    assert own[0]["labels"]["ml.googleapis.com/trial_id"] == "1"
    # Found without naming a job: under the tuning job, not twice.
    anywhere = read_all(http, 'textPayload:"trial line"', pageSize=1000)[0]
    assert sorted(e["insertId"] for e in anywhere) == sorted(e["insertId"] for e in lines)


def test_a_rare_match_ends_the_page_early_and_paging_finds_it(
    http: httpx.Client, server: ServerProcess
) -> None:
    # More lines than one request reads (service.py SCAN_LIMIT, 20,000), and one that matches at the end.
    code = (
        "import sys\nw = sys.stdout.write\nfor i in range(25000):\n    w(f'filler {i}\\n')\nprint('needle')\n"
    )
    name = http.post(f"/v1/{server.parent}/customJobs", json=job(python_pool(code))).json()["name"]
    assert wait_job(http, name)["state"] == "JOB_STATE_SUCCEEDED"
    rare = of_job(name.rsplit("/", 1)[1], "textPayload:needle")
    first = page(http, rare, pageSize=10)
    assert "entries" not in first and first["nextPageToken"]
    found, pages = read_all(http, rare, pageSize=10)
    assert [text(e) for e in found] == ["needle"] and pages == 2


def test_long_lines_page_by_size_and_come_split(http: httpx.Client, server: ServerProcess) -> None:
    code = "for i in range(40):\n    print(str(i % 10) * 250_000)\nprint('L' * 600_000)\n"
    name = http.post(f"/v1/{server.parent}/customJobs", json=job(python_pool(code))).json()["name"]
    assert wait_job(http, name)["state"] == "JOB_STATE_SUCCEEDED"
    replica = of_job(name.rsplit("/", 1)[1], "resource.labels.task_name=workerpool0-0")
    first = page(http, replica, pageSize=1000)
    assert 20 < len(first["entries"]) < 40 and first["nextPageToken"]  # about 8 MiB of text a page
    found, _ = read_all(http, replica, pageSize=1000)
    assert [len(text(e)) for e in found[:40]] == [250_000] * 40
    pieces = found[40:]
    assert "".join(text(e) for e in pieces) == "L" * 600_000 and len(pieces) == 3
    assert len({e["split"]["uid"] for e in pieces}) == 1
    assert [e["split"].get("index", 0) for e in pieces] == [0, 1, 2]
    for shown in pieces:
        json_format.Parse(json.dumps(shown), LogEntry.pb()(), ignore_unknown_fields=False)


# ---------------------------------------------------------------------------------------- bad requests
@pytest.mark.parametrize(
    ("filter_", "problem"),
    [
        (
            "severity>=WARNING AND (",
            "Unparseable filter: expected a comparison, found end of filter at line 1, column 24",
        ),
        ('timestamp>="last week"', "invalid timestamp 'last week'"),
        ("severity>=LOUD", "invalid severity 'LOUD'"),
        ("textPayload:a and b", "AND, OR and NOT must be upper case"),
    ],
)
def test_bad_filters_are_refused_naming_the_problem(http: httpx.Client, filter_: str, problem: str) -> None:
    response = post(http, {"resourceNames": [f"projects/{PROJECT}"], "filter": filter_})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and problem in error["message"], error
    assert error["details"][0]["fieldViolations"][0]["field"] == "filter"


@pytest.mark.parametrize(
    ("body", "field", "problem"),
    [
        ({}, "resourceNames", "name at least one resource"),
        (
            {"resourceNames": ["organizations/1"]},
            "resourceNames[0]",
            "not a resource name this server serves",
        ),
        ({"resourceNames": "projects/p"}, "resourceNames", "expected a list of strings"),
        ({"resourceNames": ["projects/p"], "pageSize": 1001}, "pageSize", "between 0 and 1000"),
        ({"resourceNames": ["projects/p"], "pageSize": -1}, "pageSize", "between 0 and 1000"),
        ({"resourceNames": ["projects/p"], "pageSize": "many"}, "pageSize", "expected an integer"),
        ({"resourceNames": ["projects/p"], "orderBy": "severity"}, "orderBy", "timestamp asc"),
        ({"resourceNames": ["projects/p"], "filter": 5}, "filter", "expected a string"),
        ({"resourceNames": ["projects/p"], "limit": 5}, "limit", "no such field"),
        ({"resourceNames": ["projects/Bad Name"]}, "resourceNames[0]", "invalid project"),
        ([], "body", "expected a JSON object"),
    ],
)
def test_bad_requests_are_refused_naming_the_field(
    http: httpx.Client, body: Any, field: str, problem: str
) -> None:
    response = post(http, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    violation = error["details"][0]["fieldViolations"][0]
    assert violation["field"] == field and problem in violation["description"], error


def test_bad_page_tokens_are_refused(http: httpx.Client, world: World) -> None:
    token = page(http, of_job(world.job_id), pageSize=5)["nextPageToken"]
    cases = [
        ({"filter": of_job(world.job_id), "pageToken": "garbage!"}, "invalid page token"),
        ({"filter": of_job(world.job_id, "severity>=ERROR"), "pageToken": token}, "a different filter"),
        (
            {"filter": of_job(world.job_id), "pageToken": token, "orderBy": "timestamp desc"},
            'orderBy "timestamp asc"',
        ),
    ]
    for body, problem in cases:
        response = post(http, {"resourceNames": [f"projects/{PROJECT}"], **body})
        assert response.status_code == 400, response.text
        violation = response.json()["error"]["details"][0]["fieldViolations"][0]
        assert violation["field"] == "pageToken" and problem in violation["description"]
    assert page(http, of_job(world.job_id), pageSize=5, pageToken=token)["entries"] == world.entries[5:10]


# ---------------------------------------------------------------------------------------- official types
def test_answers_parse_as_the_official_messages(http: httpx.Client, world: World) -> None:
    answer = page(http, of_job(world.job_id), pageSize=1000)
    parsed = ListLogEntriesResponse.pb()()
    json_format.Parse(json.dumps(answer), parsed, ignore_unknown_fields=False)
    assert len(parsed.entries) == len(world.entries)
    for shown in world.entries:
        message = LogEntry.pb()()
        json_format.Parse(json.dumps(shown), message, ignore_unknown_fields=False)
        # Printed back it is the same JSON: canonical proto3 JSON, nanoseconds and all.
        assert json_format.MessageToDict(message) == shown


def test_the_client_library_reads_the_entries(server: ServerProcess, world: World) -> None:
    client = cloud_logging.Client(
        project=PROJECT,
        credentials=AnonymousCredentials(),
        _use_grpc=False,
        client_options=ClientOptions(api_endpoint=server.url),
    )
    newest_first = list(
        client.list_entries(filter_=of_job(world.job_id), order_by=cloud_logging.DESCENDING, page_size=20)
    )
    assert [e.insert_id for e in newest_first] == [e["insertId"] for e in world.entries[::-1]]
    for got, shown in zip(newest_first, world.entries[::-1], strict=True):
        assert got.severity == shown.get("severity")
        assert got.resource.type == "ml_job" and got.resource.labels == shown["resource"]["labels"]
        assert got.log_name == shown["logName"] and got.labels == shown.get("labels")
        if "jsonPayload" in shown:
            assert isinstance(got, StructEntry) and got.payload == shown["jsonPayload"]
        else:
            assert isinstance(got, TextEntry) and got.payload == shown["textPayload"]
        assert got.timestamp is not None and got.timestamp.isoformat()[:19] == shown["timestamp"][:19]
    errors = list(client.list_entries(filter_=of_job(world.job_id, "severity=ERROR")))
    assert [e.payload for e in errors] == [text(e) for e in world.entries if e.get("severity") == "ERROR"]
