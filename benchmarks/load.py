"""Load: creates and reads from 50 clients, then 2,000 jobs tracked at once, with the server's memory.

A real server (SQLite) whose inventory stocks out us-central1: every job created there stays QUEUED, so
the controller tracks it on each pass but nothing is launched, and the host stays safe at any count.
Phases, each against a baseline measured in the same run at the same concurrency (GET /healthz: the same
HTTP stack and thread pool hop without the database):

1. `--creates` CustomJob creates from `--clients` clients: throughput, p50/p99.
2. GET of a job and a list page (50 jobs) from `--clients` concurrent readers: p50/p99.
3. More creates until `--tracked` jobs are QUEUED at once; the server's VmRSS/VmHWM (/proc/<pid>/status)
   before the first create and after the last, its CPU while idle for `--idle` seconds with them all
   queued, and the reads of phase 2 again. Every job must then be listed exactly once.

Every request must succeed; the benchmark exits 1 otherwise.

    python benchmarks/load.py [--creates 1000] [--gets 2000] [--clients 50] [--tracked 2000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

try:
    from benchmarks import common
    from benchmarks.api_throughput import measure
except ImportError:  # run as a script: python benchmarks/load.py
    import common  # type: ignore[no-redef]
    from api_throughput import measure  # type: ignore[no-redef]

INVENTORY = """
regions:
  us-central1:
    stockout: true
    zones:
      us-central1-a: {elastic: true}
"""
JOBS = f"/v1/{common.PARENT}/customJobs"
GET_POOL = 200  # gets rotate over this many queued jobs
LIST_PAGE = 50


def job_body(index: int) -> dict[str, Any]:
    return common.custom_job(common.container_pool(["true"]), name=f"load-{index}")


def memory_mib(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak RSS) of a process, in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024  # kB
    return fields


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    after_name = stat[stat.rindex(")") + 2 :].split()
    return (int(after_name[11]) + int(after_name[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(pid: int, seconds: float) -> float:
    """The server's CPU, as a fraction of one core, over `seconds` without requests (controller passes)."""
    cpu0 = cpu_seconds(pid)
    time.sleep(seconds)
    return (cpu_seconds(pid) - cpu0) / seconds


def list_names(client: httpx.Client) -> list[str]:
    names: list[str] = []
    token = ""
    while True:
        params = {"pageSize": 1000, "pageToken": token, "readMask": "name,state"}
        page = client.get(JOBS, params=params)
        page.raise_for_status()
        body = page.json()
        jobs = body.get("customJobs", [])
        not_queued = [j["name"] for j in jobs if j.get("state") != "JOB_STATE_QUEUED"]
        if not_queued:
            raise RuntimeError(
                f"{len(not_queued)} jobs left QUEUED in a stocked-out region: {not_queued[:3]}"
            )
        names += [j["name"] for j in jobs]
        token = body.get("nextPageToken", "")
        if not token:
            return names


def reads(url: str, clients: int, gets: int, names: list[str]) -> dict[str, dict[str, Any]]:
    async def healthz(client: httpx.AsyncClient, _i: int) -> httpx.Response:
        return await client.get("/healthz")

    async def get(client: httpx.AsyncClient, i: int) -> httpx.Response:
        return await client.get(f"/v1/{names[i % len(names)]}")

    async def list_page(client: httpx.AsyncClient, _i: int) -> httpx.Response:
        return await client.get(JOBS, params={"pageSize": LIST_PAGE})

    return {
        "healthz": asyncio.run(measure(url, clients, gets, healthz)),
        "get": asyncio.run(measure(url, clients, gets, get)),
        "list": asyncio.run(measure(url, clients, gets // 4, list_page)),
    }


def run(server: common.Server, clients: int, creates: int, gets: int, tracked: int, idle: float) -> dict:
    url = server.url
    assert server.process is not None
    pid = server.process.pid

    async def healthz(client: httpx.AsyncClient, _i: int) -> httpx.Response:
        return await client.get("/healthz")

    async def create(client: httpx.AsyncClient, i: int) -> httpx.Response:
        return await client.post(JOBS, json=job_body(i))

    # Warm-up (imports, the projects cache) on a baseline request only: no job exists before phase 1.
    asyncio.run(measure(url, 4, 50, healthz))
    out: dict[str, Any] = {"memory_before": memory_mib(pid), "idle_cpu_empty": idle_cpu(pid, idle)}

    out["create_healthz"] = asyncio.run(measure(url, clients, creates, healthz))
    out["create"] = asyncio.run(measure(url, clients, creates, create))
    with httpx.Client(base_url=url, timeout=60.0) as sync:
        names = list_names(sync)[:GET_POOL]
        out["reads_after_creates"] = reads(url, clients, gets, names)
        out["memory_after_creates"] = memory_mib(pid)

        extra = max(0, tracked - creates)

        async def create_more(client: httpx.AsyncClient, i: int) -> httpx.Response:
            return await client.post(JOBS, json=job_body(creates + i))

        out["create_more"] = asyncio.run(measure(url, clients, extra, create_more)) if extra else None
        listed = list_names(sync)
        out["tracked"] = len(listed)
        out["listed_once"] = len(listed) == len(set(listed)) == max(creates, tracked)
        out["idle_cpu_fraction"] = idle_cpu(pid, idle)
        out["memory_tracked"] = memory_mib(pid)
        out["reads_tracked"] = reads(url, clients, gets, names)
    return out


def errors(result: dict[str, Any]) -> int:
    measured = [result["create_healthz"], result["create"]]
    measured += [m for m in (result["create_more"],) if m]
    measured += list(result["reads_after_creates"].values()) + list(result["reads_tracked"].values())
    return sum(m["errors"] for m in measured)


def report(r: dict[str, Any], clients: int, elapsed: float) -> str:
    def row(phase: str, kind: str, m: dict[str, Any], base: dict[str, Any] | None) -> list[Any]:
        ratio = "1 (baseline)" if base is None else f"{m['rps'] / base['rps']:.2f}"
        return [
            phase,
            kind,
            clients,
            m["requests"],
            f"{m['rps']:.0f}",
            f"{m['p50_ms']:.1f}",
            f"{m['p99_ms']:.1f}",
            m["errors"],
            ratio,
        ]

    rows = [
        row("empty server", "GET /healthz", r["create_healthz"], None),
        row("empty server", "create", r["create"], r["create_healthz"]),
    ]
    if r["create_more"]:
        rows.append(row("to the tracked count", "create", r["create_more"], r["create_healthz"]))
    for phase, key in (
        (f"{r['create']['requests']} queued", "reads_after_creates"),
        (f"{r['tracked']} queued", "reads_tracked"),
    ):
        m = r[key]
        rows.append(row(phase, "GET /healthz", m["healthz"], None))
        rows.append(row(phase, "GET job", m["get"], m["healthz"]))
        rows.append(row(phase, f"list {LIST_PAGE}", m["list"], m["healthz"]))
    table = common.markdown_table(
        ["phase", "request", "clients", "requests", "req/s", "p50 ms", "p99 ms", "errors", "vs /healthz"],
        rows,
    )
    mem_rows = [
        ["before the first create", 0, *_mem(r["memory_before"])],
        ["after the first creates", r["create"]["requests"], *_mem(r["memory_after_creates"])],
        ["all tracked, after idling", r["tracked"], *_mem(r["memory_tracked"])],
    ]
    mem = common.markdown_table(["server memory", "jobs QUEUED", "VmRSS MiB", "VmHWM MiB"], mem_rows)
    growth = r["memory_tracked"]["VmRSS"] - r["memory_before"]["VmRSS"]
    per_job_kib = growth * 1024 / r["tracked"] if r["tracked"] else 0.0
    lines = [
        "## Load (SQLite; jobs QUEUED in a stocked-out region, nothing launched)",
        "",
        table,
        "",
        mem,
        "",
        f"- {r['tracked']} jobs tracked at once, each listed exactly once: {r['listed_once']}; "
        f"RSS grew {growth:.1f} MiB ({per_job_kib:.1f} KiB per job); "
        f"server CPU while idle with them all queued: {r['idle_cpu_fraction'] * 100:.1f}% of one core "
        f"(baseline, idle with no jobs: {r['idle_cpu_empty'] * 100:.1f}%)",
        f"- create throughput {r['create']['rps']:.0f}/s at {clients} clients "
        f"({r['create']['rps'] / r['create_healthz']['rps']:.2f} of /healthz)",
        f"\n{elapsed:.0f}s in all; machine: {common.machine()}",
    ]
    return "\n".join(lines)


def _mem(m: dict[str, float]) -> list[str]:
    return [f"{m['VmRSS']:.1f}", f"{m['VmHWM']:.1f}"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--creates", type=int, default=1000, help="creates in phase 1")
    parser.add_argument("--gets", type=int, default=2000, help="GETs (and healthz) per read measurement")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--tracked", type=int, default=2000, help="jobs QUEUED at once in phase 3")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of idle CPU measured in phase 3")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args()

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="trainworks-load-") as tmp:
        inventory = Path(tmp) / "inventory.yaml"
        inventory.write_text(INVENTORY)
        with common.Server(["--inventory", str(inventory)]) as server:
            result = run(server, args.clients, args.creates, args.gets, args.tracked, args.idle)
    elapsed = time.perf_counter() - started
    if args.json:
        print(common.dump_json({"load": result, "seconds": elapsed, "machine": common.machine()}))
    else:
        print(report(result, args.clients, elapsed))
    if errors(result) or not result["listed_once"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
