"""The persistentResources methods of the REST client: every change is a long-running Operation."""

from __future__ import annotations

from collections.abc import Iterator

from trainworks.kernel.client import Client, JsonObject
from trainworks.kernel.longrunning import Operation
from trainworks.kinds.persistent_resources.wire import PersistentResource


class PersistentResourcesClient(Client):
    """persistentResources: create, update, reboot and delete return the long-running Operation."""

    def create_persistent_resource(self, parent: str, resource_id: str, body: JsonObject) -> Operation:
        """Starts creating `parent`/persistentResources/`resource_id`; returns the long-running Operation."""
        params = {"persistentResourceId": resource_id}
        return self._create(Operation, parent, "/persistentResources", body, params=params)

    def get_persistent_resource(self, name: str) -> PersistentResource:
        return self._get(PersistentResource, name)

    def list_persistent_resources(self, parent: str, page_size: int = 0) -> Iterator[PersistentResource]:
        """Every persistent resource of `parent` in ID order, fetching pages lazily (no filter, as in v1)."""
        return self._list(PersistentResource, parent, "/persistentResources", page_size)

    def update_persistent_resource(self, name: str, body: JsonObject, update_mask: list[str]) -> Operation:
        """PATCH the fields named by `update_mask` (snake_case paths); returns the long-running Operation."""
        return self._patch(Operation, name, body, update_mask)

    def reboot_persistent_resource(self, name: str) -> Operation:
        """Starts a reboot (from RUNNING or ERROR); returns the long-running Operation."""
        return self._operation_verb(name, "reboot")

    def delete_persistent_resource(self, name: str) -> Operation:
        """Starts the deletion (from any state); returns the long-running Operation."""
        return self._delete(name)


__all__ = ["PersistentResourcesClient"]
