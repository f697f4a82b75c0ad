"""The FastAPI application: routers, error handlers, auth and the controllers' lifetime."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from trainworks import __version__
from trainworks.api import limits, openapi, rpc_guard
from trainworks.api.auth import AuthMiddleware
from trainworks.api.errors import error_body, install_error_handlers, unexpected_error
from trainworks.api.state import required
from trainworks.capacity.routes import router as capacity_router
from trainworks.config import Settings
from trainworks.console import router as console
from trainworks.costs import routes as costs
from trainworks.kernel.request_load import MarkRequests
from trainworks.kernel.rpc import RpcServer
from trainworks.kernel.status import Code
from trainworks.kinds.clusters.routes import CLUSTERS
from trainworks.kinds.custom_jobs import rpc as custom_jobs_rpc
from trainworks.kinds.custom_jobs.routes import CUSTOM_JOBS, extensions_router
from trainworks.kinds.custom_jobs.shell_routes import router as shell_router
from trainworks.kinds.custom_jobs.tensorboard_routes import router as tensorboard_router
from trainworks.kinds.datasets import rpc as datasets_rpc
from trainworks.kinds.datasets.routes import DATASETS
from trainworks.kinds.locations import routes as locations
from trainworks.kinds.locations import rpc as locations_rpc
from trainworks.kinds.log_entries import routes as log_entries
from trainworks.kinds.models import rpc as models_rpc
from trainworks.kinds.models.routes import MODELS
from trainworks.kinds.operations import routes as operations
from trainworks.kinds.operations import rpc as operations_rpc
from trainworks.kinds.persistent_resources import rpc as persistent_resources_rpc
from trainworks.kinds.persistent_resources.routes import PERSISTENT_RESOURCES
from trainworks.kinds.storage_objects.routes import router as storage_router
from trainworks.kinds.training_pipelines import rpc as training_pipelines_rpc
from trainworks.kinds.training_pipelines.routes import TRAINING_PIPELINES
from trainworks.kinds.tuning_jobs import rpc as tuning_jobs_rpc
from trainworks.kinds.tuning_jobs.routes import TUNING_JOBS
from trainworks.observability import http as observability
from trainworks.wiring import Services, build_services

log = logging.getLogger(__name__)


def create_app(settings: Settings, services: Services | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        built = services or build_services(settings)
        app.state.services = built
        built.start()
        rpc: RpcServer | None = None
        try:
            if settings.grpc_port:
                rpc = grpc_server(app, settings, built)
            yield
        finally:
            if rpc is not None:
                rpc.stop()  # first: its calls use the services
            built.stop()

    app = FastAPI(
        title="Trainworks", version=__version__, lifespan=lifespan, docs_url="/docs", redoc_url=None
    )
    # Innermost middleware (added first): its body-limit errors reach the routes' handlers unwrapped.
    limits.install(app, settings.max_request_bytes, settings.max_object_bytes)
    app.add_middleware(AuthMiddleware)
    # Outside the auth middleware: its token look-ups fail with the database too, and get the same 503.
    install_error_handlers(app)
    # Each kind declares its collection (its standard methods and verbs) in its routes.py.
    collections = (CUSTOM_JOBS, PERSISTENT_RESOURCES, TUNING_JOBS, DATASETS, MODELS, TRAINING_PIPELINES)
    for prefix in ("/v1", "/v1beta1"):
        for collection in collections:
            app.include_router(collection.router(prefix))
    app.include_router(CLUSTERS.router("/v1beta1"))  # a v1beta1-only resource
    app.include_router(storage_router())  # the Cloud Storage JSON API subset (STORAGE_EMULATOR_HOST)
    for prefix in ("/v1", "/v1beta1", "/ui"):
        app.include_router(operations.router(prefix))
        app.include_router(locations.router(prefix))
    app.include_router(extensions_router())
    app.include_router(costs.router())
    app.include_router(capacity_router())
    app.include_router(shell_router())  # the shell WebSocket into running replicas
    app.include_router(tensorboard_router())
    app.include_router(log_entries.router())  # the Cloud Logging API's entries:list (/v2)
    observability.install(app, settings)  # /metrics and request timing: after the auth middleware
    app.add_middleware(MarkRequests)  # outermost: the controllers learn of a request before anything runs
    openapi.install(app)  # the query parameters and bodies routes read by hand
    console.install(app)  # the web console at /console (static pages over this same API)

    @app.get("/healthz")
    def healthz() -> Any:
        # Not ready while the database does not answer: every API call would be a 503 (the server itself
        # lives on and recovers by itself when the database is back).
        problem = app.state.services.db.ping()
        if problem is not None:
            message = f"The database is {problem}. Retry later."
            return JSONResponse(error_body(503, Code.UNAVAILABLE, message), status_code=503)
        return {"status": "ok", "version": __version__, "containerRuntime": settings.container_runtime}

    return app


def grpc_server(app: FastAPI, settings: Settings, services: Services) -> RpcServer:
    """The gRPC API beside the HTTP one (docs/grpc.md), started: the same services, auth and errors."""
    bindings = [
        *custom_jobs_rpc.bindings(services.custom_jobs),
        *tuning_jobs_rpc.bindings(required(services.tuning_jobs)),
        *training_pipelines_rpc.bindings(required(services.training_pipelines)),
        *datasets_rpc.bindings(required(services.datasets)),
        *models_rpc.bindings(required(services.models)),
        *persistent_resources_rpc.bindings(required(services.persistent_resources)),
        *operations_rpc.bindings(services.operations),
        *locations_rpc.bindings(required(services.locations)),
    ]
    server = RpcServer(
        settings.grpc_host,
        settings.grpc_port,
        bindings,
        rpc_guard.authorizer(app),
        unexpected_error,
        max_message_bytes=settings.max_request_bytes,
        tls=settings.tls,
        load=services.requests,
    )
    server.start()
    log.info("gRPC on %s", server.address)
    return server
