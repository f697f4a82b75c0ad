"""Wires the database, stores, services, backend and controllers together for one server."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from trainworks.backends.local import LocalBackend
from trainworks.backends.python_packages import PackageEnvironments
from trainworks.config import Settings
from trainworks.controllers.custom_jobs import CustomJobController
from trainworks.scheduling.inventory import load_inventory
from trainworks.services.costs import CostService
from trainworks.services.custom_jobs import CustomJobService
from trainworks.services.job_status import JobStatusService
from trainworks.services.logs import LogService
from trainworks.services.operations import OperationService
from trainworks.services.projects import Projects
from trainworks.storage.gcs import ObjectStore
from trainworks.store.database import Database
from trainworks.store.jobs import JobStore
from trainworks.store.operations import OperationStore

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

    def start(self) -> None:
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()
        self.db.dispose()


def build_services(settings: Settings) -> Services:
    settings.ensure_dirs()
    db = Database(settings.db_url)
    projects = Projects(db)
    job_store = JobStore(db)
    op_store = OperationStore(db)
    operations = OperationService(op_store, projects)
    if settings.gcs_protocol == "file":
        objects = ObjectStore(settings.buckets)
    else:
        objects = ObjectStore(None, protocol=settings.gcs_protocol)
    backend = LocalBackend(settings.container_runtime)
    inventory = load_inventory(settings.inventory_path)
    controller = CustomJobController(
        settings, job_store, op_store, backend, PackageEnvironments(settings.cache_dir, objects), inventory
    )
    custom_jobs = CustomJobService(job_store, projects, operations, wake=controller.wake, inventory=inventory)
    logs = LogService(settings, job_store, projects)
    return Services(
        settings,
        db,
        custom_jobs,
        JobStatusService(custom_jobs),
        operations,
        logs,
        controller,
        costs=CostService(job_store, projects),
    )
