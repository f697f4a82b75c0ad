"""Wires the database, stores, services, backend and controllers together for one server."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from trainworks.backends.local import LocalBackend
from trainworks.backends.python_packages import PackageEnvironments
from trainworks.backends.warm import WarmPool, WarmStartBackend
from trainworks.capacity.service import CapacityService
from trainworks.catalog.node_images import ImageCatalog
from trainworks.config import Settings
from trainworks.costs.service import CostService
from trainworks.kernel.changes import ChangeFeed
from trainworks.kernel.loop import ReconcileLoop
from trainworks.kernel.operation_store import OperationStore
from trainworks.kernel.operations import OperationService
from trainworks.kernel.projects import Projects
from trainworks.kernel.request_load import RequestLoad
from trainworks.kinds.clusters.controller import ClusterController, cluster_targets
from trainworks.kinds.clusters.service import ClusterService
from trainworks.kinds.clusters.store import ClusterStore
from trainworks.kinds.custom_jobs.controller import CustomJobController
from trainworks.kinds.custom_jobs.launcher import host_env
from trainworks.kinds.custom_jobs.logs import LogService
from trainworks.kinds.custom_jobs.service import CustomJobService
from trainworks.kinds.custom_jobs.status import JobStatusService
from trainworks.kinds.custom_jobs.store import JobStore
from trainworks.kinds.datasets.service import DatasetService
from trainworks.kinds.datasets.store import DatasetStore
from trainworks.kinds.locations.service import LocationService
from trainworks.kinds.log_entries.service import LogEntryService
from trainworks.kinds.log_entries.store import JobCatalog
from trainworks.kinds.models.artifacts import ArtifactRegistry
from trainworks.kinds.models.service import ModelService
from trainworks.kinds.models.store import ModelStore
from trainworks.kinds.persistent_resources.controller import (
    PersistentResourceController,
    PersistentResourceJobs,
)
from trainworks.kinds.persistent_resources.service import PersistentResourceService
from trainworks.kinds.persistent_resources.store import PersistentResourceStore
from trainworks.kinds.training_pipelines.controller import TrainingPipelineController
from trainworks.kinds.training_pipelines.service import TrainingPipelineService
from trainworks.kinds.training_pipelines.store import TrainingPipelineStore
from trainworks.kinds.tuning_jobs.controller import TuningJobController
from trainworks.kinds.tuning_jobs.service import TuningJobService
from trainworks.kinds.tuning_jobs.store import TuningStore
from trainworks.observability.job_counts import JobCountCollector
from trainworks.observability.metrics import ServerMetrics
from trainworks.scheduling.inventory import load_inventory
from trainworks.slurm.backend import SlurmBackend, server_targets
from trainworks.storage.gcs import ObjectStore
from trainworks.storage.objects import ObjectService
from trainworks.storage.output_buckets import OutputBuckets
from trainworks.store.database import Database
from trainworks.tokens.service import TokenService

log = logging.getLogger(__name__)


@dataclass
class Services:
    settings: Settings
    db: Database
    custom_jobs: CustomJobService
    job_status: JobStatusService
    operations: OperationService
    logs: LogService
    controller: CustomJobController
    costs: CostService
    persistent_resources: PersistentResourceService | None = None
    persistent_controller: PersistentResourceController | None = None
    tuning_jobs: TuningJobService | None = None
    tuning_controller: TuningJobController | None = None
    clusters: ClusterService | None = None
    cluster_controller: ClusterController | None = None
    # Runs the jobs that go to Slurm; training clusters route theirs with slurm.add_resolver(...).
    slurm: SlurmBackend | None = None
    storage: ObjectService | None = None  # the Cloud Storage JSON API over the local buckets
    capacity: CapacityService | None = None  # the capacity preflight extension
    datasets: DatasetService | None = None  # managed datasets and their exports
    models: ModelService | None = None  # the model registry
    training_pipelines: TrainingPipelineService | None = None
    pipeline_controller: TrainingPipelineController | None = None
    metrics: ServerMetrics = field(default_factory=ServerMetrics)  # what /metrics shows
    requests: RequestLoad = field(default_factory=RequestLoad)  # open API requests, recent busy share
    tokens: TokenService | None = None  # the stored API tokens that api/auth.py looks up
    locations: LocationService | None = None  # the Locations API: the inventory's regions
    log_entries: LogEntryService | None = None  # the Cloud Logging API's entries:list over jobs' logs
    local_backend: LocalBackend | None = None  # host replicas: its fork server stops with the server

    def _other_controllers(self) -> list[ReconcileLoop]:
        """The controllers besides the custom jobs' one, in the order they start (they stop in reverse)."""
        loops = (
            self.persistent_controller,
            self.tuning_controller,
            self.cluster_controller,
            self.pipeline_controller,
        )
        return [loop for loop in loops if loop is not None]

    def start(self) -> None:
        if self.local_backend is not None:
            self.local_backend.start()
        self.controller.start()
        for extra in self._other_controllers():
            extra.start()

    def stop(self) -> None:
        for extra in reversed(self._other_controllers()):
            extra.stop()
        self.controller.stop()
        if self.local_backend is not None:
            self.local_backend.close()
        if self.storage is not None:
            self.storage.close()  # the object metadata store's SQLite connection
        self.db.dispose()


def build_services(settings: Settings) -> Services:
    settings.ensure_dirs()
    db = Database(settings.db_url)
    metrics = ServerMetrics()
    metrics.add_collector(JobCountCollector(db))  # trainworks_jobs, counted at scrape time
    projects = Projects(db)
    job_store = JobStore(db)
    op_store = OperationStore(db)
    operations = OperationService(op_store, projects)
    if settings.gcs_protocol == "file":
        objects = ObjectStore(settings.buckets)
    else:
        objects = ObjectStore(None, protocol=settings.gcs_protocol)
    # Reservations may name a project by ID; jobs carry project numbers.
    inventory = load_inventory(settings.inventory_path).with_project_numbers(projects.number)
    # Who owns each local bucket: requests naming another project's bucket are refused, outputs claimed.
    buckets = OutputBuckets(settings.buckets if settings.gcs_protocol == "file" else None, projects)
    custom_jobs = CustomJobService(
        job_store,
        projects,
        operations,
        inventory=inventory,
        web_access_base=settings.storage_url,  # webAccessUris point at this server's console
        output_buckets=buckets,
    )
    # Persistent resources: their jobs are admitted on the resource's capacity and their replicas start
    # from the resource's warm interpreters (backends/warm.py) when they can.
    pr_store = PersistentResourceStore(db)
    pr_jobs = PersistentResourceJobs(settings, pr_store, custom_jobs)
    warm = WarmPool(settings.home / "persistent", host_env)
    local = LocalBackend(settings.container_runtime, settings)
    backend = WarmStartBackend(local, warm, pr_jobs.warm_target)
    # Jobs go to Slurm per job (labels, --executor); the resolvers say which cluster.
    slurm = SlurmBackend(
        [server_targets(settings.slurm_conf, settings.slurm_partition, settings.executor)],
        tag=SlurmBackend.tag_for(settings.home),
    )
    requests = RequestLoad()
    changes = ChangeFeed(db)  # one per database: what its consumers have all read is pruned
    controller = CustomJobController(
        settings,
        job_store,
        backend,
        PackageEnvironments(settings.cache_dir, objects),
        inventory,
        gang=slurm,
        changes=changes,
        metrics=metrics,
        requests=requests,
    )
    controller.persistent = pr_jobs
    custom_jobs.wake = controller.wake  # the service and the controller need each other
    pr_controller = PersistentResourceController(
        settings, pr_store, custom_jobs, warm, wake_jobs=controller.wake
    )
    persistent_resources = PersistentResourceService(
        pr_store, custom_jobs, projects, wake=pr_controller.wake, output_buckets=buckets
    )
    custom_jobs.persistent_resources = persistent_resources  # checks jobs with persistentResourceId
    costs = CostService(custom_jobs, projects)
    costs.add_resource_source(persistent_resources)
    logs = LogService(settings, job_store, projects)
    # Tuning: trials are CustomJobs; the studies live in Optuna's tables of the same database.
    tuning_store = TuningStore(db)
    tuning_controller = TuningJobController(settings, tuning_store, custom_jobs, db.url, changes)
    tuning_jobs = TuningJobService(
        tuning_store,
        projects,
        operations,
        wake=tuning_controller.wake,
        inventory=inventory,
        custom_jobs=custom_jobs,
        output_buckets=buckets,
    )
    # The model registry and managed datasets keep their own copies (of artifacts, of rows) under the home.
    models = ModelService(
        ModelStore(db), projects, ArtifactRegistry(objects, settings.home / "registry"), buckets
    )
    datasets = DatasetService(DatasetStore(db), projects, objects, settings.home / "datasets", buckets)
    # Training pipelines: each exports its dataset, runs a CustomJob or a tuning job of its own, then
    # registers the model.
    pipeline_store = TrainingPipelineStore(db)
    pipeline_controller = TrainingPipelineController(
        settings,
        pipeline_store,
        custom_jobs,
        tuning_jobs,
        models=models,
        datasets=datasets,
        changes=changes,
    )
    training_pipelines = TrainingPipelineService(
        pipeline_store,
        projects,
        operations,
        wake=pipeline_controller.wake,
        custom_jobs=custom_jobs,
        datasets=datasets,
        output_buckets=buckets,
    )

    # Training clusters: each one a Slurm cluster of daemons on this host. Node images are re-read on every
    # use: operators publish new releases (settings.home/node-images.json) while the server runs.
    def images() -> ImageCatalog:
        return ImageCatalog.load(settings.home / "node-images.json")

    cluster_store = ClusterStore(db)
    cluster_controller = ClusterController(settings, cluster_store, images)
    slurm.add_resolver(cluster_targets(settings, cluster_store))  # its label is explicit: it goes first
    clusters = ClusterService(
        cluster_store, projects, images, settings.clusters_dir, wake=cluster_controller.wake
    )
    return Services(
        settings,
        db,
        custom_jobs,
        JobStatusService(custom_jobs),
        operations,
        logs,
        controller,
        costs=costs,
        persistent_resources=persistent_resources,
        persistent_controller=pr_controller,
        tuning_jobs=tuning_jobs,
        tuning_controller=tuning_controller,
        clusters=clusters,
        cluster_controller=cluster_controller,
        storage=ObjectService(settings.buckets, settings.home, settings.default_location, projects.number)
        if settings.gcs_protocol == "file"
        else None,
        slurm=slurm,
        capacity=CapacityService(custom_jobs, projects, inventory),
        models=models,
        datasets=datasets,
        training_pipelines=training_pipelines,
        pipeline_controller=pipeline_controller,
        metrics=metrics,
        requests=requests,
        tokens=TokenService(db),
        locations=LocationService(projects, inventory),
        log_entries=LogEntryService(settings.jobs_dir, projects, JobCatalog(db), custom_jobs, tuning_jobs),
        local_backend=local,
    )
