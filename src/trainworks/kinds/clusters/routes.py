"""REST routes of v1beta1 modelDevelopmentClusters (training clusters): every change is an LRO."""

from __future__ import annotations

from fastapi import APIRouter, Request

from trainworks.api.state import required, services
from trainworks.kernel.routes import (
    BODY,
    PAGE,
    UPDATE_MASK,
    Collection,
    Query,
    create,
    delete,
    get,
    list_,
    update,
)
from trainworks.kinds.clusters.service import ClusterService


def _service(request: Request) -> ClusterService:
    return required(services(request).clusters)


CLUSTERS = Collection(
    "modelDevelopmentClusters",
    "cluster_id",
    _service,
    [
        create(
            ClusterService.create, Query("modelDevelopmentClusterId", "model_development_cluster_id"), BODY
        ),
        list_(ClusterService.list, *PAGE),
        get(ClusterService.get),
        update(ClusterService.update, BODY, UPDATE_MASK, Query("updateMode", "update_mode")),
        delete(ClusterService.delete),
    ],
)


def router(prefix: str = "/v1beta1") -> APIRouter:
    return CLUSTERS.router(prefix)
