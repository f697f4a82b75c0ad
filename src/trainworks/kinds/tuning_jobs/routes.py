"""REST routes of hyperparameterTuningJobs (v1 and v1beta1)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from trainworks.api.state import required, services
from trainworks.kernel.routes import API_VERSION, BODY, LIST, Collection, cancel, create, delete, get, list_
from trainworks.kinds.tuning_jobs.service import TuningJobService


def _service(request: Request) -> TuningJobService:
    return required(services(request).tuning_jobs)


TUNING_JOBS = Collection(
    "hyperparameterTuningJobs",
    "job_id",
    _service,
    [
        create(TuningJobService.create, BODY),
        list_(TuningJobService.list, *LIST),
        get(TuningJobService.get),
        cancel(TuningJobService.cancel),
        delete(TuningJobService.delete, API_VERSION),
    ],
)


def router(prefix: str) -> APIRouter:
    return TUNING_JOBS.router(prefix)
