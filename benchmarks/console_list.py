"""The console's custom-jobs list: first render with 1,000 jobs in the server, in headless Chromium.

A real server on 127.0.0.1 gets 1,000 CustomJobs (one replica running `true` each); the benchmark waits
until every one has ended, so the server is idle while it measures. Then, per trial, a fresh browser
context (empty cache, as a first visit) opens `/console/#/jobs` and the page's own performance marks are
read: `jobs-list-rendered` (the rows of the first page are in the DOM: navigation start -> list rendered)
and `jobs-costs-rendered` (the cost column filled from the costs extension, after the rows).

Baselines, measured in the same trials: the static index page's load (navigation start -> `responseEnd` of
the HTML) and the page's raw API call, `fetch('/v1/.../customJobs?pageSize=N')` plus JSON parsing, timed
in the same browser page after the list rendered. The list pages (`pageSize`, default the console's 50),
so it never loads all 1,000 jobs; the benchmark checks that no request asks for more than one page.

Target: median first render under 300 ms. Needs Debian's /usr/bin/chromium and the playwright package.

    python benchmarks/console_list.py [--jobs 1000] [--trials 15] [--warmup 2] [--page-size 50] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx

try:
    from benchmarks import common
except ImportError:  # run as a script: python benchmarks/console_list.py
    import common  # type: ignore[no-redef]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TARGET_MS = 300.0
DRAIN_TIMEOUT_S = 600.0


async def create_jobs(url: str, count: int, concurrency: int = 8) -> None:
    """`count` one-replica jobs from `concurrency` clients; every create must succeed."""
    counter = iter(range(count))

    async def worker() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60.0) as client:
            for i in counter:
                body = common.custom_job(common.container_pool(["true"]), name=f"console-bench-{i:04d}")
                response = await client.post(f"/v1/{common.PARENT}/customJobs", json=body)
                if response.status_code != 200:
                    raise RuntimeError(f"create failed: {response.status_code} {response.text[:200]}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def wait_all_ended(url: str, count: int) -> None:
    """Until `count` jobs are terminal (the costs report counts them with a state filter)."""
    ended = " OR ".join(f"state={s}" for s in sorted(common.TERMINAL))
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    with httpx.Client(base_url=url, timeout=60.0) as client:
        while True:
            report = client.get(
                f"/trainworks/v1/{common.PARENT}/costs", params={"by": "job", "filter": ended}
            ).json()
            if report["totals"]["count"] >= count:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {report['totals']['count']} of {count} jobs ended")
            time.sleep(1.0)


def measure(url: str, trials: int, warmup: int, page_size: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    rendered: list[float] = []
    costs: list[float] = []
    index: list[float] = []
    api: list[float] = []
    largest_page = 0
    rows_seen = 0
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            for trial in range(warmup + trials):
                context = browser.new_context()
                page = context.new_page()
                requested: list[str] = []
                page.on("request", lambda r, into=requested: into.append(r.url))
                page.set_default_timeout(30_000)
                # The scope is set before the page's first script runs.
                page.add_init_script(
                    "localStorage.setItem('trainworks.scope', JSON.stringify("
                    f"{{project: '{common.PROJECT}', location: '{common.LOCATION}'}}))"
                )
                page.goto(f"{url}/console/#/jobs?pageSize={page_size}")
                page.locator("#jobs-page[data-ready='true']").wait_for()
                page.locator("#jobs-page[data-costs='true']").wait_for()
                marks = page.evaluate(
                    """() => ({
                        rendered: performance.getEntriesByName('jobs-list-rendered')[0].startTime,
                        costs: performance.getEntriesByName('jobs-costs-rendered')[0].startTime,
                        index: performance.getEntriesByType('navigation')[0].responseEnd,
                        rows: document.querySelectorAll('#jobs-table tbody tr[data-key]').length,
                    })"""
                )
                raw = page.evaluate(
                    """async (path) => {
                        const t = performance.now();
                        const body = await (await fetch(path)).json();
                        return [performance.now() - t, (body.customJobs || []).length];
                    }""",
                    f"/v1/{common.PARENT}/customJobs?pageSize={page_size}",
                )
                for request_url in requested:
                    query = parse_qs(urlparse(request_url).query)
                    if "/customJobs" in request_url and "pageSize" in query:
                        largest_page = max(largest_page, int(query["pageSize"][0]))
                context.close()
                if trial < warmup:
                    continue
                rendered.append(marks["rendered"])
                costs.append(marks["costs"])
                index.append(marks["index"])
                api.append(raw[0])
                rows_seen = marks["rows"]
        finally:
            browser.close()
    return {
        "list_rendered_ms": common.summary(rendered),
        "costs_rendered_ms": common.summary(costs),
        "baseline_index_html_ms": common.summary(index),
        "baseline_api_fetch_ms": common.summary(api),
        "rows_rendered": rows_seen,
        "largest_page_requested": largest_page,
    }


def report(jobs: int, page_size: int, result: dict[str, Any]) -> str:
    rows = []
    for key, label in (
        ("list_rendered_ms", "navigation start -> list rendered (the measure)"),
        ("costs_rendered_ms", "navigation start -> cost column filled"),
        ("baseline_index_html_ms", "baseline: navigation start -> index.html received"),
        ("baseline_api_fetch_ms", f"baseline: fetch customJobs?pageSize={page_size} + JSON, in page"),
    ):
        s = result[key]
        rows.append([label, s["n"], f"{s['median']:.1f}", f"{s['p90']:.1f}", f"{s['max']:.1f}"])
    median = result["list_rendered_ms"]["median"]
    verdict = "PASS" if median < TARGET_MS else "FAIL"
    return "\n".join(
        [
            f"## Console job list, {jobs} jobs in the server, page size {page_size}"
            " (a fresh browser context each trial)",
            "",
            common.markdown_table(["timing (ms)", "n", "median", "p90", "max"], rows),
            "",
            f"rows rendered: {result['rows_rendered']}; largest page requested: "
            f"{result['largest_page_requested']} (never all jobs)",
            f"target: median first render < {TARGET_MS:.0f} ms: {median:.1f} ms -> {verdict}",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--page-size", type=int, default=50, help="the console's default page size")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args()
    started = time.monotonic()
    with common.Server() as server:
        asyncio.run(create_jobs(server.url, args.jobs))
        wait_all_ended(server.url, args.jobs)
        seeded = time.monotonic() - started
        result = measure(server.url, args.trials, args.warmup, args.page_size)
    if result["largest_page_requested"] > args.page_size:
        print(f"the console asked for {result['largest_page_requested']} jobs at once", file=sys.stderr)
        sys.exit(1)
    if args.json:
        data = {
            "console_list": result,
            "jobs": args.jobs,
            "seed_seconds": seeded,
            "machine": common.machine(),
        }
        print(common.dump_json(data))
    else:
        print(report(args.jobs, args.page_size, result))
        print(f"\n(seeding {args.jobs} jobs took {seeded:.0f} s; machine: {common.machine()})")
    if result["list_rendered_ms"]["median"] >= TARGET_MS:
        sys.exit(2)


if __name__ == "__main__":
    main()
