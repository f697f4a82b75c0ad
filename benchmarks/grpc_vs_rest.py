"""CreateCustomJob and GetCustomJob over gRPC against the REST routes, on one server in the same run.

One real server on 127.0.0.1 with gRPC on (`serve --grpc-port`): both APIs run the same service methods
(docs/grpc.md), so the difference is the transport and its encoding. Each trial makes the same call three
ways, in an order that rotates from trial to trial (so drift on a shared machine hits all alike):

- gRPC: the official JobServiceClient (google-cloud-aiplatform) on its gRPC transport, one insecure channel;
- REST (httpx): the route called directly, JSON body, one keep-alive connection: the server's side of REST
  with the least client work;
- REST (GAPIC): the same official client on its REST transport (what `api_transport="rest"` gives a user).

1. Create: a one-replica CustomJob running `true` (the controller launches each created job on the same
   machine, for every side alike); each answer must be a QUEUED job of a new name.
2. Get: a finished job, read again and again; each answer must be that job, SUCCEEDED.

Medians and p90 over the measured trials, after unmeasured warm-up calls; the ratio is gRPC's median over
the other side's. The server is stopped by PID at the end, even on errors.

    python benchmarks/grpc_vs_rest.py [--create-trials 100] [--get-trials 500] [--warmup 10] [--json]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import grpc
import httpx
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1
from google.cloud.aiplatform_v1.services.job_service.transports.grpc import JobServiceGrpcTransport
from google.protobuf import json_format

try:
    from benchmarks import common
except ImportError:  # run as a script: python benchmarks/grpc_vs_rest.py
    import common  # type: ignore[no-redef]

SIDES = ("grpc", "rest_httpx", "rest_gapic")
LABELS = {
    "grpc": "gRPC (GAPIC client)",
    "rest_httpx": "REST (httpx)",
    "rest_gapic": "REST (GAPIC client)",
}
Call = Callable[[], Any]


def job_body(name: str) -> dict[str, Any]:
    return common.custom_job(common.container_pool(["true"]), name=name)


class Clients:
    """The three ways to call the server, each with its connection opened once."""

    def __init__(self, server: common.Server, grpc_port: int) -> None:
        self.channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        self.grpc = aiplatform_v1.JobServiceClient(transport=JobServiceGrpcTransport(channel=self.channel))
        self.http = httpx.Client(base_url=server.url, timeout=30.0)
        self.gapic_rest = aiplatform_v1.JobServiceClient(
            transport="rest",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": server.url},
        )

    def close(self) -> None:
        self.http.close()
        self.channel.close()

    def creates(self) -> dict[str, Call]:
        def over_grpc() -> str:
            job = aiplatform_v1.CustomJob.wrap(
                json_format.ParseDict(job_body("grpc"), aiplatform_v1.CustomJob.pb()())
            )
            return checked_create(self.grpc.create_custom_job(parent=common.PARENT, custom_job=job))

        def over_httpx() -> str:
            response = self.http.post(f"/v1/{common.PARENT}/customJobs", json=job_body("httpx"))
            response.raise_for_status()
            job = response.json()
            if job.get("state") != "JOB_STATE_QUEUED":
                raise RuntimeError(f"create answered {response.text[:300]}")
            return str(job["name"])

        def over_gapic_rest() -> str:
            job = aiplatform_v1.CustomJob.wrap(
                json_format.ParseDict(job_body("rest"), aiplatform_v1.CustomJob.pb()())
            )
            return checked_create(self.gapic_rest.create_custom_job(parent=common.PARENT, custom_job=job))

        return {"grpc": over_grpc, "rest_httpx": over_httpx, "rest_gapic": over_gapic_rest}

    def gets(self, name: str) -> dict[str, Call]:
        def over_grpc() -> None:
            checked_get(name, self.grpc.get_custom_job(name=name).state.name)

        def over_httpx() -> None:
            response = self.http.get(f"/v1/{name}")
            response.raise_for_status()
            checked_get(name, response.json().get("state"))

        def over_gapic_rest() -> None:
            checked_get(name, self.gapic_rest.get_custom_job(name=name).state.name)

        return {"grpc": over_grpc, "rest_httpx": over_httpx, "rest_gapic": over_gapic_rest}


def checked_create(job: Any) -> str:
    if job.state.name != "JOB_STATE_QUEUED" or not job.name:
        raise RuntimeError(f"create answered {job}")
    return str(job.name)


def checked_get(name: str, state: Any) -> None:
    if state != "JOB_STATE_SUCCEEDED":
        raise RuntimeError(f"get {name} answered state {state}")


def measure(calls: dict[str, Call], trials: int, warmup: int) -> dict[str, list[float]]:
    """Seconds per call of each side: every trial calls each side once, the order rotating by trial."""
    for _ in range(warmup):
        for call in calls.values():
            call()
    times: dict[str, list[float]] = {side: [] for side in SIDES}
    for trial in range(trials):
        for i in range(len(SIDES)):
            side = SIDES[(trial + i) % len(SIDES)]
            started = time.perf_counter()
            calls[side]()
            times[side].append(time.perf_counter() - started)
    return times


def run(args: argparse.Namespace, server: common.Server, grpc_port: int) -> dict[str, Any]:
    clients = Clients(server, grpc_port)
    try:
        created: dict[str, list[float]] = measure(clients.creates(), args.create_trials, args.warmup)
        done = common.wait_job(clients.http, clients.creates()["rest_httpx"]())
        if done["state"] != "JOB_STATE_SUCCEEDED":
            raise RuntimeError(f"{done['name']} ended {done['state']}: {done.get('error')}")
        got = measure(clients.gets(done["name"]), args.get_trials, args.warmup)
    finally:
        clients.close()
    return {
        "create": {side: common.summary(values) for side, values in created.items()},
        "get": {side: common.summary(values) for side, values in got.items()},
    }


def ratios(results: dict[str, Any]) -> dict[str, float]:
    """gRPC's median over each REST side's, per call."""
    return {
        f"{call}_grpc_vs_{side}": results[call]["grpc"]["median"] / results[call][side]["median"]
        for call in ("create", "get")
        for side in SIDES[1:]
    }


def report(results: dict[str, Any], elapsed: float) -> str:
    rows = [
        (f"{rpc}, {LABELS['grpc']}", results[call]["grpc"], f"{route}, {LABELS[side]}", results[call][side])
        for call, rpc, route in (
            ("create", "CreateCustomJob", "POST customJobs"),
            ("get", "GetCustomJob", "GET customJobs/J"),
        )
        for side in SIDES[1:]
    ]
    load = common.machine()
    return "\n".join(
        [
            "## gRPC vs REST on the same server (custom jobs)",
            "",
            common.table(rows),
            "",
            f"{load['cpus']} CPUs, load average {load['loadavg_1m']:.1f}; {elapsed:.0f} s in all.",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--create-trials", type=int, default=100, help="measured creates per side")
    parser.add_argument("--get-trials", type=int, default=500, help="measured gets per side")
    parser.add_argument("--warmup", type=int, default=10, help="unmeasured calls per side before each part")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args()
    if min(args.create_trials, args.get_trials) < 1 or args.warmup < 0:
        parser.error("trial counts must be >= 1 and --warmup >= 0")
    # SIGTERM (a timeout, a CI cancel) must still run the finally below that stops the server
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    started = time.perf_counter()
    grpc_port = common.free_port()
    server = common.Server(extra_args=["--grpc-port", str(grpc_port)])
    try:
        server.start()
        results = run(args, server, grpc_port)
    finally:
        server.stop()
    results["ratios"] = ratios(results)
    elapsed = time.perf_counter() - started
    if args.json:
        print(common.dump_json({"grpc_vs_rest": results, "seconds": elapsed, "machine": common.machine()}))
    else:
        print(report(results, elapsed))


if __name__ == "__main__":
    main()
