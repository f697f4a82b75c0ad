"""Trainworks extension: a custom job's TensorBoard log directory (`trainworks tensorboard NAME` reads it)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from trainworks.api.state import services
from trainworks.kernel.routes import JsonObject
from trainworks.observability.log_dirs import tensorboard_log_dir

PARENT = "/projects/{project}/locations/{location}/customJobs"


def router() -> APIRouter:
    api = APIRouter(prefix="/trainworks/v1", tags=["extensions"])

    @api.get(PARENT + "/{job_id}/tensorboard")
    def tensorboard(project: str, location: str, job_id: str, request: Request) -> JsonObject:
        wired = services(request)
        return tensorboard_log_dir(wired.custom_jobs.get(project, location, job_id), wired.settings)

    return api
