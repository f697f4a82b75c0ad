"""REST routes of v1beta1 modelDevelopmentClusters (training clusters): every change is an LRO."""

from __future__ import annotations

from trainworks.api.state import required, services
from trainworks.kernel.routes import BODY, PAGE, UPDATE_MASK, Collection, Query, lro_methods
from trainworks.kinds.clusters.service import ClusterService

CLUSTERS = Collection(
    "modelDevelopmentClusters",
    "cluster_id",
    lambda request: required(services(request).clusters),
    lro_methods(
        ClusterService,
        create_args=(Query("modelDevelopmentClusterId", "model_development_cluster_id"), BODY),
        list_args=PAGE,
        update_args=(BODY, UPDATE_MASK, Query("updateMode", "update_mode")),
        delete_args=(),
    ),
)
