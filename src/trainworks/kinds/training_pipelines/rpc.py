"""gRPC of trainingPipelines: the training-pipeline RPCs of PipelineService, v1 and v1beta1, each answered
by the method of the REST route (routes.py's TRAINING_PIPELINES) with the arguments that route passes
(kernel/rpc.py). PipelineService's pipeline jobs are not served (no REST routes either)."""

from __future__ import annotations

from trainworks.kernel.rpc import Binding, bind_vertex, job_routes
from trainworks.kinds.training_pipelines.routes import TRAINING_PIPELINES
from trainworks.kinds.training_pipelines.service import TrainingPipelineService

# Create, List, Get, Cancel and Delete: each RPC answered by the route of the same name in TRAINING_PIPELINES.
ROUTES = job_routes("TrainingPipeline", "TrainingPipelines", body="training_pipeline")


def bindings(pipelines: TrainingPipelineService) -> list[Binding]:
    return bind_vertex(TRAINING_PIPELINES, pipelines, "PipelineService", ROUTES)
