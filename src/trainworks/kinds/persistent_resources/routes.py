"""REST routes of persistentResources (v1 and v1beta1): every change is a long-running operation."""

from __future__ import annotations

from trainworks.api.state import required, services
from trainworks.kernel.routes import (
    API_VERSION,
    BODY,
    PAGE,
    UPDATE_MASK,
    Collection,
    Query,
    lro_methods,
    verb,
)
from trainworks.kinds.persistent_resources.service import PersistentResourceService

PERSISTENT_RESOURCES = Collection(
    "persistentResources",
    "resource_id",
    lambda request: required(services(request).persistent_resources),
    lro_methods(
        PersistentResourceService,
        create_args=(Query("persistentResourceId", "persistent_resource_id"), BODY, API_VERSION),
        list_args=PAGE,
        update_args=(BODY, UPDATE_MASK, API_VERSION),
        delete_args=(API_VERSION,),
        verbs=[
            # RebootPersistentResourceRequest has nothing but the name: a body, if any, must still be JSON.
            verb("POST", "reboot", "reboot", PersistentResourceService.reboot, API_VERSION, ignore_body=True)
        ],
    ),
)
