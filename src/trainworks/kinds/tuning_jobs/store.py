"""Repository for hyperparameter tuning jobs and their trials."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from trainworks.jobs.store import JobRows
from trainworks.store.tables import TuningJobRow, TuningTrialRow


class TuningStore(JobRows[TuningJobRow]):
    """Hyperparameter tuning jobs and their trials."""

    row = TuningJobRow

    def remove(self, job_id: int, finish_operation: int | None = None) -> None:
        """Remove the job and its trials; complete its delete operation in the same transaction, so a crash
        cannot leave the job gone and its operation never done."""
        with self.db.session() as session:
            session.execute(delete(TuningTrialRow).where(TuningTrialRow.tuning_job_id == job_id))
            session.execute(delete(TuningJobRow).where(TuningJobRow.id == job_id))
            self.finish_delete_in(session, finish_operation)

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
