"""REST routes of datasets (v1 and v1beta1): create, import and delete are long-running operations."""

from __future__ import annotations

from fastapi import APIRouter, Request

from trainworks.api.state import required, services
from trainworks.kernel.routes import (
    API_VERSION,
    BODY,
    LIST,
    ORDER_BY,
    READ_MASK,
    UPDATE_MASK,
    Collection,
    create,
    delete,
    get,
    list_,
    update,
    verb,
)
from trainworks.kinds.datasets.service import DatasetService


def _service(request: Request) -> DatasetService:
    return required(services(request).datasets)


DATASETS = Collection(
    "datasets",
    "dataset_id",
    _service,
    [
        create(DatasetService.create, BODY, API_VERSION),
        list_(DatasetService.list, *LIST, ORDER_BY),
        get(DatasetService.get, READ_MASK),
        update(DatasetService.update, BODY, UPDATE_MASK),
        verb("POST", "import", "import_data", DatasetService.import_data, BODY, API_VERSION),
        delete(DatasetService.delete, API_VERSION),
    ],
)


def router(prefix: str) -> APIRouter:
    return DATASETS.router(prefix)
