"""The persistentResources methods of the REST client: every change is a long-running Operation."""

from __future__ import annotations

from collections.abc import Iterator

from trainworks.kernel.client import Client, JsonObject


class PersistentResourcesClient(Client):
    """persistentResources: create, update, reboot and delete return the long-running Operation."""

    def create_persistent_resource(self, parent: str, resource_id: str, body: JsonObject) -> JsonObject:
        """Starts creating `parent`/persistentResources/`resource_id`; returns the long-running Operation."""
        return self._create(
            parent, "/persistentResources", body, params={"persistentResourceId": resource_id}
        )

    def get_persistent_resource(self, name: str) -> JsonObject:
        return self._get(name)

    def list_persistent_resources(self, parent: str, page_size: int = 0) -> Iterator[JsonObject]:
        """Every persistent resource of `parent` in ID order, fetching pages lazily (no filter, as in v1)."""
        return self._list(parent, "/persistentResources", {"pageSize": page_size or None})

    def update_persistent_resource(self, name: str, body: JsonObject, update_mask: list[str]) -> JsonObject:
        """PATCH the fields named by `update_mask` (snake_case paths); returns the long-running Operation."""
        return self._patch(name, body, update_mask)

    def reboot_persistent_resource(self, name: str) -> JsonObject:
        """Starts a reboot (from RUNNING or ERROR); returns the long-running Operation."""
        return self._verb(name, "reboot")

    def delete_persistent_resource(self, name: str) -> JsonObject:
        """Starts the deletion (from any state); returns the long-running Operation."""
        return self._delete(name)


__all__ = ["PersistentResourcesClient"]
