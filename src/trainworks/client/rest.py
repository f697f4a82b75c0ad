"""The REST client of a Trainworks server (Vertex AI v1 compatible): every kind's client composed into one.

The plumbing (session, errors, pages, waiting for operations) is `kernel.client.Client`; each kind's
methods are in its own `client` module.
"""

from __future__ import annotations

from trainworks.capacity.client import CapacityClient
from trainworks.costs.client import CostsClient
from trainworks.kinds.clusters.client import ClustersClient
from trainworks.kinds.custom_jobs.client import CustomJobsClient
from trainworks.kinds.datasets.client import DatasetsClient
from trainworks.kinds.models.client import ModelsClient
from trainworks.kinds.operations.client import OperationsClient
from trainworks.kinds.persistent_resources.client import PersistentResourcesClient
from trainworks.kinds.training_pipelines.client import TrainingPipelinesClient
from trainworks.kinds.tuning_jobs.client import TuningJobsClient


class TrainworksClient(
    CustomJobsClient,
    CostsClient,
    CapacityClient,
    PersistentResourcesClient,
    OperationsClient,
    TuningJobsClient,
    TrainingPipelinesClient,
    DatasetsClient,
    ModelsClient,
    ClustersClient,
):
    """Typed access to the /v1 (and v1beta1 cluster) resources, plus Trainworks' extensions (status, logs,
    costs, capacity).

    `parent` is `projects/P/locations/L`; job, resource and operation names are full resource names.
    Methods that start a long-running change return the Operation; `wait_operation` waits for it.
    """


__all__ = ["TrainworksClient"]
