"""gRPC of trainingPipelines: the training-pipeline RPCs of PipelineService, v1 and v1beta1, each answered
by the method of the REST route (routes.py's TRAINING_PIPELINES) with the arguments that route passes
(kernel/rpc.py). PipelineService's pipeline jobs are not served (no REST routes either)."""

from __future__ import annotations

from trainworks.kernel.rpc import Binding, Route, bind_vertex
from trainworks.kinds.training_pipelines.routes import TRAINING_PIPELINES
from trainworks.kinds.training_pipelines.service import TrainingPipelineService

# RPC -> the REST route (its name in TRAINING_PIPELINES), and the request field the REST body is.
ROUTES = {
    "CreateTrainingPipeline": Route("create", body="training_pipeline"),
    "ListTrainingPipelines": Route("list_"),
    "GetTrainingPipeline": Route("get"),
    "CancelTrainingPipeline": Route("cancel"),
    "DeleteTrainingPipeline": Route("delete"),
}


def bindings(pipelines: TrainingPipelineService) -> list[Binding]:
    return bind_vertex(TRAINING_PIPELINES, pipelines, "PipelineService", ROUTES)
