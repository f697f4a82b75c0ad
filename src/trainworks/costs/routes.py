"""Trainworks extension: the costs report of a project and location (by job or by persistent resource)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from trainworks.api.state import services
from trainworks.kernel.params import query_param
from trainworks.kernel.routes import JsonObject


def router() -> APIRouter:
    api = APIRouter(prefix="/trainworks/v1", tags=["extensions"])

    @api.get("/projects/{project}/locations/{location}/costs")
    def costs(project: str, location: str, request: Request) -> JsonObject:
        """`?by=job|resource&filter=...`: machine-hours and approximate cost per row, and their totals."""
        return services(request).costs.report(
            project,
            location,
            query_param(request, "by", "by", "job"),
            query_param(request, "filter", "filter"),
        )

    return api
