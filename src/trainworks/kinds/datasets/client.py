"""The datasets methods of the REST client."""

from __future__ import annotations

from collections.abc import Iterator

from trainworks.kernel.client import Client, JsonObject
from trainworks.kernel.longrunning import Operation
from trainworks.kinds.datasets.wire import Dataset


class DatasetsClient(Client):
    """datasets: create, import and delete return the long-running Operation; update is synchronous."""

    def create_dataset(self, parent: str, body: JsonObject) -> Operation:
        """Starts creating a Dataset; returns the long-running Operation (its response is the Dataset)."""
        return self._create(Operation, parent, "/datasets", body)

    def import_data(self, name: str, import_configs: list[JsonObject]) -> Operation:
        """Starts importing items (`[{"gcsSource": {"uris": [...]}}, ...]`); returns the Operation."""
        return self._operation_verb(name, "import", {"importConfigs": import_configs})

    def get_dataset(self, name: str, read_mask: str = "") -> Dataset:
        return self._get(Dataset, name, params={"readMask": read_mask})

    def list_datasets(
        self, parent: str, filter: str = "", page_size: int = 0, order_by: str = ""
    ) -> Iterator[Dataset]:
        """Every dataset matching `filter`, newest first unless `order_by` says otherwise, fetching pages
        lazily."""
        return self._list(Dataset, parent, "/datasets", page_size, {"filter": filter, "orderBy": order_by})

    def update_dataset(self, name: str, body: JsonObject, update_mask: list[str]) -> Dataset:
        """PATCH the fields named by `update_mask`; returns the updated Dataset."""
        return self._patch(Dataset, name, body, update_mask)

    def delete_dataset(self, name: str) -> Operation:
        """Starts the deletion of the dataset and its data; returns the long-running Operation."""
        return self._delete(name)


__all__ = ["DatasetsClient"]
