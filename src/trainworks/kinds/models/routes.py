"""REST routes of the model registry (v1 and v1beta1), as the official ModelServiceClient calls them.

A model path segment may carry `@VERSION` or `@ALIAS`. The `:verb` routes are registered before the plain
ones, since `{model}` would otherwise swallow `ID:listVersions`.
"""

from __future__ import annotations

from trainworks.api.state import required, services
from trainworks.kernel.routes import (
    API_VERSION,
    BODY,
    LIST_QUERY,
    UPDATE_MASK,
    Collection,
    delete,
    get,
    list_,
    update,
    verb,
)
from trainworks.kinds.models.service import ModelService

MODELS = Collection(
    "models",
    "model",
    lambda request: required(services(request).models),
    [
        # Copying the artifacts is file work: off the event loop, as every method that reads a body.
        verb("POST", "upload", "upload", ModelService.upload, BODY, API_VERSION, on_resource=False),
        verb("POST", "copy", "copy", ModelService.copy, BODY, API_VERSION, on_resource=False),
        list_(ModelService.list, LIST_QUERY),
        verb("GET", "listVersions", "list_versions", ModelService.list_versions, LIST_QUERY),
        verb("POST", "mergeVersionAliases", "merge_aliases", ModelService.merge_aliases, BODY),
        verb("DELETE", "deleteVersion", "delete_version", ModelService.delete_version, API_VERSION),
        get(ModelService.get),
        update(ModelService.update, BODY, UPDATE_MASK),
        delete(ModelService.delete, API_VERSION),
    ],
)
