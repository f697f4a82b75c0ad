"""The models methods of the REST client. A model name may end in `@VERSION_ID` or `@ALIAS` to address one
version; without it, the default version."""

from __future__ import annotations

from collections.abc import Iterator

from trainworks.kernel.client import Client, JsonObject
from trainworks.kernel.longrunning import Operation
from trainworks.kinds.models.wire import Model


class ModelsClient(Client):
    """models: upload and the deletes return the long-running Operation; update is synchronous."""

    def upload_model(self, parent: str, body: JsonObject) -> Operation:
        """Uploads a model, or a new version with `parentModel` in `body`; returns the Operation (its
        response holds `model` and `modelVersionId`)."""
        return self._create(Operation, parent, "/models:upload", body)

    def get_model(self, name: str) -> Model:
        return self._get(Model, name)

    def list_models(
        self, parent: str, filter: str = "", order_by: str = "", page_size: int = 0
    ) -> Iterator[Model]:
        """Every model matching `filter` (each as its default version), fetching pages lazily."""
        return self._list(Model, parent, "/models", page_size, {"filter": filter, "orderBy": order_by})

    def list_model_versions(
        self, name: str, filter: str = "", order_by: str = "", page_size: int = 0
    ) -> Iterator[Model]:
        """Every version of the model `name` matching `filter`, fetching pages lazily."""
        params = {"filter": filter, "orderBy": order_by}
        return self._list(Model, name, ":listVersions", page_size, params, key="models")

    def update_model(self, name: str, body: JsonObject, update_mask: list[str]) -> Model:
        """PATCH the fields named by `update_mask` of the version `name` addresses; returns the Model."""
        return self._patch(Model, name, body, update_mask)

    def delete_model(self, name: str) -> Operation:
        """Starts deleting the model with all its versions; returns the long-running Operation."""
        return self._delete(name)

    def delete_model_version(self, name: str) -> Operation:
        """Starts deleting the version `name` (`MODEL@VERSION_ID` or `MODEL@ALIAS`) addresses; returns the
        long-running Operation."""
        return self._delete(name, ":deleteVersion")


__all__ = ["ModelsClient"]
