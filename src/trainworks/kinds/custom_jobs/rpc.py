"""gRPC of customJobs: the custom-job RPCs of JobService, v1 and v1beta1, each answered by the method of the
REST route (routes.py's CUSTOM_JOBS) with the arguments that route passes (kernel/rpc.py)."""

from __future__ import annotations

from trainworks.kernel.rpc import Binding, Route, bind_vertex
from trainworks.kinds.custom_jobs.routes import CUSTOM_JOBS
from trainworks.kinds.custom_jobs.service import CustomJobService

# RPC -> the REST route (its name in CUSTOM_JOBS), and the request field the REST body is.
ROUTES = {
    "CreateCustomJob": Route("create", body="custom_job"),
    "ListCustomJobs": Route("list_"),
    "GetCustomJob": Route("get"),
    "CancelCustomJob": Route("cancel"),
    "DeleteCustomJob": Route("delete"),
}


def bindings(custom_jobs: CustomJobService) -> list[Binding]:
    return bind_vertex(CUSTOM_JOBS, custom_jobs, "JobService", ROUTES)
