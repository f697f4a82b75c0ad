"""The server's Prometheus metrics: one registry per server, owning every metric object.

Controllers run inside the server process, so they report straight to the `ServerMetrics` of their server
through its small methods; the job counts are read from the database at scrape time (`job_counts`). A
registry of its own (never prometheus_client's global one) lets several servers live in one process.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.exposition import choose_encoder

from trainworks.kernel.wire import now_utc

# Queueing can take from milliseconds (an idle server) to hours (a FLEX_START job waiting for capacity).
QUEUE_WAIT_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
# One admission pass plans every queued job at once: sub-millisecond to about a second.
SCHEDULING_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
HTTP_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
UNMATCHED_ROUTE = "unmatched"  # requests no route answered: one label value, whatever the path


def replica_count(spec: Mapping[str, Any]) -> int:
    """How many replicas a CustomJob spec (`{"jobSpec": {"workerPoolSpecs": [...]}}`) runs."""
    pools = (spec.get("jobSpec") or {}).get("workerPoolSpecs") or []
    return sum(int(pool.get("replicaCount", 0) or 0) for pool in pools if isinstance(pool, Mapping))


def status_class(status: int) -> str:
    return f"{status // 100}xx"


class ServerMetrics:
    """The metric objects of one server, and the tiny functions the controllers and the API call."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.queue_wait = Histogram(
            "trainworks_job_queue_wait_seconds",
            "Seconds from a custom job's creation to its first entry into RUNNING.",
            buckets=QUEUE_WAIT_BUCKETS,
            registry=self.registry,
        )
        self.scheduling_pass = Histogram(
            "trainworks_scheduling_pass_seconds",
            "Seconds one admission pass of the custom-job scheduler took (passes with queued jobs only).",
            buckets=SCHEDULING_BUCKETS,
            registry=self.registry,
        )
        self.replica_restarts = Counter(
            "trainworks_replica_restarts",
            "Replica restarts, by reason: transient (a crash such as SIGABRT restarted the job), internal "
            "(a lost replica restarted the job: restartJobOnWorkerRestart), preemption, or worker (a lost "
            "replica restarted alone).",
            ["reason"],
            registry=self.registry,
        )
        self.controller_deferred = Counter(
            "trainworks_controller_deferred_seconds",
            "Seconds the custom-job controller put launches and queued jobs' looks off while API requests "
            "kept the server busy (requests go first; at most 0.5 s before each).",
            registry=self.registry,
        )
        self.http_duration = Histogram(
            "trainworks_http_request_duration_seconds",
            "Seconds from a request's arrival to the start of its response, by method, route template and "
            "status class.",
            ["method", "route", "status"],
            buckets=HTTP_BUCKETS,
            registry=self.registry,
        )

    # ------------------------------------------------------------------ what the controllers report
    def job_started(self, create_time: datetime) -> None:
        """A custom job entered RUNNING for the first time."""
        self.queue_wait.observe(max(0.0, (now_utc() - create_time).total_seconds()))

    def scheduling_pass_done(self, seconds: float) -> None:
        self.scheduling_pass.observe(seconds)

    def replicas_restarted(self, reason: str, count: int = 1) -> None:
        if count > 0:
            self.replica_restarts.labels(reason=reason).inc(count)

    def work_deferred(self, seconds: float) -> None:
        if seconds > 0:
            self.controller_deferred.inc(seconds)

    # ------------------------------------------------------------------ what the API reports
    def request_done(self, method: str, route: str | None, status: int, seconds: float) -> None:
        self.http_duration.labels(
            method=method, route=route or UNMATCHED_ROUTE, status=status_class(status)
        ).observe(seconds)

    def add_collector(self, collector: Any) -> None:
        """A collector computed at scrape time (the job counts read from the database)."""
        self.registry.register(collector)

    def exposition(self, accept: str) -> tuple[bytes, str]:
        """The scrape body and its content type, in the format the scraper's Accept header asks for."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type
