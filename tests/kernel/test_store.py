"""The store behaves the same on SQLite and PostgreSQL, and the migrations match the tables."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from trainworks.jobs.enums import JobState
from trainworks.kernel.filtering import FilterColumns, compile_filter
from trainworks.kernel.projects import Projects
from trainworks.kernel.wire import now_utc
from trainworks.kinds.custom_jobs.store import JobStore
from trainworks.store.database import Database
from trainworks.store.tables import Base, CustomJobRow, ReplicaRow

S = JobState


def _row(
    job_id: int, name: str, state: JobState, offset: int = 0, labels: dict | None = None
) -> CustomJobRow:
    now = now_utc() + timedelta(seconds=offset)
    return CustomJobRow(
        id=job_id,
        project_number="1",
        location="l",
        display_name=name,
        state=int(state),
        spec={"displayName": name},
        labels=labels or {},
        create_time=now,
        update_time=now,
    )


def test_migrations_match_the_tables(db: Database) -> None:
    with db.engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []


def test_migrations_are_idempotent(db: Database) -> None:
    db.upgrade()
    db.upgrade()


def test_times_come_back_aware_utc(db: Database) -> None:
    store = JobStore(db)
    store.insert(_row(1, "a", S.JOB_STATE_QUEUED))
    row = store.get(1)
    assert row is not None and row.create_time.tzinfo is not None
    assert now_utc() - row.create_time < timedelta(minutes=1)


def test_transition_is_compare_and_set(db: Database) -> None:
    store = JobStore(db)
    store.insert(_row(1, "a", S.JOB_STATE_QUEUED))
    assert store.transition(1, [S.JOB_STATE_QUEUED], state=S.JOB_STATE_PENDING)
    assert not store.transition(1, [S.JOB_STATE_QUEUED], state=S.JOB_STATE_RUNNING)
    assert store.get(1).state == int(S.JOB_STATE_PENDING)  # type: ignore[union-attr]


def test_paging_is_newest_first_and_stable(db: Database) -> None:
    store = JobStore(db)
    for i in range(5):
        store.insert(_row(i + 1, f"job{i}", S.JOB_STATE_QUEUED, offset=i))
    first = store.page("1", "l", None, None, 2)
    assert [r.id for r in first] == [5, 4]
    second = store.page("1", "l", None, (first[-1].create_time, first[-1].id), 2)
    assert [r.id for r in second] == [3, 2]
    assert store.page("2", "l", None, None, 10) == []


def test_filters_run_on_the_database(db: Database) -> None:
    store = JobStore(db)
    store.insert(_row(1, "my_job_1", S.JOB_STATE_SUCCEEDED, labels={"team": "a"}))
    store.insert(_row(2, "other", S.JOB_STATE_FAILED, labels={"team": "b", "x": "1"}))
    store.insert(_row(3, "my_job_2", S.JOB_STATE_FAILED))
    columns = FilterColumns(
        CustomJobRow.display_name, CustomJobRow.state, CustomJobRow.create_time, CustomJobRow.labels
    )
    names = {s.name: int(s) for s in JobState}

    def ids(text: str) -> set[int]:
        return {r.id for r in store.page("1", "l", compile_filter(text, columns, names), None, 100)}

    assert ids('state="JOB_STATE_FAILED" AND display_name:"my_job_*"') == {3}
    assert ids("labels.team=a") == {1}
    assert ids("labels.x:*") == {2}
    assert ids("NOT labels.team=a") == {2, 3}
    assert ids('create_time>"2000-01-01T00:00:00Z"') == {1, 2, 3}


def test_replica_rows_and_ports(db: Database) -> None:
    store = JobStore(db)
    store.insert(_row(1, "a", S.JOB_STATE_PENDING))
    rows = store.add_replicas(
        [ReplicaRow(job_id=1, pool=0, replica_index=0, host="h", port=4000, run_dir="/x")]
    )
    assert store.ports_in_use() == {4000}
    store.update_replica(rows[0].id, phase="exited", exit_code=0)
    assert store.ports_in_use() == set()
    store.remove(1)
    assert store.get(1) is None and store.replicas(1) == []


def test_project_numbers_are_stable(db: Database) -> None:
    projects = Projects(db)
    number = projects.number("my-project")
    assert number.isdigit() and len(number) == 12
    assert Projects(db).number("my-project") == number
    assert projects.number("123") == "123"


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_database_from_the_first_release_upgrades_with_its_jobs(
    dialect: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from alembic import command
    from sqlalchemy import create_engine, text

    from trainworks.store.database import alembic_config, normalise_url

    url = (
        f"sqlite:///{tmp_path / 'old.db'}" if dialect == "sqlite" else request.getfixturevalue("postgres_url")
    )
    command.upgrade(alembic_config(url), "0001")  # the schema as the first release left it
    engine = create_engine(normalise_url(url))
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO custom_jobs (id, project_number, location, display_name, state, spec, labels, "
                "create_time, update_time) VALUES (7, '1', 'l', 'old', 4, :spec, '{}', :now, :now)"
            ),
            {"spec": '{"displayName": "old"}', "now": now_utc()},
        )
        connection.execute(  # a queued job on a persistent resource
            text(
                "INSERT INTO custom_jobs (id, project_number, location, display_name, state, spec, labels, "
                "create_time, update_time) VALUES (8, '1', 'l', 'on-pool', 1, :spec, '{}', :now, :now)"
            ),
            {"spec": '{"jobSpec": {"persistentResourceId": "pool1"}}', "now": now_utc()},
        )
    engine.dispose()
    database = Database(url)
    try:
        row = JobStore(database).get(7)
        assert row is not None and row.display_name == "old" and row.state == int(S.JOB_STATE_SUCCEEDED)
        assert row.attempt == 0 and row.history == [] and row.priority == 0 and row.zone is None
        assert row.persistent_resource is None
        assert [(r.id, r.persistent_resource) for r in JobStore(database).active_on_resources()] == [
            (8, "pool1")
        ]
    finally:
        database.dispose()
