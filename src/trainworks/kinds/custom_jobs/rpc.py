"""gRPC of customJobs: the custom-job RPCs of JobService, v1 and v1beta1, each answered by the method of the
REST route (routes.py's CUSTOM_JOBS) with the arguments that route passes (kernel/rpc.py)."""

from __future__ import annotations

from trainworks.kernel.rpc import Binding, bind_vertex, job_routes
from trainworks.kinds.custom_jobs.routes import CUSTOM_JOBS
from trainworks.kinds.custom_jobs.service import CustomJobService

# Create, List, Get, Cancel and Delete: each RPC answered by the route of the same name in CUSTOM_JOBS.
ROUTES = job_routes("CustomJob", "CustomJobs", body="custom_job")


def bindings(custom_jobs: CustomJobService) -> list[Binding]:
    return bind_vertex(CUSTOM_JOBS, custom_jobs, "JobService", ROUTES)
