"""Trainworks extension: the costs report of a project and location (by job or by persistent resource)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from trainworks.kernel.params import query_param


def router() -> APIRouter:
    api = APIRouter(prefix="/trainworks/v1", tags=["extensions"])

    @api.get("/projects/{project}/locations/{location}/costs")
    def costs(project: str, location: str, request: Request) -> Any:
        """`?by=job|resource&filter=...`: machine-hours and approximate cost per row, and their totals."""
        return request.app.state.services.costs.report(
            project,
            location,
            query_param(request, "by", "by", "job"),
            query_param(request, "filter", "filter"),
        )

    return api
