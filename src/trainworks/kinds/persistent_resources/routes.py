"""REST routes of persistentResources (v1 and v1beta1): every change is a long-running operation."""

from __future__ import annotations

from fastapi import APIRouter, Request

from trainworks.api.state import required, services
from trainworks.kernel.routes import (
    API_VERSION,
    BODY,
    PAGE,
    UPDATE_MASK,
    Collection,
    Query,
    create,
    delete,
    get,
    list_,
    update,
    verb,
)
from trainworks.kinds.persistent_resources.service import PersistentResourceService


def _service(request: Request) -> PersistentResourceService:
    return required(services(request).persistent_resources)


PERSISTENT_RESOURCES = Collection(
    "persistentResources",
    "resource_id",
    _service,
    [
        create(
            PersistentResourceService.create,
            Query("persistentResourceId", "persistent_resource_id"),
            BODY,
            API_VERSION,
        ),
        list_(PersistentResourceService.list, *PAGE),
        get(PersistentResourceService.get),
        update(PersistentResourceService.update, BODY, UPDATE_MASK, API_VERSION),
        # RebootPersistentResourceRequest has nothing but the name: a body, if any, must still be JSON.
        verb("POST", "reboot", "reboot", PersistentResourceService.reboot, API_VERSION, ignore_body=True),
        delete(PersistentResourceService.delete, API_VERSION),
    ],
)


def router(prefix: str) -> APIRouter:
    return PERSISTENT_RESOURCES.router(prefix)
