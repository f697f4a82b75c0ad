"""The hyperparameterTuningJobs methods of the REST client."""

from __future__ import annotations

from collections.abc import Iterator

from trainworks.kernel.client import Client, JsonObject


class TuningJobsClient(Client):
    """hyperparameterTuningJobs (create is synchronous; delete returns the long-running Operation)."""

    def create_hyperparameter_tuning_job(self, parent: str, body: JsonObject) -> JsonObject:
        """Creates a tuning job (synchronous, like customJobs); returns the HyperparameterTuningJob."""
        return self._create(parent, "/hyperparameterTuningJobs", body)

    def get_hyperparameter_tuning_job(self, name: str) -> JsonObject:
        """The tuning job with its `trials` (only Get returns them)."""
        return self._get(name)

    def list_hyperparameter_tuning_jobs(
        self, parent: str, filter: str = "", page_size: int = 0, read_mask: str = ""
    ) -> Iterator[JsonObject]:
        """Every tuning job matching `filter`, newest first, fetching pages lazily; List omits `trials`."""
        params = {"filter": filter, "readMask": read_mask, "pageSize": page_size or None}
        return self._list(parent, "/hyperparameterTuningJobs", params)

    def cancel_hyperparameter_tuning_job(self, name: str) -> JsonObject:
        """Asks the job to stop (asynchronous); it ends JOB_STATE_CANCELLED with its trials cancelled."""
        return self._cancel(name)

    def delete_hyperparameter_tuning_job(self, name: str) -> JsonObject:
        """Starts the deletion of a finished job; returns the long-running Operation."""
        return self._delete(name)


__all__ = ["TuningJobsClient"]
