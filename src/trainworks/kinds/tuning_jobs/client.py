"""The hyperparameterTuningJobs methods of the REST client."""

from __future__ import annotations

from collections.abc import Iterator

from trainworks.kernel.client import Client, JsonObject
from trainworks.kernel.longrunning import Operation
from trainworks.kinds.tuning_jobs.wire import HyperparameterTuningJob


class TuningJobsClient(Client):
    """hyperparameterTuningJobs (create is synchronous; delete returns the long-running Operation)."""

    def create_hyperparameter_tuning_job(self, parent: str, body: JsonObject) -> HyperparameterTuningJob:
        """Creates a tuning job (synchronous, like customJobs); returns the HyperparameterTuningJob."""
        return self._create(HyperparameterTuningJob, parent, "/hyperparameterTuningJobs", body)

    def get_hyperparameter_tuning_job(self, name: str) -> HyperparameterTuningJob:
        """The tuning job with its `trials` (only Get returns them)."""
        return self._get(HyperparameterTuningJob, name)

    def list_hyperparameter_tuning_jobs(
        self, parent: str, filter: str = "", page_size: int = 0, read_mask: str = ""
    ) -> Iterator[HyperparameterTuningJob]:
        """Every tuning job matching `filter`, newest first, fetching pages lazily; List omits `trials`."""
        params = {"filter": filter, "readMask": read_mask}
        return self._list(HyperparameterTuningJob, parent, "/hyperparameterTuningJobs", page_size, params)

    def cancel_hyperparameter_tuning_job(self, name: str) -> None:
        """Asks the job to stop (asynchronous); it ends JOB_STATE_CANCELLED with its trials cancelled."""
        self._cancel(name)

    def delete_hyperparameter_tuning_job(self, name: str) -> Operation:
        """Starts the deletion of a finished job; returns the long-running Operation."""
        return self._delete(name)


__all__ = ["TuningJobsClient"]
