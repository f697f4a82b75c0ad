"""REST routes of trainingPipelines (v1 and v1beta1), as PipelineServiceClient's REST transport calls them."""

from __future__ import annotations

from trainworks.api.state import required, services
from trainworks.kernel.routes import Collection, job_methods
from trainworks.kinds.training_pipelines.service import TrainingPipelineService

TRAINING_PIPELINES = Collection(
    "trainingPipelines",
    "pipeline_id",
    lambda request: required(services(request).training_pipelines),
    job_methods(TrainingPipelineService),
)
