"""Repository for training pipelines (the job-table helpers: pages, active rows, compare-and-set)."""

from __future__ import annotations

from sqlalchemy import select

from trainworks.jobs.store import JobRows
from trainworks.store.tables import ModelVersionRow, TrainingPipelineRow


class TrainingPipelineStore(JobRows[TrainingPipelineRow]):
    """Training pipelines; their states share JobState's numbers."""

    row = TrainingPipelineRow

    def uploaded_version(self, pipeline_name: str) -> ModelVersionRow | None:
        """The model version a pipeline registered already (so a restart never uploads it twice)."""
        with self.db.session() as session:
            return session.scalars(
                select(ModelVersionRow)
                .where(ModelVersionRow.training_pipeline == pipeline_name)
                .order_by(ModelVersionRow.id)
                .limit(1)
            ).first()
