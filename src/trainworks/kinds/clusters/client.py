"""The modelDevelopmentClusters methods of the REST client. The resource exists only in v1beta1; its
operations are location-level and poll under /v1 (`Client.wait_operation`)."""

from __future__ import annotations

from collections.abc import Iterator

from trainworks.kernel.client import V1BETA1, Client, JsonObject


class ClustersClient(Client):
    """modelDevelopmentClusters (v1beta1): create, update and delete return the long-running Operation."""

    def create_cluster(self, parent: str, cluster_id: str, body: JsonObject) -> JsonObject:
        """Starts creating `parent`/modelDevelopmentClusters/`cluster_id`; returns the Operation."""
        params = {"modelDevelopmentClusterId": cluster_id}
        return self._create(parent, "/modelDevelopmentClusters", body, api=V1BETA1, params=params)

    def get_cluster(self, name: str) -> JsonObject:
        return self._get(name, api=V1BETA1)

    def list_clusters(self, parent: str, page_size: int = 0) -> Iterator[JsonObject]:
        """Every training cluster of `parent` in ID order, fetching pages lazily."""
        return self._list(parent, "/modelDevelopmentClusters", {"pageSize": page_size or None}, api=V1BETA1)

    def update_cluster(
        self, name: str, body: JsonObject, update_mask: list[str], update_mode: str = ""
    ) -> JsonObject:
        """PATCH with the full resource as `body` (an empty mask diffs all of it); returns the Operation."""
        return self._patch(name, body, update_mask, api=V1BETA1, params={"updateMode": update_mode})

    def delete_cluster(self, name: str) -> JsonObject:
        """Starts the deletion; returns the long-running Operation."""
        return self._delete(name, api=V1BETA1)


__all__ = ["ClustersClient"]
