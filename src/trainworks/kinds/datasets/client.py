"""The datasets methods of the REST client."""

from __future__ import annotations

from collections.abc import Iterator

from trainworks.kernel.client import Client, JsonObject


class DatasetsClient(Client):
    """datasets: create, import and delete return the long-running Operation; update is synchronous."""

    def create_dataset(self, parent: str, body: JsonObject) -> JsonObject:
        """Starts creating a Dataset; returns the long-running Operation (its response is the Dataset)."""
        return self._create(parent, "/datasets", body)

    def import_data(self, name: str, import_configs: list[JsonObject]) -> JsonObject:
        """Starts importing items (`[{"gcsSource": {"uris": [...]}}, ...]`); returns the Operation."""
        return self._verb(name, "import", {"importConfigs": import_configs})

    def get_dataset(self, name: str, read_mask: str = "") -> JsonObject:
        return self._get(name, params={"readMask": read_mask})

    def list_datasets(
        self, parent: str, filter: str = "", page_size: int = 0, order_by: str = ""
    ) -> Iterator[JsonObject]:
        """Every dataset matching `filter`, newest first unless `order_by` says otherwise, fetching pages
        lazily."""
        params = {"filter": filter, "orderBy": order_by, "pageSize": page_size or None}
        return self._list(parent, "/datasets", params)

    def update_dataset(self, name: str, body: JsonObject, update_mask: list[str]) -> JsonObject:
        """PATCH the fields named by `update_mask`; returns the updated Dataset."""
        return self._patch(name, body, update_mask)

    def delete_dataset(self, name: str) -> JsonObject:
        """Starts the deletion of the dataset and its data; returns the long-running Operation."""
        return self._delete(name)


__all__ = ["DatasetsClient"]
