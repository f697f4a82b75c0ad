"""The models methods of the REST client. A model name may end in `@VERSION_ID` or `@ALIAS` to address one
version; without it, the default version."""

from __future__ import annotations

from collections.abc import Iterator

from trainworks.kernel.client import Client, JsonObject


class ModelsClient(Client):
    """models: upload and the deletes return the long-running Operation; update is synchronous."""

    def upload_model(self, parent: str, body: JsonObject) -> JsonObject:
        """Uploads a model, or a new version with `parentModel` in `body`; returns the Operation (its
        response holds `model` and `modelVersionId`)."""
        return self._create(parent, "/models:upload", body)

    def get_model(self, name: str) -> JsonObject:
        return self._get(name)

    def list_models(
        self, parent: str, filter: str = "", order_by: str = "", page_size: int = 0
    ) -> Iterator[JsonObject]:
        """Every model matching `filter` (each as its default version), fetching pages lazily."""
        params = {"filter": filter, "orderBy": order_by, "pageSize": page_size or None}
        return self._list(parent, "/models", params)

    def list_model_versions(
        self, name: str, filter: str = "", order_by: str = "", page_size: int = 0
    ) -> Iterator[JsonObject]:
        """Every version of the model `name` matching `filter`, fetching pages lazily."""
        params = {"filter": filter, "orderBy": order_by, "pageSize": page_size or None}
        return self._list(name, ":listVersions", params, key="models")

    def update_model(self, name: str, body: JsonObject, update_mask: list[str]) -> JsonObject:
        """PATCH the fields named by `update_mask` of the version `name` addresses; returns the Model."""
        return self._patch(name, body, update_mask)

    def delete_model(self, name: str) -> JsonObject:
        """Starts deleting the model with all its versions; returns the long-running Operation."""
        return self._delete(name)

    def delete_model_version(self, name: str) -> JsonObject:
        """Starts deleting the version `name` (`MODEL@VERSION_ID` or `MODEL@ALIAS`) addresses; returns the
        long-running Operation."""
        return self._delete(name, ":deleteVersion")


__all__ = ["ModelsClient"]
