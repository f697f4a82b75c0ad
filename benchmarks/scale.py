"""Scale: 100,000 custom jobs in the store: list pages (filters, page 50 by tokens), a GET, /metrics and the
console's job list, against the same server with 1,000 jobs, measured in the same run.

Each database is filled before its server starts, with the project's own tables written directly by
SQLAlchemy (no API creates): `--jobs` CustomJobs over the last 30 days with realistic specs, labels `team`
(10 values, a..j) and `env` (prod 1 in 3), mostly terminal (succeeded 75%, failed 15%, cancelled 10%, one
exited replica each, so the costs report has something to bill), the newest `--active` of them QUEUED in a
stocked-out region (the controller tracks them, nothing is launched); and `--others` tuning jobs and as
many training pipelines, all terminal. The baseline is the same fill at `--baseline-jobs` (and `--others`
scaled alike), measured in the same run; the ratio column is p50 at the full size over p50 at the baseline.

Every request runs `--requests` times from one client (after `--warmup` unmeasured ones): p50 and p99.
Page 50 is reached by following nextPageToken from page 1 (page size 50); its token is then requested
again and again (tokens are stateless). Where the baseline has fewer pages, its deepest page stands in.
`store` is the store's own page query (`JobStore.page`, SQL plus rows, no HTTP) in this process.

The console's job list (src/trainworks/console/static/assets/pages/jobs.js) makes two calls for its first
render: customJobs?pageSize=50, then the costs report over that page's create-time window; `console`
times the two in a row.

Targets (issue 18): label filter page 50 p50 < 20 ms; /metrics p50 < 50 ms, at 100,000 jobs.

    python benchmarks/scale.py [--jobs 100000] [--baseline-jobs 1000] [--others 10000] [--active 100]
                               [--requests 100] [--warmup 5] [--postgres] [--json]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
from sqlalchemy import insert

try:
    from benchmarks import common
    from benchmarks.load import INVENTORY  # us-central1 stocked out: its jobs stay QUEUED
except ImportError:  # run as a script: python benchmarks/scale.py
    import common  # type: ignore[no-redef]
    from load import INVENTORY  # type: ignore[no-redef]

from trainworks.jobs.enums import JobState, PipelineState
from trainworks.kernel import listing
from trainworks.kernel.projects import Projects
from trainworks.kinds.custom_jobs.service import job_filter
from trainworks.kinds.custom_jobs.store import JobStore
from trainworks.store.database import Database
from trainworks.store.tables import (
    CustomJobRow,
    ReplicaRow,
    TrainingPipelineRow,
    TuningJobRow,
    job_label_values,
)

PAGE = 50
DEEP_PAGE = 50
TEAMS = "abcdefghij"
SPAN = timedelta(days=30)
BATCH = 5000
EPOCH_MS = 1_577_836_800_000  # kernel/ids.py: server ids are time-ordered from 2020-01-01
TARGETS_MS = {"custom: labels.team=a, page 50": 20.0, "GET /metrics": 50.0}
CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"

JOBS = f"/v1/{common.PARENT}/customJobs"
TUNING = f"/v1/{common.PARENT}/hyperparameterTuningJobs"
PIPELINES = f"/v1/{common.PARENT}/trainingPipelines"
COSTS = f"/trainworks/v1/{common.PARENT}/costs"

S = JobState
P = PipelineState
# (state, share) of the terminal jobs
TERMINAL_MIX = ((S.JOB_STATE_SUCCEEDED, 0.75), (S.JOB_STATE_FAILED, 0.15), (S.JOB_STATE_CANCELLED, 0.10))
PIPELINE_STATE = {
    S.JOB_STATE_SUCCEEDED: P.PIPELINE_STATE_SUCCEEDED,
    S.JOB_STATE_FAILED: P.PIPELINE_STATE_FAILED,
    S.JOB_STATE_CANCELLED: P.PIPELINE_STATE_CANCELLED,
}
ERROR = {"code": 3, "message": "The replica workerpool0-0 exited with a non-zero status of 1."}
CANCELLED = {"code": 1, "message": "CANCELED"}


# ------------------------------------------------------------------ the fill
def worker_pools(i: int) -> list[dict[str, Any]]:
    container = {
        "imageUri": "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-1.py310:latest",
        "command": ["python", "-m", "trainer.task"],
        "args": [f"--learning-rate=0.0{1 + i % 9}", f"--epochs={5 + i % 20}", "--batch-size=64"],
    }
    return [
        {"containerSpec": container, "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1"}
    ]


def labels_of(i: int) -> dict[str, str]:
    return {"team": TEAMS[i % len(TEAMS)], "env": "prod" if i % 3 == 0 else "dev"}


def custom_spec(i: int) -> dict[str, Any]:
    # As the API stores a create (kernel/wire.py input_dict): displayName, jobSpec, labels.
    job_spec = {
        "workerPoolSpecs": worker_pools(i),
        "baseOutputDirectory": {"outputUriPrefix": f"gs://bench-out/runs/{i}"},
    }
    return {"displayName": f"train-{i:06d}", "jobSpec": job_spec, "labels": labels_of(i)}


def tuning_spec(i: int) -> dict[str, Any]:
    study = {
        "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
        "parameters": [
            {
                "parameterId": "learning_rate",
                "doubleValueSpec": {"minValue": 0.0001, "maxValue": 0.1},
                "scaleType": "UNIT_LOG_SCALE",
            }
        ],
    }
    trial = {"workerPoolSpecs": worker_pools(i)}
    return {
        "displayName": f"tune-{i:06d}",
        "studySpec": study,
        "maxTrialCount": 8,
        "parallelTrialCount": 2,
        "trialJobSpec": trial,
        "labels": labels_of(i),
    }


def pipeline_spec(i: int) -> dict[str, Any]:
    inputs = {
        "workerPoolSpecs": worker_pools(i),
        "baseOutputDirectory": {"outputUriPrefix": "gs://bench-out/p"},
    }
    return {
        "displayName": f"pipeline-{i:06d}",
        "trainingTaskDefinition": CUSTOM_TASK,
        "trainingTaskInputs": inputs,
        "labels": labels_of(i),
    }


def terminal_state(rng: random.Random) -> JobState:
    draw, upto = rng.random(), 0.0
    for state, share in TERMINAL_MIX:
        upto += share
        if draw < upto:
            return state
    return TERMINAL_MIX[-1][0]


def job_id(created: datetime, rng: random.Random) -> int:
    millis = int(created.timestamp() * 1000) - EPOCH_MS
    return (millis << 22) | rng.getrandbits(22)


def job_columns(i: int, count: int, now: datetime, rng: random.Random, active: bool) -> dict[str, Any]:
    """The columns every job table shares, for the i-th of `count` jobs (0 the oldest)."""
    created = now - SPAN + SPAN * (i + 0.5) / count
    if active:
        state, start, end, error = S.JOB_STATE_QUEUED, None, None, None
    else:
        state = terminal_state(rng)
        start = created + timedelta(seconds=rng.randint(1, 120))
        end = start + timedelta(seconds=rng.randint(30, 7200))
        error = (
            ERROR if state == S.JOB_STATE_FAILED else CANCELLED if state == S.JOB_STATE_CANCELLED else None
        )
    return {
        "id": job_id(created, rng),
        "project_number": "",  # set by the caller
        "location": common.LOCATION,
        "display_name": "",
        "state": int(state),
        "spec": {},
        "labels": labels_of(i),
        "error": error,
        "create_time": created,
        "update_time": end or created,
        "start_time": start,
        "end_time": end,
        "delete_operation_id": None,
    }


def batches(count: int) -> Iterator[range]:
    for first in range(0, count, BATCH):
        yield range(first, min(count, first + BATCH))


def fill(url: str, jobs: int, others: int, active: int, seed: int = 1) -> dict[str, Any]:
    """Migrate the database at `url` and write the jobs into it; what was written, and how long it took."""
    started = time.perf_counter()
    rng = random.Random(seed)
    db = Database(url)
    try:
        number = Projects(db).number(common.PROJECT, common.LOCATION)
        now = datetime.now(UTC) - timedelta(minutes=1)
        sample_ids: list[int] = []
        with db.session() as session:
            for chunk in batches(jobs):
                rows, replicas = [], []
                for i in chunk:
                    row = job_columns(i, jobs, now, rng, active=i >= jobs - active)
                    spec = custom_spec(i)
                    row.update(project_number=number, display_name=spec["displayName"], spec=spec)
                    row.update(outcome=None, teardown_started=None, attempt=0, history=[], priority=0)
                    row.update(
                        zone=None if row["start_time"] is None else "us-central1-a", waiting_reason=None
                    )
                    rows.append(row)
                    if row["start_time"] is not None:
                        replicas.append(replica(row, i))
                session.execute(insert(CustomJobRow), rows)
                session.execute(insert(CustomJobRow.labels_row), label_rows(rows))
                if replicas:
                    session.execute(insert(ReplicaRow), replicas)
                sample_ids += [r["id"] for r in rows[:: max(1, len(rows) // 20)]]
            for table, spec_of in ((TuningJobRow, tuning_spec), (TrainingPipelineRow, pipeline_spec)):
                for chunk in batches(others):
                    rows = []
                    for i in chunk:
                        row = job_columns(i, others, now, rng, active=False)
                        spec = spec_of(i)
                        row.update(project_number=number, display_name=spec["displayName"], spec=spec)
                        if table is TuningJobRow:
                            row["outcome"] = None
                        else:
                            row["state"] = int(PIPELINE_STATE[S(row["state"])])
                            row.update(backing_kind="custom", backing_id=None, export=None, model=None)
                        rows.append(row)
                    session.execute(insert(table), rows)
                    session.execute(insert(table.labels_row), label_rows(rows))
        if db.dialect == "postgresql":
            with db.engine.connect() as connection:  # planner statistics, as autovacuum would gather
                connection.exec_driver_sql("ANALYZE")
    finally:
        db.dispose()
    return {"seconds": time.perf_counter() - started, "number": number, "sample_ids": sample_ids}


def label_rows(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The label rows the server writes with each job it inserts (bulk inserts skip that ORM event)."""
    return [label for job in jobs for label in job_label_values(SimpleNamespace(**job))]


def replica(job: dict[str, Any], i: int) -> dict[str, Any]:
    return {
        "job_id": job["id"],
        "pool": 0,
        "replica_index": 0,
        "host": "127.0.0.1",
        "port": 20000 + i % 20000,
        "phase": "exited",
        "pid": None,
        "pid_start": None,
        "exit_code": 1 if job["state"] == int(S.JOB_STATE_FAILED) else 0,
        "detail": None,
        "run_dir": f"/var/lib/trainworks/jobs/{job['id']}/workerpool0-0",
        "attempt": 0,
        "restarts": 0,
        "preempt_requested": False,
        "backend_ref": None,
        "started_at": job["start_time"],
        "ended_at": job["end_time"],
    }


# ------------------------------------------------------------------ the measurements
@dataclass
class Scenario:
    name: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    deep: bool = False  # page DEEP_PAGE of the list, reached by its tokens
    store: bool = False  # also time JobStore.page for it
    page: int = 1  # the page actually measured (set when deep)


def scenarios(sample_name: str) -> list[Scenario]:
    out: list[Scenario] = []
    for label, filter_text in (
        ("custom: no filter", ""),
        ("custom: labels.team=a", "labels.team=a"),
        ("custom: state=FAILED", "state=JOB_STATE_FAILED"),
        ("custom: labels.team=a AND state=SUCCEEDED", "labels.team=a AND state=JOB_STATE_SUCCEEDED"),
    ):
        params = {"pageSize": PAGE, **({"filter": filter_text} if filter_text else {})}
        out.append(Scenario(f"{label}, page 1", JOBS, params, store=True))
        out.append(Scenario(f"{label}, page {DEEP_PAGE}", JOBS, params, deep=True, store=True))
    for label, filter_text in (
        ("state=QUEUED (few)", "state=JOB_STATE_QUEUED"),
        ("labels.team=nobody (none)", "labels.team=nobody"),
        ("labels.team=a AND state=QUEUED (few)", "labels.team=a AND state=JOB_STATE_QUEUED"),
        ("display_name=train-000123 (one)", "display_name=train-000123"),
        ('display_name:"*12345*" (the console\'s name search)', 'display_name:"*12345*"'),
    ):
        params = {"pageSize": PAGE, "filter": filter_text}
        out.append(Scenario(f"custom: {label}, page 1", JOBS, params, store=True))
    window = {"pageSize": PAGE, "filter": 'create_time>="2000-01-01T00:00:00Z" AND labels.env=prod'}
    out.append(Scenario("custom: create_time>= AND labels.env=prod", JOBS, window, store=True))
    for kind, path in (("tuning", TUNING), ("pipelines", PIPELINES)):
        out.append(Scenario(f"{kind}: no filter, page 1", path, {"pageSize": PAGE}))
        labelled = {"pageSize": PAGE, "filter": "labels.team=a"}
        out.append(Scenario(f"{kind}: labels.team=a, page {DEEP_PAGE}", path, labelled, deep=True))
    out.append(Scenario("GET a custom job", f"/v1/{sample_name}"))
    out.append(Scenario("GET /metrics", "/metrics"))
    return out


def follow(client: httpx.Client, scenario: Scenario) -> None:
    """Give a deep scenario the token of page DEEP_PAGE (or of the deepest page there is)."""
    params, page = dict(scenario.params), 1
    while page < DEEP_PAGE:
        body = ok(client.get(scenario.path, params=params)).json()
        token = body.get("nextPageToken")
        if not token:
            break
        params["pageToken"], page = token, page + 1
    scenario.params, scenario.page = params, page


def ok(response: httpx.Response) -> httpx.Response:
    if response.status_code != 200:
        raise RuntimeError(f"{response.request.url}: {response.status_code} {response.text[:300]}")
    return response


def timings(call: Callable[[], object], requests: int, warmup: int) -> dict[str, float]:
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return {"p50": common.percentile(samples, 50), "p99": common.percentile(samples, 99)}


def console_list(client: httpx.Client) -> None:
    """The console's first render of #/jobs: the page, then the costs over its create-time window."""
    jobs = ok(client.get(JOBS, params={"pageSize": PAGE})).json()["customJobs"]
    window = f'create_time>="{jobs[-1]["createTime"]}" AND create_time<="{jobs[0]["createTime"]}"'
    ok(client.get(COSTS, params={"by": "job", "filter": window}))


def store_page(store: JobStore, number: str, scenario: Scenario) -> Callable[[], object]:
    """The store's own page query for the scenario, as the service makes it."""
    filter_text = scenario.params.get("filter", "")
    where = job_filter(filter_text)
    token = scenario.params.get("pageToken")
    after = listing.read_page_token(token, listing.fingerprint(filter_text)) if token else None
    return lambda: store.page(number, common.LOCATION, where, after, PAGE + 1)


def measure(url: str, server: common.Server, number: str, sample: int, args: argparse.Namespace) -> dict:
    name = f"projects/{number}/locations/{common.LOCATION}/customJobs/{sample}"
    out: dict[str, Any] = {}
    db = Database(url, migrate=False)
    store = JobStore(db)
    with httpx.Client(base_url=server.url, timeout=60.0) as client:
        for scenario in scenarios(name):
            if scenario.deep:
                follow(client, scenario)

            def call(s: Scenario = scenario) -> object:
                return ok(client.get(s.path, params=s.params))

            result = timings(call, args.requests, args.warmup)
            result["page"] = scenario.page
            if scenario.store:
                result["store_p50"] = timings(
                    store_page(store, number, scenario), args.requests, args.warmup
                )["p50"]
            out[scenario.name] = result
        out["console: job list (list + costs)"] = timings(
            lambda: console_list(client), args.requests, args.warmup
        )
    db.dispose()
    return out


@contextmanager
def database(kind: str, root: Path, label: str, postgres: Any) -> Iterator[str]:
    if kind == "sqlite":
        home = root / f"home-{label}"
        home.mkdir()
        yield f"sqlite:///{home / 'trainworks.db'}"
    else:
        yield postgres.create_database(f"scale_{label}")


def run_size(kind: str, jobs: int, others: int, args: argparse.Namespace, postgres: Any) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="trainworks-scale-") as tmp:
        root = Path(tmp)
        inventory = root / "inventory.yaml"
        inventory.write_text(INVENTORY)
        with database(kind, root, str(jobs), postgres) as url:
            filled = fill(url, jobs, others, min(args.active, jobs))
            server_args = ["--inventory", str(inventory), "--database-url", url]
            with common.Server(server_args) as server:
                sample = filled["sample_ids"][len(filled["sample_ids"]) // 2]
                result = measure(url, server, filled["number"], sample, args)
    return {"jobs": jobs, "others": others, "fill_seconds": filled["seconds"], "requests": result}


@contextmanager
def postgres_server(wanted: bool) -> Iterator[Any]:
    if not wanted:
        yield None
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support
    from tests.support.postgres import PostgresServer

    with PostgresServer(database="scale_admin") as server:
        yield server


def report(kind: str, base: dict[str, Any], full: dict[str, Any]) -> str:
    rows = []
    for name, measured in full["requests"].items():
        against = base["requests"][name]
        page = ""
        if measured.get("page", 1) != 1 or against.get("page", 1) != 1:
            page = f"{against['page']} / {measured['page']}"
        target = TARGETS_MS.get(name)
        verdict = (
            "" if target is None else f"< {target:.0f} ms: {'yes' if measured['p50'] < target else 'NO'}"
        )
        rows.append(
            [
                name,
                page,
                f"{against['p50']:.1f}",
                f"{against['p99']:.1f}",
                f"{measured['p50']:.1f}",
                f"{measured['p99']:.1f}",
                f"{measured['p50'] / against['p50']:.2f}",
                f"{measured['store_p50']:.2f}" if "store_p50" in measured else "",
                verdict,
            ]
        )
    b, f = base["jobs"], full["jobs"]
    headers = [
        "request",
        f"page ({b:,} / {f:,})",
        f"{b:,} p50 ms",
        f"{b:,} p99 ms",
        f"{f:,} p50 ms",
        f"{f:,} p99 ms",
        "ratio p50",
        f"store.page p50 ms ({f:,})",
        "target (p50)",
    ]
    lines = [
        f"## Scale ({kind}): {f:,} custom jobs + {full['others']:,} tuning jobs + {full['others']:,} "
        f"pipelines, against {b:,} + {base['others']:,} + {base['others']:,}",
        "",
        common.markdown_table(headers, rows),
        "",
        f"- fill: {full['fill_seconds']:.1f}s for {f:,} jobs, {base['fill_seconds']:.1f}s for {b:,}",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=100_000, help="custom jobs in the measured store")
    parser.add_argument("--baseline-jobs", type=int, default=1000, help="custom jobs in the baseline store")
    parser.add_argument("--others", type=int, default=10_000, help="tuning jobs, and as many pipelines")
    parser.add_argument("--active", type=int, default=100, help="the newest jobs left QUEUED (stocked out)")
    parser.add_argument("--requests", type=int, default=100, help="measured requests per line")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured requests per line first")
    parser.add_argument("--postgres", action="store_true", help="also on a throwaway PostgreSQL")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args()

    started = time.perf_counter()
    scale = args.jobs / args.baseline_jobs
    base_others = max(1, math.ceil(args.others / scale)) if args.others else 0
    results: dict[str, Any] = {}
    with postgres_server(args.postgres) as postgres:
        for kind in ("sqlite", "postgresql") if args.postgres else ("sqlite",):
            base = run_size(kind, args.baseline_jobs, base_others, args, postgres)
            full = run_size(kind, args.jobs, args.others, args, postgres)
            results[kind] = {"baseline": base, "measured": full}
    elapsed = time.perf_counter() - started
    if args.json:
        print(common.dump_json({"scale": results, "seconds": elapsed, "machine": common.machine()}))
        return
    for kind, result in results.items():
        print(report(kind, result["baseline"], result["measured"]))
        print()
    print(f"{elapsed:.0f}s in all; machine: {common.machine()}")


if __name__ == "__main__":
    main()
