"""Logs: the cost of capturing a replica's output as entries, and reading a million-line job back.

1. Capture: a command prints N lines (default 1,000,000, ~45 bytes each) to stdout. Baseline: the same
   command with its stdout redirected to a file (what a replica did before entries). Measured: the same
   command under the replica supervisor (backends/shim.py, no sandbox, so that only the capture differs),
   whose logger turns every line into a timestamped record. Trials interleave; the ratio is of medians.
   Target: <= 1.3x.
2. Reading: a real server runs a job whose replica prints N lines; then
   - the first page of `POST /v2/entries:list` (pageSize 1000, gcloud's filter for the job), and a page
     from the middle (a timestamp lower bound), p50 over repeated requests; target < 100 ms;
   - the whole log streamed by `trainworks custom-jobs stream-logs --no-follow` (lines per second),
     against reading the same records straight from the files in Python (the raw operation).

    python benchmarks/logs.py [--lines 1000000] [--trials 3] [--pages 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

try:
    from benchmarks import common
except ImportError:  # run as a script: python benchmarks/logs.py
    import common  # type: ignore[no-redef]

from trainworks.backends.capture import LogReader, log_dir
from trainworks.backends.local import SHIM

PRINTER = """\
import sys
write = sys.stdout.write
for i in range(int(sys.argv[1])):
    write("line %d of the training log, loss=0.123456\\n" % i)
"""


def run_direct(lines: int, folder: Path) -> float:
    with open(folder / "direct.log", "wb") as out:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", PRINTER, str(lines)], stdout=out, check=True)
        return time.perf_counter() - start


def run_captured(lines: int, folder: Path) -> float:
    run_dir = folder / "replica"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir()
    argv = [
        sys.executable,
        "-I",
        "-S",
        str(SHIM),
        str(run_dir),
        "",
        "",
        sys.executable,
        "-c",
        PRINTER,
        str(lines),
    ]
    start = time.perf_counter()
    subprocess.run(argv, stdin=subprocess.DEVNULL, check=True, start_new_session=True)
    elapsed = time.perf_counter() - start
    written = sum(1 for _ in LogReader(log_dir(str(run_dir))).forward())
    if written != lines:
        raise RuntimeError(f"the capture kept {written} of {lines} lines")
    return elapsed


def capture_overhead(lines: int, trials: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="trainworks-bench-logs-"))
    try:
        direct, captured = [], []
        for _ in range(trials):
            direct.append(run_direct(lines, folder))
            captured.append(run_captured(lines, folder))
        base, measured = statistics.median(direct), statistics.median(captured)
        return {
            "lines": lines,
            "direct_s": common.summary(direct),
            "captured_s": common.summary(captured),
            "ratio": measured / base,
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def reading(lines: int, pages: int) -> dict[str, Any]:
    with common.Server() as server, httpx.Client(base_url=server.url, timeout=600) as client:
        body = common.custom_job(
            common.container_pool(["python3", "-c", PRINTER, str(lines)]), name="bench-logs"
        )
        created = client.post(
            f"/v1/projects/{common.PROJECT}/locations/{common.LOCATION}/customJobs", json=body
        )
        created.raise_for_status()
        name = created.json()["name"]
        job_id = name.rsplit("/", 1)[-1]
        job = common.wait_job(client, name, timeout=600)
        if job["state"] != "JOB_STATE_SUCCEEDED":
            raise RuntimeError(f"the job ended {job['state']}: {job.get('error')}")
        query = f'resource.type="ml_job" AND resource.labels.job_id="{job_id}"'
        request = {
            "resourceNames": [f"projects/{common.PROJECT}"],
            "filter": query,
            "orderBy": "timestamp asc",
            "pageSize": 1000,
        }

        def page(extra: str = "") -> tuple[float, dict[str, Any]]:
            payload = {**request, "filter": query + extra}
            start = time.perf_counter()
            answer = client.post("/v2/entries:list", json=payload)
            elapsed = time.perf_counter() - start
            answer.raise_for_status()
            return elapsed, answer.json()

        first = [page()[0] for _ in range(pages)]
        _, opening = page()
        entries = opening["entries"]
        run_dir = server.home / "jobs" / job_id / "workerpool0-0"
        records = list(LogReader(log_dir(str(run_dir))).forward())
        middle_ns = records[len(records) // 2].ns
        seconds, nanos = divmod(middle_ns, 1_000_000_000)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{nanos:09d}Z"
        middle = [page(f' AND timestamp>="{stamp}"')[0] for _ in range(pages)]

        # The whole log through the CLI, against reading the records from the files.
        start = time.perf_counter()
        raw = sum(1 for _ in LogReader(log_dir(str(run_dir))).forward())
        raw_s = time.perf_counter() - start
        cli = [sys.executable, "-m", "trainworks.cli.main", "custom-jobs", "stream-logs", name, "--no-follow"]
        env = {**os.environ, "TRAINWORKS_ENDPOINT": server.url}
        start = time.perf_counter()
        streamed = subprocess.run(cli, env=env, stdout=subprocess.PIPE, check=True).stdout.count(b"\n")
        cli_s = time.perf_counter() - start
        return {
            "lines": lines,
            "first_page_entries": len(entries),
            "first_page_s": common.summary(first),
            "middle_page_s": common.summary(middle),
            "cli_lines": streamed,
            "cli_s": cli_s,
            "cli_lines_per_s": streamed / cli_s,
            "raw_records": raw,
            "raw_s": raw_s,
            "cli_ratio": cli_s / raw_s,
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {
        "machine": common.machine(),
        "capture": capture_overhead(args.lines, args.trials),
        "reading": reading(args.lines, args.pages),
    }
    if args.json:
        print(common.dump_json(result))
        return
    capture, read = result["capture"], result["reading"]
    print(f"capture of {capture['lines']:,} lines")
    print(
        common.markdown_table(
            ["run", "median", "min", "max"],
            [
                [
                    "stdout to a file (baseline)",
                    *(common.fmt(capture["direct_s"][k]) for k in ("median", "min", "max")),
                ],
                [
                    "through the supervisor's capture",
                    *(common.fmt(capture["captured_s"][k]) for k in ("median", "min", "max")),
                ],
            ],
        )
    )
    print(f"ratio: {capture['ratio']:.2f}x (target <= 1.3x)\n")
    print(f"reading a {read['lines']:,}-line job")
    print(
        f"entries:list first page ({read['first_page_entries']} entries): "
        f"p50 {common.fmt(read['first_page_s']['median'])}"
    )
    print(
        f"entries:list page from the middle: p50 {common.fmt(read['middle_page_s']['median'])} "
        "(target < 100 ms)"
    )
    print(
        f"CLI stream-logs --no-follow: {read['cli_lines']:,} lines in {read['cli_s']:.2f} s "
        f"({read['cli_lines_per_s']:,.0f} lines/s); records read from the files: {read['raw_s']:.2f} s; "
        f"ratio {read['cli_ratio']:.1f}x"
    )
    print(json.dumps({"capture_ratio": round(capture["ratio"], 3)}))


if __name__ == "__main__":
    main()
