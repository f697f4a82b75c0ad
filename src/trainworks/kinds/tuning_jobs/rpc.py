"""gRPC of hyperparameterTuningJobs: the tuning-job RPCs of JobService, v1 and v1beta1, each answered by the
method of the REST route (routes.py's TUNING_JOBS) with the arguments that route passes (kernel/rpc.py)."""

from __future__ import annotations

from trainworks.kernel.rpc import Binding, Route, bind_vertex
from trainworks.kinds.tuning_jobs.routes import TUNING_JOBS
from trainworks.kinds.tuning_jobs.service import TuningJobService

# RPC -> the REST route (its name in TUNING_JOBS), and the request field the REST body is.
ROUTES = {
    "CreateHyperparameterTuningJob": Route("create", body="hyperparameter_tuning_job"),
    "ListHyperparameterTuningJobs": Route("list_"),
    "GetHyperparameterTuningJob": Route("get"),
    "CancelHyperparameterTuningJob": Route("cancel"),
    "DeleteHyperparameterTuningJob": Route("delete"),
}


def bindings(tuning_jobs: TuningJobService) -> list[Binding]:
    return bind_vertex(TUNING_JOBS, tuning_jobs, "JobService", ROUTES)
