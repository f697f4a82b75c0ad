"""Trainworks extension: the capacity and quota preflight of a project and location."""

from __future__ import annotations

from fastapi import APIRouter, Request

from trainworks.api.state import required, services
from trainworks.kernel.params import query_param
from trainworks.kernel.routes import JsonObject


def router() -> APIRouter:
    api = APIRouter(prefix="/trainworks/v1", tags=["extensions"])

    @api.get("/projects/{project}/locations/{location}/capacity")
    def capacity(project: str, location: str, request: Request) -> JsonObject:
        """`?machineType=&acceleratorType=&acceleratorCount=`: the region's stock-out flag, the project's
        quota, free machines per zone and, for a machine shape, how many replicas of it could start now."""
        return required(services(request).capacity).report(
            project,
            location,
            query_param(request, "machineType", "machine_type"),
            query_param(request, "acceleratorType", "accelerator_type"),
            query_param(request, "acceleratorCount", "accelerator_count"),
        )

    return api
