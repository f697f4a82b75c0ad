"""REST routes of trainingPipelines (v1 and v1beta1), as PipelineServiceClient's REST transport calls them."""

from __future__ import annotations

from fastapi import APIRouter, Request

from trainworks.api.state import required, services
from trainworks.kernel.routes import API_VERSION, BODY, LIST, Collection, cancel, create, delete, get, list_
from trainworks.kinds.training_pipelines.service import TrainingPipelineService


def _service(request: Request) -> TrainingPipelineService:
    return required(services(request).training_pipelines)


TRAINING_PIPELINES = Collection(
    "trainingPipelines",
    "pipeline_id",
    _service,
    [
        create(TrainingPipelineService.create, BODY),
        list_(TrainingPipelineService.list, *LIST),
        get(TrainingPipelineService.get),
        cancel(TrainingPipelineService.cancel),
        delete(TrainingPipelineService.delete, API_VERSION),
    ],
)


def router(prefix: str) -> APIRouter:
    return TRAINING_PIPELINES.router(prefix)
