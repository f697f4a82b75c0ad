"""The trainingPipelines methods of the REST client."""

from __future__ import annotations

from collections.abc import Iterator

from trainworks.kernel.client import Client, JsonObject


class TrainingPipelinesClient(Client):
    """trainingPipelines (create is synchronous; delete returns the long-running Operation)."""

    def create_training_pipeline(self, parent: str, body: JsonObject) -> JsonObject:
        """Creates a pipeline (synchronous, like customJobs); returns the TrainingPipeline."""
        return self._create(parent, "/trainingPipelines", body)

    def get_training_pipeline(self, name: str) -> JsonObject:
        return self._get(name)

    def list_training_pipelines(
        self, parent: str, filter: str = "", page_size: int = 0
    ) -> Iterator[JsonObject]:
        """Every pipeline matching `filter`, newest first, fetching pages lazily."""
        return self._list(parent, "/trainingPipelines", {"filter": filter, "pageSize": page_size or None})

    def cancel_training_pipeline(self, name: str) -> JsonObject:
        """Asks the pipeline to stop (asynchronous); it cancels its training job and ends CANCELLED."""
        return self._cancel(name)

    def delete_training_pipeline(self, name: str) -> JsonObject:
        """Starts the deletion of a finished pipeline; returns the long-running Operation."""
        return self._delete(name)


__all__ = ["TrainingPipelinesClient"]
