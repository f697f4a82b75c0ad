"""API throughput: CustomJob create and get at 1 and 50 concurrent clients, against GET /healthz.

A real server runs as in production: its controller is live, so every created job is also launched (one
replica running `true`) while the creates go on; between configurations the benchmark waits for all
jobs to end so each one starts from an idle server. Gets read finished jobs. The baseline, measured in
the same run at the same concurrency, is GET /healthz: the same HTTP stack, middleware and thread pool
hop without the database. Each client is an asyncio task with its own httpx.AsyncClient and keep-alive
connection; the client's own CPU per request is reported, since it shares the machine with the server.
Fixed request counts; every request must succeed. Target: creates >= 200/s.

    python benchmarks/api_throughput.py [--creates 500] [--gets 2000] [--concurrency 1 50] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Any

import httpx

try:
    from benchmarks import common
except ImportError:  # run as a script: python benchmarks/api_throughput.py
    import common  # type: ignore[no-redef]

DRAIN_TIMEOUT_S = 240.0
GET_POOL = 20  # gets rotate over this many finished jobs


def job_body(index: int) -> dict[str, Any]:
    return common.custom_job(common.container_pool(["true"]), name=f"throughput-{index}")


async def measure(
    url: str, concurrency: int, count: int, request: Callable[[httpx.AsyncClient, int], Any]
) -> dict[str, Any]:
    """`count` requests from `concurrency` clients; each request(client, i) returns a response.

    Every client has its own AsyncClient holding one keep-alive connection: one AsyncClient shared by
    50 tasks spends ~5 ms of CPU per request in its connection pool and would measure itself.
    """
    latencies: list[float] = []
    errors: list[str] = []
    counter = itertools.count()
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    clients = [httpx.AsyncClient(base_url=url, limits=limits, timeout=60.0) for _ in range(concurrency)]

    async def worker(client: httpx.AsyncClient) -> None:
        while (i := next(counter)) < count:
            t = time.perf_counter()
            try:
                response = await request(client, i)
                if response.status_code != 200:
                    errors.append(f"{response.status_code} {response.text[:200]}")
            except httpx.HTTPError as exc:
                errors.append(repr(exc))
            latencies.append(time.perf_counter() - t)

    try:
        # Open every connection before the clock starts.
        await asyncio.gather(*(client.get("/healthz") for client in clients))
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(client) for client in clients))
        elapsed = time.perf_counter() - t0
        client_cpu = time.process_time() - cpu0
    finally:
        await asyncio.gather(*(client.aclose() for client in clients))
    stats = common.summary(latencies)
    return {
        "requests": count,
        "seconds": elapsed,
        "rps": count / elapsed,
        "p50_ms": stats["median"] * 1000,
        "p99_ms": stats["p99"] * 1000,
        "errors": len(errors),
        "first_errors": errors[:3],
        "client_cpu_ms_per_request": client_cpu / count * 1000,
    }


def active_jobs(client: httpx.Client) -> int:
    listed = client.get(
        f"/v1/{common.PARENT}/customJobs",
        params={"pageSize": 1000, "filter": "state!=JOB_STATE_SUCCEEDED", "readMask": "state"},
    )
    listed.raise_for_status()
    jobs = listed.json().get("customJobs", [])
    failed = [j for j in jobs if j.get("state") in ("JOB_STATE_FAILED", "JOB_STATE_CANCELLED")]
    if failed:
        raise RuntimeError(f"{len(failed)} benchmark jobs did not succeed")
    return len(jobs)


def drain(client: httpx.Client) -> float:
    """Wait until every job has ended; seconds waited."""
    t0 = time.perf_counter()
    while active_jobs(client):
        if time.perf_counter() - t0 > DRAIN_TIMEOUT_S:
            raise TimeoutError("jobs still running after the drain timeout")
        time.sleep(0.25)
    return time.perf_counter() - t0


def run(url: str, concurrencies: list[int], creates: int, gets: int) -> list[dict[str, Any]]:
    parent = f"/v1/{common.PARENT}/customJobs"
    with httpx.Client(base_url=url, timeout=60.0) as sync:
        names = [sync.post(parent, json=job_body(i)).json()["name"] for i in range(GET_POOL)]
        drain(sync)

        async def healthz(client: httpx.AsyncClient, _i: int) -> httpx.Response:
            return await client.get("/healthz")

        async def get(client: httpx.AsyncClient, i: int) -> httpx.Response:
            return await client.get(f"/v1/{names[i % len(names)]}")

        async def create(client: httpx.AsyncClient, i: int) -> httpx.Response:
            return await client.post(parent, json=job_body(i))

        # Warm-up: imports, the projects cache, SQLite pages.
        for request in (healthz, get, create):
            asyncio.run(measure(url, 4, 20, request))
        drain(sync)

        results = []
        for concurrency in concurrencies:
            row: dict[str, Any] = {"concurrency": concurrency}
            row["healthz"] = asyncio.run(measure(url, concurrency, gets, healthz))
            row["get"] = asyncio.run(measure(url, concurrency, gets, get))
            row["create"] = asyncio.run(measure(url, concurrency, creates, create))
            row["create"]["jobs_still_active_after"] = active_jobs(sync)
            row["drain_seconds"] = drain(sync)
            row["create_vs_healthz"] = row["create"]["rps"] / row["healthz"]["rps"]
            row["get_vs_healthz"] = row["get"]["rps"] / row["healthz"]["rps"]
            results.append(row)
    return results


def report(results: list[dict[str, Any]], elapsed: float) -> str:
    rows = []
    for r in results:
        for kind in ("create", "get", "healthz"):
            m = r[kind]
            ratio = "1 (baseline)" if kind == "healthz" else f"{r[kind + '_vs_healthz']:.2f}"
            rows.append(
                [
                    kind,
                    r["concurrency"],
                    m["requests"],
                    f"{m['rps']:.0f}",
                    f"{m['p50_ms']:.1f}",
                    f"{m['p99_ms']:.1f}",
                    m["errors"],
                    ratio,
                    f"{m['client_cpu_ms_per_request']:.2f}",
                ]
            )
    table = common.markdown_table(
        [
            "request",
            "clients",
            "requests",
            "req/s",
            "p50 ms",
            "p99 ms",
            "errors",
            "vs /healthz",
            "client CPU ms/req",
        ],
        rows,
    )
    lines = [
        "## API throughput (controller running: every create also launches a `true` replica)",
        "",
        table,
        "",
    ]
    for r in results:
        c = r["create"]
        verdict = "meets" if c["rps"] >= 200 else "misses"
        lines.append(
            f"- {r['concurrency']} client(s): create {c['rps']:.0f}/s ({verdict} the 200/s target), "
            f"create/healthz {r['create_vs_healthz']:.2f}, get/healthz {r['get_vs_healthz']:.2f}; "
            f"{c['jobs_still_active_after']} jobs still active after the creates, drained in "
            f"{r['drain_seconds']:.1f}s"
        )
        for kind in ("create", "get", "healthz"):
            if r[kind]["errors"]:
                lines.append(f"  - {kind} errors: {r[kind]['first_errors']}")
    lines.append(f"\n{elapsed:.0f}s in all; machine: {common.machine()}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--creates", type=int, default=500, help="creates per concurrency")
    parser.add_argument("--gets", type=int, default=2000, help="gets (and healthz requests) per concurrency")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 50])
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args()

    started = time.perf_counter()
    with common.Server() as server:
        results = run(server.url, args.concurrency, args.creates, args.gets)
    elapsed = time.perf_counter() - started
    if args.json:
        print(common.dump_json({"api_throughput": results, "seconds": elapsed, "machine": common.machine()}))
    else:
        print(report(results, elapsed))
    if any(r[k]["errors"] for r in results for k in ("create", "get", "healthz")):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
