"""Repository for hyperparameter tuning jobs and their trials."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from trainworks.jobs.store import JobRows
from trainworks.store.tables import TuningJobRow, TuningTrialRow


class TuningStore(JobRows[TuningJobRow]):
    """Hyperparameter tuning jobs and their trials."""

    row = TuningJobRow

    def _remove_owned_in(self, session: Session, job_id: int) -> None:
        session.execute(delete(TuningTrialRow).where(TuningTrialRow.tuning_job_id == job_id))

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
