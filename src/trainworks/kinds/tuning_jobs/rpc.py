"""gRPC of hyperparameterTuningJobs: the tuning-job RPCs of JobService, v1 and v1beta1, each answered by the
method of the REST route (routes.py's TUNING_JOBS) with the arguments that route passes (kernel/rpc.py)."""

from __future__ import annotations

from trainworks.kernel.rpc import Binding, bind_vertex, job_routes
from trainworks.kinds.tuning_jobs.routes import TUNING_JOBS
from trainworks.kinds.tuning_jobs.service import TuningJobService

# Create, List, Get, Cancel and Delete: each RPC answered by the route of the same name in TUNING_JOBS.
ROUTES = job_routes("HyperparameterTuningJob", "HyperparameterTuningJobs", body="hyperparameter_tuning_job")


def bindings(tuning_jobs: TuningJobService) -> list[Binding]:
    return bind_vertex(TUNING_JOBS, tuning_jobs, "JobService", ROUTES)
