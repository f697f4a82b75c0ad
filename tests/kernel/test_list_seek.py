"""List pages at scale: a job's label rows follow it, a filter requiring a label pages through them, and every
filtered page is the same as reading all rows (SQLite and PostgreSQL); on SQLite, the plans seek an index."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from alembic import command
from sqlalchemy import ColumnElement, insert, select

from trainworks.jobs.enums import JobState
from trainworks.kernel.filtering import required_label
from trainworks.kernel.rows import in_location, labelled_in_location, newest_first
from trainworks.kernel.wire import now_utc
from trainworks.kinds.custom_jobs.service import job_filter
from trainworks.kinds.custom_jobs.store import JobStore
from trainworks.kinds.tuning_jobs.store import TuningStore
from trainworks.store.database import Database, alembic_config
from trainworks.store.tables import CustomJobLabelRow, CustomJobRow, TuningJobLabelRow, TuningJobRow

S = JobState
BASE = now_utc()
STATES = (S.JOB_STATE_SUCCEEDED, S.JOB_STATE_FAILED, S.JOB_STATE_QUEUED)


def job_values(job_id: int, state: JobState, labels: dict[str, str], second: int) -> dict[str, Any]:
    created = BASE + timedelta(seconds=second)
    return {
        "id": job_id,
        "project_number": "1",
        "location": "l",
        "display_name": f"job-{job_id}",
        "state": int(state),
        "spec": {"displayName": f"job-{job_id}", "labels": labels},
        "labels": labels,
        "create_time": created,
        "update_time": created,
    }


def fill(store: JobStore, count: int = 40) -> list[CustomJobRow]:
    """`count` jobs, three to a create time (ties are ordered by id), with labels team (a, b, c: a on most),
    env on every other one, none on every seventh; and one job in another location."""
    rows = []
    for i in range(count):
        labels = (
            {} if i % 7 == 0 else {"team": "a" if i % 5 else "bc"[i % 2], **({"env": "p"} if i % 2 else {})}
        )
        rows.append(store.insert(CustomJobRow(**job_values(100 + i, STATES[i % 3], labels, second=i // 3))))
    elsewhere = job_values(999, S.JOB_STATE_SUCCEEDED, {"team": "a"}, second=100)
    store.insert(CustomJobRow(**{**elsewhere, "location": "other"}))
    return rows


def all_pages(store: JobStore, where: ColumnElement[bool] | None, size: int) -> list[int]:
    ids: list[int] = []
    after = None
    while True:
        page = store.page("1", "l", where, after, size)
        ids += [r.id for r in page]
        if len(page) < size:
            return ids
        after = (page[-1].create_time, page[-1].id)


FILTERS = [
    "labels.team=a",
    'labels.team:"a"',
    "labels.team=a AND state=JOB_STATE_FAILED",
    "state=JOB_STATE_QUEUED labels.env=p",
    "labels.team=a AND NOT labels.env=p",
    "labels.team=a AND (state=JOB_STATE_FAILED OR labels.env=p)",
    "labels.team=nobody",
    "labels.team=a OR labels.team=b",
    "NOT labels.team=a",
    "labels.team!=a",
    "state=JOB_STATE_FAILED",
    "display_name=job-105",
]


def matches(row: CustomJobRow, text: str) -> bool:
    """What each of FILTERS means, in Python."""
    team, env, state = row.labels.get("team"), row.labels.get("env"), S(row.state)
    return {
        "labels.team=a": team == "a",
        'labels.team:"a"': team == "a",
        "labels.team=a AND state=JOB_STATE_FAILED": team == "a" and state == S.JOB_STATE_FAILED,
        "state=JOB_STATE_QUEUED labels.env=p": state == S.JOB_STATE_QUEUED and env == "p",
        "labels.team=a AND NOT labels.env=p": team == "a" and env != "p",
        "labels.team=a AND (state=JOB_STATE_FAILED OR labels.env=p)": team == "a"
        and (state == S.JOB_STATE_FAILED or env == "p"),
        "labels.team=nobody": False,
        "labels.team=a OR labels.team=b": team in ("a", "b"),
        "NOT labels.team=a": team != "a",
        "labels.team!=a": team != "a",
        "state=JOB_STATE_FAILED": state == S.JOB_STATE_FAILED,
        "display_name=job-105": row.display_name == "job-105",
    }[text]


@pytest.mark.parametrize("size", [1, 4, 100])
def test_filtered_pages_are_the_rows_that_match_newest_first(db: Database, size: int) -> None:
    store = JobStore(db)
    rows = fill(store)
    newest_first_ids = [r.id for r in sorted(rows, key=lambda r: (r.create_time, r.id), reverse=True)]
    by_id = {r.id: r for r in rows}
    for text_ in FILTERS:
        expected = [i for i in newest_first_ids if matches(by_id[i], text_)]
        assert all_pages(store, job_filter(text_), size) == expected, text_


def test_a_label_required_at_the_top_level_is_found() -> None:
    assert required_label(job_filter("labels.team=a")) == ("team", "a")
    assert required_label(job_filter('labels.team:"a"')) == ("team", "a")
    assert required_label(job_filter("state=JOB_STATE_FAILED AND labels.team=a")) == ("team", "a")
    assert required_label(job_filter("(state=1 OR state=2) labels.team=a")) == ("team", "a")
    for text_ in ("labels.team!=a", "NOT labels.team=a", "labels.team=a OR state=1", "labels.team:a*", ""):
        assert required_label(job_filter(text_)) is None, text_


def test_label_rows_are_written_and_removed_with_their_job(db: Database) -> None:
    store = JobStore(db)
    store.insert(CustomJobRow(**job_values(1, S.JOB_STATE_QUEUED, {"team": "a", "env": "p"}, second=0)))
    store.insert(CustomJobRow(**job_values(2, S.JOB_STATE_QUEUED, {}, second=1)))
    tuning = TuningStore(db)
    tuning.insert(TuningJobRow(**job_values(3, S.JOB_STATE_QUEUED, {"team": "a"}, second=2)))
    with db.session() as session:
        labels = session.execute(
            select(CustomJobLabelRow.job_id, CustomJobLabelRow.key, CustomJobLabelRow.value)
        )
        assert sorted(tuple(label) for label in labels) == [(1, "env", "p"), (1, "team", "a")]
        row = session.scalars(select(CustomJobLabelRow).where(CustomJobLabelRow.key == "team")).one()
        assert (row.project_number, row.location, row.create_time) == ("1", "l", BASE)
        assert session.scalars(select(TuningJobLabelRow.job_id)).all() == [3]
    assert [r.id for r in store.by_label("team", "a")] == [1]
    assert [r.id for r in tuning.by_label("team", "a")] == [3]
    store.remove(1)
    with db.session() as session:
        assert session.scalars(select(CustomJobLabelRow)).all() == []


def test_the_migration_copies_the_labels_of_the_jobs_stored_before_it(db: Database) -> None:
    config = alembic_config(db.url)
    with db.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0011")
    with db.engine.begin() as connection:
        connection.execute(insert(CustomJobRow.__table__), [job_values(7, S.JOB_STATE_QUEUED, {"k": "v"}, 0)])
    db.upgrade()
    with db.session() as session:
        rows = session.scalars(select(CustomJobLabelRow)).all()
    assert [(r.job_id, r.key, r.value, r.create_time) for r in rows] == [(7, "k", "v", BASE)]
    assert [r.id for r in JobStore(db).page("1", "l", job_filter("labels.k=v"), None, 10)] == [7]


def plan(db: Database, where: ColumnElement[bool] | None, after: tuple[Any, int] | None) -> str:
    """SQLite's query plan of a page of custom jobs, as the store builds it."""
    label = required_label(where)
    if label is None:
        rows = in_location(CustomJobRow, "1", "l", where)
        query = newest_first(rows, (CustomJobRow.create_time, CustomJobRow.id), after, 51)
    else:
        rows = labelled_in_location(CustomJobRow, CustomJobLabelRow, "1", "l", label, where)
        query = newest_first(rows, (CustomJobLabelRow.create_time, CustomJobLabelRow.job_id), after, 51)
    compiled = query.compile(db.engine)
    params = tuple(compiled.params[name] for name in compiled.positiontup or ())
    with db.engine.connect() as connection:
        found = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", params).fetchall()
    return "\n".join(str(row[3]) for row in found)


@pytest.mark.parametrize(
    ("filter_text", "indexes"),
    [
        ("", ["INDEX ix_custom_jobs_parent_created"]),
        ('display_name:"*x*"', ["INDEX ix_custom_jobs_parent_created"]),  # tested in the index
        ("state=JOB_STATE_QUEUED", ["INDEX ix_custom_jobs_parent_state"]),
        ("display_name=job-1", ["INDEX ix_custom_jobs_parent_name"]),
        ("labels.team=a", ["COVERING INDEX ix_custom_job_labels_seek"]),
        (
            "labels.team=a AND state=JOB_STATE_FAILED",
            ["COVERING INDEX ix_custom_job_labels_seek", "INDEX ix_custom_jobs_id_state (id=? AND state=?)"],
        ),
    ],
)
def test_sqlite_pages_seek_an_index_past_the_token(
    tmp_path: Any, filter_text: str, indexes: list[str]
) -> None:
    db = Database(f"sqlite:///{tmp_path / 'plan.db'}")
    try:
        where = job_filter(filter_text)
        for after in (None, (BASE, 5)):
            found = plan(db, where, after)
            assert all(f"USING {index}" in found for index in indexes), found
            assert "SCAN" not in found and "TEMP B-TREE" not in found, found  # no walk, no sort
            if after is not None:
                assert "<(?,?)" in found, found  # the token is part of the seek, not a filter on a walk
    finally:
        db.dispose()
