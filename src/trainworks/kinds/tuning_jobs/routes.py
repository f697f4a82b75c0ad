"""REST routes of hyperparameterTuningJobs (v1 and v1beta1)."""

from __future__ import annotations

from trainworks.api.state import required, services
from trainworks.kernel.routes import Collection, job_methods
from trainworks.kinds.tuning_jobs.service import TuningJobService

TUNING_JOBS = Collection(
    "hyperparameterTuningJobs",
    "job_id",
    lambda request: required(services(request).tuning_jobs),
    job_methods(TuningJobService),
)
