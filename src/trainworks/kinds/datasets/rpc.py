"""gRPC of datasets: the RPCs of DatasetService the REST routes serve (routes.py's DATASETS), v1 and v1beta1,
each answered by the route's method with the arguments that route passes (kernel/rpc.py). Create, import
and delete answer long-running operations, as over REST; the data-item, annotation and export RPCs are not
served (no REST routes either)."""

from __future__ import annotations

from trainworks.kernel.rpc import ALL, Binding, Route, bind_vertex
from trainworks.kinds.datasets.routes import DATASETS
from trainworks.kinds.datasets.service import DatasetService

# RPC -> the REST route (its name in DATASETS), the request field the REST body is, and the field naming
# the dataset where the REST path takes it from the body (`{dataset.name=...}`).
ROUTES = {
    "CreateDataset": Route("create", body="dataset"),
    "ListDatasets": Route("list_"),
    "GetDataset": Route("get"),
    "UpdateDataset": Route("update", body="dataset", name="dataset.name"),
    "ImportData": Route("import_data", body=ALL),
    "DeleteDataset": Route("delete"),
}


def bindings(datasets: DatasetService) -> list[Binding]:
    return bind_vertex(DATASETS, datasets, "DatasetService", ROUTES)
