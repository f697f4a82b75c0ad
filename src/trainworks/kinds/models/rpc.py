"""gRPC of the model registry: the RPCs of ModelService the REST routes serve (routes.py's MODELS), v1 and
v1beta1, each answered by the route's method with the arguments that route passes (kernel/rpc.py). Upload,
copy and the deletes answer long-running operations, as over REST. A name may carry `@VERSION` or `@ALIAS`
as the REST path may."""

from __future__ import annotations

from trainworks.kernel.rpc import ALL, Binding, Route, bind_vertex
from trainworks.kinds.models.routes import MODELS
from trainworks.kinds.models.service import ModelService

# RPC -> the REST route (its name in MODELS), the request field the REST body is (ALL: `body: "*"`), and
# the field naming the model where the REST path takes it from the body (`{model.name=...}`).
ROUTES = {
    "UploadModel": Route("upload", body=ALL),
    "CopyModel": Route("copy", body=ALL),
    "ListModels": Route("list_"),
    "ListModelVersions": Route("list_versions"),
    "MergeVersionAliases": Route("merge_aliases", body=ALL),
    "DeleteModelVersion": Route("delete_version"),
    "GetModel": Route("get"),
    "UpdateModel": Route("update", body="model", name="model.name"),
    "DeleteModel": Route("delete"),
}


def bindings(models: ModelService) -> list[Binding]:
    return bind_vertex(MODELS, models, "ModelService", ROUTES)
