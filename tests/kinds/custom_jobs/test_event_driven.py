"""The custom-job controller acts on events, not on every active job each pass: the change feed names the jobs
that changed, a replica's end names its job, a deadline names its job; an idle pass reads no job at all.

The server's services and controller (wiring.py) run in this process and the test takes the controller's
passes one at a time, counting which jobs each pass looked at."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from tests.support.feed_looks import Looks
from tests.support.in_process import in_process_services
from tests.support.jobs import job, python_pool
from tests.support.server import LOCATION, PROJECT, wait_for
from trainworks.config import Settings
from trainworks.jobs.enums import JobState
from trainworks.kernel.request_load import RequestLoad
from trainworks.store.tables import CustomJobRow
from trainworks.wiring import Services

STOCKED_OUT = "europe-west1"
INVENTORY = f"""
regions:
  {LOCATION}:
    zones:
      {LOCATION}-a: {{elastic: true}}
  {STOCKED_OUT}:
    stockout: true
    zones:
      {STOCKED_OUT}-b: {{elastic: true}}
"""


def looks_of(services: Services) -> Looks:
    """The custom-job controller's looks; a full read is its jobs' `active`."""
    return Looks(services.controller, (services.controller.jobs, "active"))


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(INVENTORY)
    settings = Settings(home=tmp_path / "home", inventory_path=inventory, cancel_grace_seconds=3.0)
    settings.replica_binds = ((tmp_path, True),)  # the replicas' go files (their own /tmp is private)
    with in_process_services(settings) as built:
        yield built


def create(services: Services, location: str, body: dict[str, Any]) -> int:
    return int(services.custom_jobs.create(PROJECT, location, body)["name"].rsplit("/", 1)[-1])


def state(services: Services, job_id: int) -> str:
    return str(services.custom_jobs.get(PROJECT, LOCATION, str(job_id))["state"])


def test_an_idle_pass_reads_no_job_and_a_change_reads_only_its_job(services: Services) -> None:
    looks = looks_of(services)
    queued = [create(services, STOCKED_OUT, job(python_pool("pass"), name=f"q{i}")) for i in range(20)]
    first = looks.passes()
    assert set(queued) <= set(first)  # the first pass reads everything (a restarted server starts afresh)
    for job_id in queued:
        row = services.controller.jobs.get(job_id)
        assert row is not None and row.waiting_reason, "not planned"
    looks.passes()  # the pass's own writes (the waiting reasons) come back once through the feed
    looks.full_reads = 0
    assert looks.passes(5) == []  # ten thousand queued jobs cost an idle server nothing
    assert looks.full_reads == 0
    assert services.controller.next_wait(False) > services.settings.resync_seconds  # it sleeps long

    services.custom_jobs.cancel(PROJECT, STOCKED_OUT, str(queued[3]))
    assert looks.passes() == [queued[3]]
    wait_for(lambda: looks.passes() is not None and state_in(services, queued[3]), what="the cancel")
    assert looks.passes(3) == []  # it ended and is forgotten
    assert looks.full_reads == 0


def state_in(services: Services, job_id: int) -> bool:
    return services.custom_jobs.get(PROJECT, STOCKED_OUT, str(job_id))["state"] == "JOB_STATE_CANCELLED"


def test_a_running_job_is_not_polled_and_its_replica_end_wakes_it(services: Services, tmp_path: Path) -> None:
    go = tmp_path / "go"
    code = f"import pathlib, time\nwhile not pathlib.Path({str(go)!r}).exists(): time.sleep(0.01)"
    looks = looks_of(services)
    job_id = create(services, LOCATION, job(python_pool(code)))
    wait_for(
        lambda: looks.passes() is not None and state(services, job_id) == "JOB_STATE_RUNNING", what="RUNNING"
    )
    looks.passes()  # the pass after the start registers the replica's end as an event
    assert looks.passes(5) == []  # running, and nothing happens to it: no pass looks at it
    go.touch()
    # The replica's end is the event: the next passes look at the job, and it succeeds.
    wait_for(
        lambda: looks.passes() is not None and state(services, job_id) == "JOB_STATE_SUCCEEDED",
        what="the job to succeed",
    )
    assert looks.full_reads == 1  # only the very first pass read every job


def test_a_deadline_wakes_its_job_without_any_change(services: Services) -> None:
    """A FLEX_START job's wait runs out while nothing else happens: its deadline alone brings it back."""
    body = job(python_pool("pass"), scheduling={"strategy": "FLEX_START", "maxWaitDuration": "1s"})
    looks = looks_of(services)
    job_id = create(services, STOCKED_OUT, body)
    looks.passes()
    assert 0 < services.controller.next_wait(False) <= 1.1  # it sleeps until the deadline, not longer
    wait_for(lambda: job_id in looks.passes(), what="the deadline")
    wait_for(
        lambda: (
            looks.passes() is not None
            and services.custom_jobs.get(PROJECT, STOCKED_OUT, str(job_id))["state"] == "JOB_STATE_FAILED"
        ),
        what="the FLEX_START wait to run out",
    )
    assert looks.full_reads == 1


def test_the_slow_resync_finds_a_write_that_escaped_the_feed(services: Services) -> None:
    looks = looks_of(services)
    queued = [create(services, STOCKED_OUT, job(python_pool("pass"), name=f"q{i}")) for i in range(3)]
    looks.passes(2)
    # A write that skips the feed (a hand edit, or a bug in a writer): the job is cancelled in the database.
    with services.controller.jobs.db.session() as session:
        session.execute(
            update(CustomJobRow)
            .where(CustomJobRow.id == queued[1])
            .values(state=int(JobState.JOB_STATE_CANCELLING))
        )
    assert looks.passes(3) == []  # nothing named it
    services.controller._next_chunk = 0  # the slow resync's next chunk is due
    assert set(queued) <= set(looks.passes())
    wait_for(lambda: looks.passes() is not None and state_in(services, queued[1]), what="the cancel")
    assert looks.full_reads == 1


def deferred(services: Services) -> float:
    value = services.metrics.registry.get_sample_value("trainworks_controller_deferred_seconds_total")
    return float(value or 0.0)


def test_a_burst_of_jobs_is_admitted_in_one_transaction(services: Services) -> None:
    ids = [create(services, LOCATION, job(python_pool("pass"), name=f"b{i}")) for i in range(12)]
    transitions, many = services.controller.jobs.transition, services.controller.jobs.transition_many
    batches: list[set[int]] = []

    def one_by_one(*args: Any, **kwargs: Any) -> bool:
        raise AssertionError("admitted one by one")

    def counted(job_ids: Any, *args: Any, **kwargs: Any) -> set[int]:
        moved = many(job_ids, *args, **kwargs)
        batches.append(moved)
        return moved

    services.controller.jobs.transition = one_by_one  # type: ignore[method-assign]
    services.controller.jobs.transition_many = counted  # type: ignore[method-assign]
    services.controller._admit(services.controller.jobs.active())  # the admission step of a pass
    services.controller.jobs.transition = transitions  # type: ignore[method-assign]
    assert batches == [set(ids)]
    assert {state(services, i) for i in ids} == {"JOB_STATE_PENDING"}


def test_a_cancelled_job_is_not_admitted_with_the_burst(services: Services) -> None:
    ids = [create(services, LOCATION, job(python_pool("pass"), name=f"c{i}")) for i in range(3)]
    rows = services.controller.jobs.active()
    services.custom_jobs.cancel(PROJECT, LOCATION, str(ids[1]))  # after the pass read it, before admission
    services.controller._admit(rows)
    assert [state(services, i) for i in ids] == [
        "JOB_STATE_PENDING",
        "JOB_STATE_CANCELLING",
        "JOB_STATE_PENDING",
    ]


def test_under_a_flood_launches_wait_one_per_pass_and_other_work_goes_first(
    services: Services, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    code = f"import pathlib, time\nwhile not pathlib.Path({str(go)!r}).exists(): time.sleep(0.01)"
    running = create(services, LOCATION, job(python_pool(code), name="running"))
    wait_for(
        lambda: (
            services.controller.reconcile_once() is not None
            and state(services, running) == "JOB_STATE_RUNNING"
        ),
        what="RUNNING",
    )
    # A request that stays open (young) all along: each launch waits the most it may, then goes on.
    load = RequestLoad(most=0.05, young=60.0)
    services.controller.requests = load
    looks = looks_of(services)
    launches = [create(services, LOCATION, job(python_pool("pass"), name=f"d{i}")) for i in range(3)]
    load.begin()
    try:
        services.controller.reconcile_once()  # admits the three; launches one, after waiting
        services.custom_jobs.cancel(PROJECT, LOCATION, str(running))
        started = [i for i in launches if state(services, i) != "JOB_STATE_PENDING"]
        assert len(started) == 1, [state(services, i) for i in launches]
        looks.rows.clear()
        services.controller.reconcile_once()
        # The cancel is worked on before the launches left, which still wait their turn (one per pass).
        assert looks.rows[0] == running
        assert sum(state(services, i) != "JOB_STATE_PENDING" for i in launches) == 2
        services.controller.reconcile_once()
    finally:
        load.end()
    assert deferred(services) >= 3 * 0.05  # each of the three launches waited
    go.touch()
    wait_for(
        lambda: (
            services.controller.reconcile_once() is not None
            and {state(services, i) for i in launches} == {"JOB_STATE_SUCCEEDED"}
            and state(services, running) == "JOB_STATE_CANCELLED"
        ),
        what="the launches to succeed and the cancel to end",
    )
    before = deferred(services)
    create(services, LOCATION, job(python_pool("pass"), name="quiet"))
    services.controller.reconcile_once()
    assert deferred(services) == before  # no request open: nothing is put off


def test_transition_many_takes_more_ids_than_one_statement_does(services: Services) -> None:
    ids = [create(services, STOCKED_OUT, job(python_pool("pass"), name=f"m{i}")) for i in range(1100)]
    services.custom_jobs.cancel(PROJECT, STOCKED_OUT, str(ids[700]))  # no longer QUEUED: left as it is
    moved = services.controller.jobs.transition_many(ids, [JobState.JOB_STATE_QUEUED], waiting_reason="held")
    assert moved == set(ids) - {ids[700]}
    rows = {row.id: row for row in services.controller.jobs.active()}
    assert {rows[i].waiting_reason for i in moved} == {"held"}
