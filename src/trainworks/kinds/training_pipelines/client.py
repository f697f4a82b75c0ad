"""The trainingPipelines methods of the REST client."""

from __future__ import annotations

from collections.abc import Iterator

from trainworks.kernel.client import Client, JsonObject
from trainworks.kernel.longrunning import Operation
from trainworks.kinds.training_pipelines.wire import TrainingPipeline


class TrainingPipelinesClient(Client):
    """trainingPipelines (create is synchronous; delete returns the long-running Operation)."""

    def create_training_pipeline(self, parent: str, body: JsonObject) -> TrainingPipeline:
        """Creates a pipeline (synchronous, like customJobs); returns the TrainingPipeline."""
        return self._create(TrainingPipeline, parent, "/trainingPipelines", body)

    def get_training_pipeline(self, name: str) -> TrainingPipeline:
        return self._get(TrainingPipeline, name)

    def list_training_pipelines(
        self, parent: str, filter: str = "", page_size: int = 0
    ) -> Iterator[TrainingPipeline]:
        """Every pipeline matching `filter`, newest first, fetching pages lazily."""
        return self._list(TrainingPipeline, parent, "/trainingPipelines", page_size, {"filter": filter})

    def cancel_training_pipeline(self, name: str) -> None:
        """Asks the pipeline to stop (asynchronous); it cancels its training job and ends CANCELLED."""
        self._cancel(name)

    def delete_training_pipeline(self, name: str) -> Operation:
        """Starts the deletion of a finished pipeline; returns the long-running Operation."""
        return self._delete(name)


__all__ = ["TrainingPipelinesClient"]
