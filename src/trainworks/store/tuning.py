"""Repository for hyperparameter tuning jobs and their trials."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, or_, select, update
from sqlalchemy.exc import IntegrityError

from trainworks.resources.enums import JobState
from trainworks.resources.wire import now_utc
from trainworks.store.database import Database
from trainworks.store.tables import TuningJobRow, TuningTrialRow


class TuningStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -------------------------------------------------------------- jobs
    def insert(self, row: TuningJobRow) -> TuningJobRow:
        with self.db.session() as session:
            session.add(row)
        return row

    def get(
        self, job_id: int, project_number: str | None = None, location: str | None = None
    ) -> TuningJobRow | None:
        with self.db.session() as session:
            row = session.get(TuningJobRow, job_id)
        if row is None or (project_number is not None and row.project_number != project_number):
            return None
        if location is not None and row.location != location:
            return None
        return row

    def page(
        self,
        project_number: str,
        location: str,
        where: ColumnElement[bool] | None,
        after: tuple[datetime, int] | None,
        limit: int,
    ) -> list[TuningJobRow]:
        query = select(TuningJobRow).where(
            TuningJobRow.project_number == project_number, TuningJobRow.location == location
        )
        if where is not None:
            query = query.where(where)
        if after is not None:
            created, job_id = after
            query = query.where(
                or_(
                    TuningJobRow.create_time < created,
                    and_(TuningJobRow.create_time == created, TuningJobRow.id < job_id),
                )
            )
        query = query.order_by(TuningJobRow.create_time.desc(), TuningJobRow.id.desc()).limit(limit)
        with self.db.session() as session:
            return list(session.scalars(query))

    def active(self) -> list[TuningJobRow]:
        states = [
            int(JobState.JOB_STATE_QUEUED),
            int(JobState.JOB_STATE_PENDING),
            int(JobState.JOB_STATE_RUNNING),
            int(JobState.JOB_STATE_CANCELLING),
        ]
        with self.db.session() as session:
            return list(
                session.scalars(
                    select(TuningJobRow)
                    .where(or_(TuningJobRow.state.in_(states), TuningJobRow.delete_operation_id.is_not(None)))
                    .order_by(TuningJobRow.create_time)
                )
            )

    def transition(self, job_id: int, from_states: Iterable[JobState], **values: Any) -> bool:
        values.setdefault("update_time", now_utc())
        if "state" in values:
            values["state"] = int(values["state"])
        with self.db.session() as session:
            result = session.execute(
                update(TuningJobRow)
                .where(TuningJobRow.id == job_id, TuningJobRow.state.in_([int(s) for s in from_states]))
                .values(**values)
            )
            return bool(result.rowcount)

    def set_fields(self, job_id: int, **values: Any) -> None:
        with self.db.session() as session:
            session.execute(update(TuningJobRow).where(TuningJobRow.id == job_id).values(**values))

    def remove(self, job_id: int) -> None:
        with self.db.session() as session:
            session.execute(delete(TuningTrialRow).where(TuningTrialRow.tuning_job_id == job_id))
            session.execute(delete(TuningJobRow).where(TuningJobRow.id == job_id))

    # -------------------------------------------------------------- trials
    def trials(self, job_id: int) -> list[TuningTrialRow]:
        with self.db.session() as session:
            return list(
                session.scalars(
                    select(TuningTrialRow)
                    .where(TuningTrialRow.tuning_job_id == job_id)
                    .order_by(TuningTrialRow.trial_id)
                )
            )

    def add_trial(self, row: TuningTrialRow) -> bool:
        """False when this trial (or this study trial number) is recorded already."""
        try:
            with self.db.session() as session:
                session.add(row)
        except IntegrityError:
            return False
        return True

    def update_trial(self, trial_row_id: int, **values: Any) -> None:
        with self.db.session() as session:
            session.execute(update(TuningTrialRow).where(TuningTrialRow.id == trial_row_id).values(**values))
