"""The change feed (kernel/changes.py) on SQLite and PostgreSQL: recorded in the writer's transaction, read
after a cursor, a wake-up after the commit (and only then), pruned once read."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from trainworks.kernel.changes import ChangeFeed, record_in
from trainworks.kinds.custom_jobs.store import JobStore
from trainworks.store.database import Database
from trainworks.store.tables import CustomJobRow, ReplicaRow


def _job(job_id: int) -> CustomJobRow:
    now = datetime.now(UTC)
    return CustomJobRow(
        id=job_id,
        project_number="1",
        location="us-central1",
        display_name="j",
        state=1,
        spec={},
        labels={},
        create_time=now,
        update_time=now,
    )


def test_a_commit_records_and_wakes_a_rollback_neither(db: Database) -> None:
    feed = ChangeFeed(db)
    woken = threading.Event()  # this process's wake-up, after its own commit
    notified = threading.Event()  # PostgreSQL: the listener thread turned a NOTIFY into a wake-up
    marked = threading.Event()

    def wake(event: threading.Event) -> None:
        (notified if threading.current_thread().name == "change-listener" else event).set()

    feed.subscribe("custom_jobs", lambda: wake(woken))
    feed.subscribe(
        "marker", lambda: marked.set() if threading.current_thread().name == "change-listener" else None
    )

    def listener_caught_up() -> None:
        """PostgreSQL delivers NOTIFYs in commit order: once a later marker arrives, every earlier one has."""
        if db.dialect != "postgresql":
            return
        marked.clear()
        while not marked.is_set():  # the first marker may be sent before the listener runs LISTEN
            with db.session() as session:
                record_in(session, "marker", [1])
            marked.wait(0.2)

    listener_caught_up()
    start = feed.head("test")
    with db.session() as session:
        record_in(session, "custom_jobs", [7, 7, 8])
        session.flush()
        assert not woken.is_set(), "woken before the commit"
    assert woken.is_set()
    cursor, ids = feed.since("test", start, "custom_jobs")
    assert ids == {7, 8} and cursor > start
    listener_caught_up()
    assert notified.is_set() == (db.dialect == "postgresql")
    woken.clear()
    notified.clear()
    with pytest.raises(RuntimeError), db.session() as session:
        record_in(session, "custom_jobs", [9])
        raise RuntimeError("the writer fails")
    listener_caught_up()
    assert not woken.is_set() and not notified.is_set()
    assert feed.since("test", cursor, "custom_jobs")[1] == set()  # the markers moved the cursor, nothing else
    feed.close()


def test_every_job_write_names_its_job_and_other_kinds_are_apart(db: Database) -> None:
    jobs = JobStore(db)
    feed = ChangeFeed(db)
    cursor = feed.head("test")
    jobs.insert(_job(1))
    jobs.insert(_job(2))
    cursor, ids = feed.since("test", cursor, "custom_jobs")
    assert ids == {1, 2}
    planned = ReplicaRow(
        job_id=2, pool=0, replica_index=0, host="127.0.0.1", port=1, phase="planned", run_dir="/x"
    )
    (replica,) = jobs.add_replicas([planned])
    cursor, ids = feed.since("test", cursor, "custom_jobs")
    assert ids == {2}
    jobs.update_replica(replica.id, phase="running")  # a replica's change is its job's
    cursor, ids = feed.since("test", cursor, "custom_jobs")
    assert ids == {2}
    assert not jobs.transition(1, [], state=3)  # a compare-and-set that did not apply changed nothing
    jobs.set_fields(1, waiting_reason="x")
    cursor, ids = feed.since("test", cursor, "custom_jobs")
    assert ids == {1}
    assert feed.since("test", cursor, "tuning_jobs") == (cursor, set())
    jobs.remove(1)
    assert feed.since("test", cursor, "custom_jobs")[1] == {1}


def test_prune_keeps_what_a_consumer_has_not_read(db: Database) -> None:
    feed = ChangeFeed(db)
    behind = feed.head("behind")
    ahead = feed.head("ahead")
    with db.session() as session:
        record_in(session, "custom_jobs", [1, 2])
    ahead, _ = feed.since("ahead", ahead, "custom_jobs")
    assert feed.prune() == 0  # "behind" has read none of them
    assert feed.since("behind", behind, "custom_jobs")[1] == {1, 2}
    assert feed.prune() == 2
    with db.session() as session:
        record_in(session, "custom_jobs", [3])
    # Numbers are never reused once pruned: the cursor still sees what came after it.
    assert feed.since("ahead", ahead, "custom_jobs")[1] == {3}


def test_postgres_wakes_other_processes_through_notify(postgres_url: str) -> None:
    """Two Database objects stand for two processes: only NOTIFY can carry the writer's commit across."""
    reader, writer = Database(postgres_url), Database(postgres_url, migrate=False)
    try:
        feed = ChangeFeed(reader)
        woken = threading.Event()
        feed.subscribe("custom_jobs", woken.set)
        cursor = feed.head("reader")
        # The listener may not have run LISTEN yet: write until a wake-up comes (each write is a change).
        for attempt in range(100):
            with writer.session() as session:
                record_in(session, "custom_jobs", [attempt])
            if woken.wait(0.2):
                break
        assert woken.is_set(), "no NOTIFY reached the other process's listener"
        assert 0 in feed.since("reader", cursor, "custom_jobs")[1]
        feed.close()
    finally:
        writer.dispose()
        reader.dispose()
