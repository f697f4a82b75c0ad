"""The modelDevelopmentClusters methods of the REST client. The resource exists only in v1beta1; its
operations are location-level and poll under /v1 (`Client.wait_operation`)."""

from __future__ import annotations

from collections.abc import Iterator

from trainworks.kernel.client import V1BETA1, Client, JsonObject
from trainworks.kernel.longrunning import Operation
from trainworks.kinds.clusters.wire import ModelDevelopmentCluster


class ClustersClient(Client):
    """modelDevelopmentClusters (v1beta1): create, update and delete return the long-running Operation."""

    def create_cluster(self, parent: str, cluster_id: str, body: JsonObject) -> Operation:
        """Starts creating `parent`/modelDevelopmentClusters/`cluster_id`; returns the Operation."""
        params = {"modelDevelopmentClusterId": cluster_id}
        return self._create(Operation, parent, "/modelDevelopmentClusters", body, api=V1BETA1, params=params)

    def get_cluster(self, name: str) -> ModelDevelopmentCluster:
        return self._get(ModelDevelopmentCluster, name, api=V1BETA1)

    def list_clusters(self, parent: str, page_size: int = 0) -> Iterator[ModelDevelopmentCluster]:
        """Every training cluster of `parent` in ID order, fetching pages lazily."""
        collection = "/modelDevelopmentClusters"
        return self._list(ModelDevelopmentCluster, parent, collection, page_size, api=V1BETA1)

    def update_cluster(
        self, name: str, body: JsonObject, update_mask: list[str], update_mode: str = ""
    ) -> Operation:
        """PATCH with the full resource as `body` (an empty mask diffs all of it); returns the Operation."""
        params = {"updateMode": update_mode}
        return self._patch(Operation, name, body, update_mask, api=V1BETA1, params=params)

    def delete_cluster(self, name: str) -> Operation:
        """Starts the deletion; returns the long-running Operation."""
        return self._delete(name, api=V1BETA1)


__all__ = ["ClustersClient"]
