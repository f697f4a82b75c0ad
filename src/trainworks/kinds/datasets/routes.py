"""REST routes of datasets (v1 and v1beta1): create, import and delete are long-running operations."""

from __future__ import annotations

from trainworks.api.state import required, services
from trainworks.kernel.routes import (
    API_VERSION,
    BODY,
    LIST_QUERY,
    READ_MASK,
    UPDATE_MASK,
    Collection,
    lro_methods,
    verb,
)
from trainworks.kinds.datasets.service import DatasetService

DATASETS = Collection(
    "datasets",
    "dataset_id",
    lambda request: required(services(request).datasets),
    lro_methods(
        DatasetService,
        create_args=(BODY, API_VERSION),
        list_args=(LIST_QUERY,),
        get_args=(READ_MASK,),
        update_args=(BODY, UPDATE_MASK),
        delete_args=(API_VERSION,),
        verbs=[verb("POST", "import", "import_data", DatasetService.import_data, BODY, API_VERSION)],
    ),
)
