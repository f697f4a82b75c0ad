"""Repository for training pipelines (the job-table helpers: pages, active rows, compare-and-set)."""

from __future__ import annotations

from sqlalchemy import delete, select

from trainworks.jobs.store import JobRows
from trainworks.store.tables import ModelVersionRow, TrainingPipelineRow, TuningJobRow


class TrainingPipelineStore(JobRows[TrainingPipelineRow]):
    """Training pipelines; their states share JobState's numbers."""

    row = TrainingPipelineRow

    def remove(self, pipeline_id: int, finish_operation: int | None = None) -> None:
        """Remove the pipeline; complete its delete operation in the same transaction."""
        with self.db.session() as session:
            session.execute(delete(TrainingPipelineRow).where(TrainingPipelineRow.id == pipeline_id))
            self.finish_delete_in(session, finish_operation)

    def tuning_jobs_by_label(self, key: str, value: str) -> list[TuningJobRow]:
        """Tuning jobs labelled key=value (the one backing a pipeline, found again after a crash)."""
        with self.db.session() as session:
            return list(
                session.scalars(select(TuningJobRow).where(TuningJobRow.labels[key].as_string() == value))
            )

    def uploaded_version(self, pipeline_name: str) -> ModelVersionRow | None:
        """The model version a pipeline registered already (so a restart never uploads it twice)."""
        with self.db.session() as session:
            return session.scalars(
                select(ModelVersionRow)
                .where(ModelVersionRow.training_pipeline == pipeline_name)
                .order_by(ModelVersionRow.id)
                .limit(1)
            ).first()
