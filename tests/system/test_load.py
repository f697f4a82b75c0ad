"""Load on a real server (SQLite): 1,000 concurrent creates from 50 clients, every job accounted for.

The server's inventory stocks out us-central1, so the big batch stays QUEUED and launches nothing (the
host stays safe however many jobs there are); europe-west4 is elastic, so a smaller batch really runs.
Every request must be answered 200, every created job must be listed exactly once through paging, and
"database is locked" must never appear in a response or the server log.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.support.server import PROJECT, ServerProcess, inventory_server, wait_for

CLIENTS = 50
CREATES = 1000
RUNNING = 100
INVENTORY = """
regions:
  us-central1:
    stockout: true
    zones:
      us-central1-a: {elastic: true}
  europe-west4: {elastic: true}
"""
QUEUED_PARENT = f"projects/{PROJECT}/locations/us-central1"
RUNNING_PARENT = f"projects/{PROJECT}/locations/europe-west4"
LOCKED = "database is locked"


@dataclass(frozen=True)
class Answer:
    status: int
    text: str
    name: str


def tiny_job(index: int) -> dict[str, Any]:
    """A job whose one replica exits at once."""
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "containerSpec": {"imageUri": "python:3.11", "command": ["true"]},
    }
    return {"displayName": f"load-{index}", "jobSpec": {"workerPoolSpecs": [pool]}}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with inventory_server(tmp_path_factory.mktemp("load"), INVENTORY) as proc:
        yield proc


def concurrent_creates(server: ServerProcess, parent: str, count: int) -> list[Answer]:
    """`count` creates from CLIENTS threads, each with its own keep-alive connection."""

    def client_loop(first: int) -> list[Answer]:
        answers = []
        with server.client() as client:
            for i in range(first, count, CLIENTS):
                response = client.post(f"/v1/{parent}/customJobs", json=tiny_job(i))
                name = response.json().get("name", "") if response.status_code == 200 else ""
                answers.append(Answer(response.status_code, response.text, name))
        return answers

    with ThreadPoolExecutor(CLIENTS) as pool:
        return [a for answers in pool.map(client_loop, range(CLIENTS)) for a in answers]


def list_all(
    client: httpx.Client, parent: str, page_size: int, filter_text: str = ""
) -> list[dict[str, Any]]:
    """Every job under `parent`, page by page."""
    jobs: list[dict[str, Any]] = []
    token = ""
    while True:
        params = {"pageSize": page_size, "pageToken": token, "filter": filter_text, "readMask": "name,state"}
        response = client.get(f"/v1/{parent}/customJobs", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        jobs += page.get("customJobs", [])
        token = page.get("nextPageToken", "")
        if not token:
            return jobs


def while_running(action: Callable[[], None], work: Callable[[], Any]) -> tuple[Any, int]:
    """Run `work` while another thread repeats `action`; (work's result, how often action ran)."""
    done = threading.Event()
    runs = 0
    failure: list[BaseException] = []

    def repeat() -> None:
        nonlocal runs
        try:
            while not done.is_set():
                action()
                runs += 1
        except BaseException as exc:  # surfaced in the test's own thread below
            failure.append(exc)

    thread = threading.Thread(target=repeat)
    thread.start()
    try:
        result = work()
    finally:
        done.set()
        thread.join(timeout=60)
    if failure:
        raise failure[0]
    return result, runs


def assert_all_answered(answers: list[Answer], count: int) -> set[str]:
    bad = [f"{a.status} {a.text[:200]}" for a in answers if a.status != 200]
    assert not bad, f"{len(bad)} creates failed, first: {bad[:3]}"
    assert not [a for a in answers if LOCKED in a.text]
    names = {a.name for a in answers}
    assert len(answers) == count and len(names) == count  # one distinct job per create
    return names


def assert_log_clean(server: ServerProcess) -> None:
    log = server.log_path.read_text(errors="replace")
    assert LOCKED not in log
    assert "internal error" not in log and "Traceback" not in log


def test_a_thousand_concurrent_creates_are_all_answered_and_each_listed_exactly_once(
    loaded: ServerProcess,
) -> None:
    with loaded.client() as reader:

        def read() -> None:  # reads go on while the creates do: both must keep being answered
            response = reader.get(f"/v1/{QUEUED_PARENT}/customJobs", params={"pageSize": 50})
            assert response.status_code == 200 and LOCKED not in response.text, response.text

        answers, reads = while_running(read, lambda: concurrent_creates(loaded, QUEUED_PARENT, CREATES))
        assert reads > 0
        created = assert_all_answered(answers, CREATES)

        # An odd page size, so pages end mid-way through jobs created in the same instant.
        listed = list_all(reader, QUEUED_PARENT, page_size=73)
        names = [j["name"] for j in listed]
        assert len(names) == len(set(names)), "a job was listed twice"
        assert set(names) == created
        assert {j["state"] for j in listed} == {"JOB_STATE_QUEUED"}  # a stocked-out region launches nothing
        queued = list_all(reader, QUEUED_PARENT, page_size=1000, filter_text='state="JOB_STATE_QUEUED"')
        assert sorted(j["name"] for j in queued) == sorted(created)
    assert_log_clean(loaded)


def test_a_concurrent_batch_that_really_runs_all_succeeds(loaded: ServerProcess) -> None:
    answers = concurrent_creates(loaded, RUNNING_PARENT, RUNNING)
    created = assert_all_answered(answers, RUNNING)
    with loaded.client() as client:

        def all_ended() -> list[dict[str, Any]] | None:
            jobs = list_all(client, RUNNING_PARENT, page_size=1000)
            ended = all(j["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED") for j in jobs)
            return jobs if ended else None

        jobs = wait_for(all_ended, timeout=120, interval=0.2, what=f"{RUNNING} jobs to end")
        # The creates went first: the controller put its launches off while they kept arriving, and the
        # launches still all happened (kernel/request_load.py).
        metrics = client.get("/metrics").text
    assert sorted(j["name"] for j in jobs) == sorted(created)
    assert {j["state"] for j in jobs} == {"JOB_STATE_SUCCEEDED"}
    deferred = [
        line
        for line in metrics.splitlines()
        if line.startswith("trainworks_controller_deferred_seconds_total ")
    ]
    assert deferred and float(deferred[0].split()[1]) > 0, deferred
    assert_log_clean(loaded)


def test_a_write_lock_held_past_busy_timeout_is_a_retryable_503_not_a_500(
    fresh_server: ServerProcess,
) -> None:
    # Regression: another process (a backup, a second server on the same home) holding SQLite's write
    # lock longer than busy_timeout (10 s) made creates answer 500 INTERNAL.
    parent = fresh_server.parent
    holder = sqlite3.connect(str(fresh_server.home / "trainworks.db"), isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        with fresh_server.client() as client:
            busy = client.post(f"/v1/{parent}/customJobs", json=tiny_job(0))
            holder.execute("ROLLBACK")
            assert busy.status_code == 503, busy.text
            error = busy.json()["error"]
            assert error["status"] == "UNAVAILABLE" and error["code"] == 503
            assert "busy" in error["message"] and LOCKED not in busy.text
            # Nothing half-made: once the lock is gone the retry creates the one job.
            retried = client.post(f"/v1/{parent}/customJobs", json=tiny_job(0))
            assert retried.status_code == 200, retried.text
            assert [j["name"] for j in list_all(client, parent, page_size=10)] == [retried.json()["name"]]
    finally:
        holder.close()
