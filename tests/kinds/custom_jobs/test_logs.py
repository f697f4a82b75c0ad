"""Trainworks' own log endpoint (`GET /trainworks/v1/.../customJobs/{id}/logs`) on the job's log entries, with
a real server and real replicas: time order across replicas and streams, timestamps and insertIds, filters
(task, severity, text, since), paging (limit, after, before, tail), following until the job ends, no cut
without follow, the entry that says retention dropped lines, the text download, and 400s naming the
parameter."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.jobs import END_TOGETHER, job, python_pool
from tests.support.server import ServerProcess, wait_for, wait_job

TIME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{9}Z$")
LINES_PER_REPLICA = 60

# Each replica waits until all three are up, then interleaves stdout, stderr and structured (JSON) lines.
# They end together (END_TOGETHER): no replica is stopped before all its lines are in.
INTERLEAVED = (
    f"""
import json, os, sys, time
from pathlib import Path
task = json.loads(os.environ['CLUSTER_SPEC'])['task']
me = f"{{task['type']}}-{{task['index']}}"
gate = Path(sys.argv[1])
(gate / me).touch()
deadline = time.monotonic() + 60
while len(list(gate.iterdir())) < 3 and time.monotonic() < deadline:
    time.sleep(0.01)
for i in range({LINES_PER_REPLICA}):
    print(f"out {{me}} {{i}}", flush=True)
    if i % 5 == 0:
        print(f"err {{me}} {{i}}", file=sys.stderr, flush=True)
    if i % 10 == 0:
        print(json.dumps({{"severity": "warning", "message": f"json {{me}} {{i}}", "step": i}}), flush=True)
    time.sleep(0.004)
"""
    + END_TOGETHER
)
TASKS = ("workerpool0-0", "workerpool1-0", "workerpool1-1")


def logs_url(name: str) -> str:
    return f"/trainworks/v1/{name}/logs"


def read(client: httpx.Client, name: str, **params: Any) -> list[dict[str, Any]]:
    response = client.get(logs_url(name), params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


def replica_lines(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e["task"] != "service"]


@pytest.fixture(scope="module")
def three_replicas(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A finished job of three replicas that interleaved their stdout, stderr and JSON lines."""
    gate = tmp_path_factory.mktemp("gate")
    pools = [
        python_pool(INTERLEAVED, args=[str(gate)]),
        python_pool(INTERLEAVED, replicas=2, args=[str(gate)]),
    ]
    with server.client() as client:
        created = client.post(f"/v1/{server.parent}/customJobs", json=job(*pools, name="logs-three"))
        assert created.status_code == 200, created.text
        done = wait_job(client, created.json()["name"])
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    return str(done["name"])


@pytest.fixture(scope="module")
def everything(server: ServerProcess, three_replicas: str) -> list[dict[str, Any]]:
    with server.client() as client:
        return read(client, three_replicas)


def test_every_line_once_in_time_order_across_replicas(everything: list[dict[str, Any]]) -> None:
    keys = [(e["time"], e["insertId"]) for e in everything]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert all(TIME.match(e["time"]) for e in everything)
    # insertIds order as the entries do, and the nanoseconds they start with are the entry's time.
    assert [e["insertId"] for e in everything] == sorted(e["insertId"] for e in everything)
    lines = replica_lines(everything)
    for task in TASKS:
        mine = [e["text"] for e in lines if e["task"] == task]
        want = []
        for i in range(LINES_PER_REPLICA):
            want.append(f"out {task} {i}")
            if i % 5 == 0:
                want.append(f"err {task} {i}")
            if i % 10 == 0:
                want.append(json.dumps({"severity": "warning", "message": f"json {task} {i}", "step": i}))
        # A replica's stdout and stderr are two pipes: each stream keeps its order.
        for prefix in ("out ", "err ", "{"):
            assert [t for t in mine if t.startswith(prefix)] == [t for t in want if t.startswith(prefix)]
    # The replicas ran together: their lines interleave rather than come one replica after another.
    switches = sum(1 for a, b in zip(lines, lines[1:], strict=False) if a["task"] != b["task"])
    assert switches > 20, switches
    # The platform's messages are in the same order, the last one after every replica line.
    assert everything[-1]["task"] == "service" and everything[-1]["text"] == "Job completed successfully."
    assert "stream" not in everything[-1]


def test_severity_stream_and_structured_lines(everything: list[dict[str, Any]]) -> None:
    by_text = {e["text"]: e for e in everything}
    out = by_text["out workerpool1-1 3"]
    assert (out["severity"], out["stream"]) == ("INFO", "stdout") and "json" not in out
    err = by_text["err workerpool1-1 5"]
    assert (err["severity"], err["stream"]) == ("ERROR", "stderr")
    structured = next(e for e in everything if e.get("json", {}).get("message") == "json workerpool0-0 10")
    # Structured logging: the line's severity is the entry's and leaves the payload; the text is the line.
    assert structured["severity"] == "WARNING" and structured["stream"] == "stdout"
    assert structured["json"] == {"message": "json workerpool0-0 10", "step": 10}
    assert json.loads(structured["text"])["step"] == 10
    assert not any("trialId" in e or "more" in e or "dropped" in e for e in everything)


def test_filters_task_severity_text_since(
    server: ServerProcess, three_replicas: str, everything: list[dict[str, Any]]
) -> None:
    with server.client() as client:
        one = read(client, three_replicas, task="workerpool1-0")
        assert {e["task"] for e in one} == {"workerpool1-0", "service"}  # the platform's messages come along
        assert one == [e for e in everything if e["task"] in ("workerpool1-0", "service")]
        listed = read(client, three_replicas, task="workerpool0-0,workerpool1-1")
        repeated = client.get(
            logs_url(three_replicas), params=[("task", "workerpool0-0"), ("task", "workerpool1-1")]
        )
        assert [json.loads(line) for line in repeated.text.splitlines()] == listed
        assert {e["task"] for e in listed} == {"workerpool0-0", "workerpool1-1", "service"}

        warnings = read(client, three_replicas, severity="warning")
        assert warnings == [e for e in everything if e["severity"] in ("WARNING", "ERROR")]
        assert {e["severity"] for e in warnings} == {"WARNING", "ERROR"}
        assert read(client, three_replicas, severity="ERROR", task="workerpool0-0") == [
            e for e in everything if e["severity"] == "ERROR" and e["task"] in ("workerpool0-0", "service")
        ]

        found = read(client, three_replicas, q="OUT WORKERPOOL1-1 4")  # any case; a substring
        assert [e["text"] for e in found] == ["out workerpool1-1 4"] + [
            f"out workerpool1-1 {i}" for i in range(40, 50)
        ]
        assert read(client, three_replicas, q="no such text anywhere") == []

        middle = everything[len(everything) // 2]
        since = read(client, three_replicas, since=middle["time"])
        assert since == [e for e in everything if e["time"] >= middle["time"]]
        assert read(client, three_replicas, since="1h") == everything  # a duration back from now
        assert read(client, three_replicas, since="2999-01-01T00:00:00Z") == []


def test_paging_after_before_tail(
    server: ServerProcess, three_replicas: str, everything: list[dict[str, Any]]
) -> None:
    with server.client() as client:
        # Forward: pages of 50, each after the last line of the one before, make up the whole log.
        pages: list[dict[str, Any]] = []
        page = read(client, three_replicas, limit=50)
        while page:
            assert len(page) <= 50
            pages += page
            page = read(client, three_replicas, limit=50, after=page[-1]["insertId"])
        assert pages == everything
        # Backward: the page before a line, in time order; pages of 40 back to the start.
        back: list[dict[str, Any]] = []
        page = read(client, three_replicas, tail=40)
        assert page == everything[-40:]
        while page:
            back = page + back
            page = read(client, three_replicas, limit=40, before=page[0]["insertId"])
            assert len(page) <= 40
        assert back == everything
        assert read(client, three_replicas, before=everything[10]["insertId"]) == everything[:10]
        assert read(client, three_replicas, tail=0) == []
        assert read(client, three_replicas, tail=10**6) == everything
        # Paging and filters together: the last 3 errors of one replica.
        errors = [
            e for e in everything if e["severity"] == "ERROR" and e["task"] in ("workerpool1-0", "service")
        ]
        assert read(client, three_replicas, tail=3, severity="ERROR", task="workerpool1-0") == errors[-3:]


def test_bad_parameters_are_400_naming_them(server: ServerProcess, three_replicas: str) -> None:
    bad = [
        ({"severity": "LOUD"}, "severity"),
        ({"since": "yesterday"}, "since"),
        ({"since": "10x"}, "since"),
        ({"after": "nope"}, "after"),
        ({"before": "1.2.3"}, "before"),
        ({"limit": "0"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"tail": "-1"}, "tail"),
        ({"follow": "maybe"}, "follow"),
        ({"task": "work pool"}, "task"),
        ({"format": "xml"}, "format"),
        ({"download": "perhaps"}, "download"),
        (
            {
                "after": "0000000000000000001.workerpool0-0.000000000000",
                "before": "0000000000000000002.service.dropped",
            },
            "before",
        ),
        ({"tail": "5", "after": "0000000000000000001.workerpool0-0.000000000000"}, "tail"),
        ({"tail": "5", "limit": "5"}, "limit"),
        ({"before": "0000000000000000001.workerpool0-0.000000000000", "follow": "true"}, "before"),
    ]
    with server.client() as client:
        for params, field in bad:
            response = client.get(logs_url(three_replicas), params=params)
            assert response.status_code == 400, (params, response.text)
            error = response.json()["error"]
            assert error["status"] == "INVALID_ARGUMENT"
            violations = error["details"][0]["fieldViolations"]
            assert violations[0]["field"] == field, (params, error)
        missing = client.get(f"/trainworks/v1/{server.parent}/customJobs/987654/logs", params={"tail": "5"})
        assert missing.status_code == 404


def test_text_download(server: ServerProcess, three_replicas: str, everything: list[dict[str, Any]]) -> None:
    with server.client() as client:
        response = client.get(logs_url(three_replicas), params={"format": "text", "download": "true"})
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        job_id = three_replicas.rsplit("/", 1)[-1]
        assert response.headers["content-disposition"] == f'attachment; filename="customJob-{job_id}.log"'
        lines = response.text.splitlines()
        assert lines == [f"{e['time']} {e['task']} {e['severity']} {e['text']}" for e in everything]
        ndjson = client.get(logs_url(three_replicas), params={"download": "1"})
        assert ndjson.headers["content-disposition"].endswith(f'customJob-{job_id}.ndjson"')


def test_more_than_a_mebibyte_without_follow_comes_whole(server: ServerProcess) -> None:
    """The old reader gave the first MiB of a replica without follow; now every line comes."""
    count = 40_000
    code = f"for i in range({count}):\n    print(f'line {{i:06d}} ' + 'x' * 60)\nprint('done', flush=True)"
    with server.client() as client:
        created = client.post(f"/v1/{server.parent}/customJobs", json=job(python_pool(code), name="logs-big"))
        done = wait_job(client, created.json()["name"])
        assert done["state"] == "JOB_STATE_SUCCEEDED", done
        entries = replica_lines(read(client, done["name"]))
    assert sum(len(e["text"]) + 1 for e in entries) > 2 << 20
    assert [e["text"] for e in entries] == [f"line {i:06d} " + "x" * 60 for i in range(count)] + ["done"]


# ------------------------------------------------------------------------------------------ following
def follow(client: httpx.Client, name: str, sink: list[dict[str, Any]], **params: Any) -> threading.Thread:
    """Follow the job's log in a thread, appending each line to `sink` as it comes."""

    def run() -> None:
        with client.stream("GET", logs_url(name), params={"follow": "true", **params}, timeout=None) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line:
                    sink.append(json.loads(line))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def stoppable(server: ServerProcess, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A running job that prints numbered lines until the file `stop` appears, then `done`."""
    stop = tmp_path / "stop"
    code = (
        "import sys, time\nfrom pathlib import Path\ni = 0\n"
        f"while not Path({str(stop)!r}).exists():\n"
        "    print(f'tick {i}', flush=True); i += 1; time.sleep(0.01)\n"
        "print('done', flush=True)"
    )
    with server.client() as client:
        created = client.post(
            f"/v1/{server.parent}/customJobs", json=job(python_pool(code), name="logs-live")
        )
        name = created.json()["name"]
        try:
            yield name, stop
        finally:
            stop.touch()
            wait_job(client, name)


def test_follow_streams_live_and_ends_with_the_job(
    server: ServerProcess, stoppable: tuple[str, Path]
) -> None:
    name, stop = stoppable
    with server.client() as a, server.client() as b:
        everything: list[dict[str, Any]] = []
        only_new: list[dict[str, Any]] = []
        first = follow(a, name, everything)
        # Lines arrive while the job runs.
        wait_for(lambda: sum(e["text"].startswith("tick ") for e in everything) >= 20, what="live lines")
        seen = [e for e in everything if e["task"] != "service"][-1]
        tailing = follow(b, name, only_new, tail="0", task="workerpool0-0")
        wait_for(lambda: any(e["text"].startswith("tick ") for e in only_new), what="new lines after tail=0")
        assert a.get(f"/v1/{name}").json()["state"] == "JOB_STATE_RUNNING"
        stop.touch()
        first.join(60)
        tailing.join(60)
        assert not first.is_alive() and not tailing.is_alive()
        after = read(a, name, after=seen["insertId"])
        whole = read(a, name)
    # Every line once, in order, through the end: the last replica line and the platform's last message.
    keys = [(e["time"], e["insertId"]) for e in everything]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    ticks = [e["text"] for e in replica_lines(everything)]
    assert ticks == [f"tick {i}" for i in range(len(ticks) - 1)] + ["done"]
    assert everything[-1]["text"] == "Job completed successfully."
    assert everything == whole
    # tail=0: only what came after the follower arrived; and `after` resumes exactly after a line.
    new_ticks = [e["text"] for e in replica_lines(only_new)]
    assert new_ticks and new_ticks == ticks[ticks.index(new_ticks[0]) :]
    assert after == everything[everything.index(seen) + 1 :]


def test_follow_from_after_a_line_with_a_limit(server: ServerProcess, stoppable: tuple[str, Path]) -> None:
    name, _ = stoppable
    with server.client() as client:
        first = wait_for(lambda: replica_lines(read(client, name, limit=20)), what="a first line")
        with client.stream(
            "GET", logs_url(name), params={"follow": "true", "after": first[0]["insertId"], "limit": "30"}
        ) as r:
            got = [json.loads(line) for line in r.iter_lines() if line]
    # The stream ends after its limit, the job still running; it starts right after the line given.
    assert len(got) == 30
    assert replica_lines(got)[0]["text"] == "tick 1"


def test_retention_says_what_it_dropped(tmp_path: Path) -> None:
    proc = ServerProcess(home=tmp_path / "home", args=["--log-limit-replica", str(256 * 1024)]).start()
    try:
        code = "for i in range(20000):\n    print(f'row {i:05d} ' + 'y' * 30)\nprint('last', flush=True)"
        with proc.client() as client:
            created = client.post(
                f"/v1/{proc.parent}/customJobs", json=job(python_pool(code), name="logs-trim")
            )
            name = wait_job(client, created.json()["name"])["name"]
            whole = read(client, name)
            entries = replica_lines(whole)
            followed = read(client, name, follow="true")  # follows from the start: the same
            first_page = read(client, name, limit=10, task="workerpool0-0")
    finally:
        proc.stop()
    notice = next(e for e in entries if "dropped" in e)
    assert notice["severity"] == "WARNING" and "dropped" in notice["text"] and "stream" not in notice
    assert notice["dropped"]["lines"] > 0 and notice["dropped"]["bytes"] > 0
    rows = [e["text"] for e in entries if e is not notice]
    assert rows[-1] == "last"
    first_kept = int(rows[0].split()[1])
    # What is kept is the newest part, whole and in order; the notice counts exactly what went.
    assert rows == [f"row {i:05d} " + "y" * 30 for i in range(first_kept, 20000)] + ["last"]
    assert notice["dropped"]["lines"] == first_kept
    assert notice in first_page  # at the start of the log, after the first platform messages
    assert followed == whole
