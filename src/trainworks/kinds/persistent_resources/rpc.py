"""gRPC of persistentResources: PersistentResourceService, v1 and v1beta1, each RPC answered by the method
of the REST route (routes.py's PERSISTENT_RESOURCES) with the arguments that route passes (kernel/rpc.py).
Every change answers a long-running operation, as over REST."""

from __future__ import annotations

from trainworks.kernel.rpc import Binding, Route, bind_vertex
from trainworks.kinds.persistent_resources.routes import PERSISTENT_RESOURCES
from trainworks.kinds.persistent_resources.service import PersistentResourceService

# RPC -> the REST route (its name in PERSISTENT_RESOURCES), the request field the REST body is, and the
# field naming the resource where the REST path takes it from the body (`{persistent_resource.name=...}`).
# RebootPersistentResource has nothing but the name, and its route passes nothing of a body.
ROUTES = {
    "CreatePersistentResource": Route("create", body="persistent_resource"),
    "ListPersistentResources": Route("list_"),
    "GetPersistentResource": Route("get"),
    "UpdatePersistentResource": Route("update", body="persistent_resource", name="persistent_resource.name"),
    "RebootPersistentResource": Route("reboot"),
    "DeletePersistentResource": Route("delete"),
}


def bindings(resources: PersistentResourceService) -> list[Binding]:
    return bind_vertex(PERSISTENT_RESOURCES, resources, "PersistentResourceService", ROUTES)
