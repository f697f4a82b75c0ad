"""Managed datasets and the model registry against a real server, each beside a plain-Python baseline.

One real server on 127.0.0.1 (local buckets under its home); each measurement has a baseline measured in
the same run, trials interleaved and the side that goes first alternated (so drift on a shared machine hits
both alike). Medians (and p90) over the measured trials, after unmeasured warm-up trials.

1. Tabular dataset create: a seeded CSV of 200,000 rows x 10 columns (~20 MB) written straight into the
   server's bucket folder (`<home>/buckets/bench-data/table.csv`); `POST .../datasets` naming it, until the
   operation is done (the server reads, parses and checks every row, then stores its own copy). Baselines:
   (a) reading and parsing the same file with Python's csv module into lists, in the benchmark process;
   (b) a plain file copy (`shutil.copyfile`) of it. Each created dataset must report 200,000 items; it is
   deleted (untimed) before the next trial.
2. Export with fractionSplit 0.8/0.1/0.1 to CSV shards, the path a training pipeline takes before its job
   starts. There is no REST call for an export alone, so it runs in-process: `DatasetService.export` built
   as wiring.py builds it, over a copy of the server's SQLite database (taken with SQLite's
   backup API after the dataset exists, so the live server's database is never touched) and over the
   server's own bucket root and dataset files. It loads the server's stored copy of the rows, orders them by
   SHA-256 of seed, index and content, cuts them exactly and writes 5,000-row shards. Baseline: a
   straightforward Python split of the same stored file: csv.reader, each row sent to a set by a SHA-256 of
   its index and content against the cumulative fractions (no sort, so the proportions are approximate),
   csv.writer shards of the same size. Both outputs are checked (every row written once, shard counts).
3. The model registry:
   (a) `models:upload` of a seeded artifact directory of ~100 MB (four files) in the server's bucket, until
       the operation is done (the registry copies the directory under its home) vs `shutil.copytree` of the
       same directory. Each uploaded model is deleted (untimed) before the next trial;
   (b) plain API latency: `GET .../models/M@1` vs `GET .../customJobs/J` of a finished one-replica job, one
       request each per trial over one keep-alive connection per side.

The server (and so the one job it ran) is stopped by PID at the end, even on errors; the benchmark's own
temporary folders are removed.

    python benchmarks/datasets_registry.py [--create-trials 7] [--export-trials 5] [--upload-trials 10]
        [--get-trials 500] [--warmup 1] [--rows 200000] [--json]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import math
import random
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from trainworks.kernel.projects import Projects
from trainworks.kinds.datasets.files import SHARD_ROWS
from trainworks.kinds.datasets.service import DatasetService
from trainworks.kinds.datasets.store import DatasetStore
from trainworks.storage.gcs import ObjectStore
from trainworks.store.database import Database

try:
    from benchmarks import common
except ImportError:  # run as a script: python benchmarks/datasets_registry.py
    import common  # type: ignore[no-redef]

SEED = 20240712
TABULAR = "gs://google-cloud-aiplatform/schema/dataset/metadata/tabular_1.0.0.yaml"
IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/pytorch-cpu.2-1:latest"
DATA_BUCKET = "bench-data"
EXPORT_BUCKET = "bench-export"
MODEL_BUCKET = "bench-models"
TABLE_KEY = "table.csv"
COLUMNS = ["id", "label", "ts", "country", "f1", "f2", "f3", "f4", "f5", "f6"]
COUNTRIES = ["de", "fr", "us", "jp", "br", "in", "ng", "au"]
FRACTIONS = (0.8, 0.1, 0.1)
SETS = ("training", "validation", "test")
ARTIFACT_FILES = {  # name: bytes, ~100 MB in all
    "model.pt": 64 * 1024 * 1024,
    "optimizer.pt": 28 * 1024 * 1024,
    "tokenizer.bin": 8 * 1024 * 1024,
    "config.json": 4096,
}
GET_WARMUP = 20


# ------------------------------------------------------------------------------------------ data
def write_table(path: Path, rows: int) -> int:
    """Seeded rows of ids, a label, an RFC 3339 time, a category and six floats; returns the file size."""
    rng = random.Random(SEED)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(COLUMNS)
        for i in range(rows):
            writer.writerow(
                [
                    i,
                    rng.randrange(2),
                    f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:{(i * 7) % 60:02d}Z",
                    rng.choice(COUNTRIES),
                    *(f"{rng.gauss(0, 100):.6f}" for _ in range(6)),
                ]
            )
    return path.stat().st_size


def write_artifacts(folder: Path) -> int:
    """The model directory (seeded random bytes, a small JSON config); returns its size."""
    rng = random.Random(SEED)
    folder.mkdir(parents=True, exist_ok=True)
    for name, size in ARTIFACT_FILES.items():
        data = b'{"hidden": 1024, "layers": 24}\n'.ljust(size, b" ") if name.endswith(".json") else None
        (folder / name).write_bytes(data if data is not None else rng.randbytes(size))
    return sum((folder / name).stat().st_size for name in ARTIFACT_FILES)


# ------------------------------------------------------------------------------------------ helpers
def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = action()
    return time.perf_counter() - t0, result


def interleaved(trials: int, warmup: int, trial: Callable[[int, bool], dict[str, float]]) -> dict[str, Any]:
    """Runs `trial(index, reverse)` warmup + trials times; `reverse` alternates which side goes first."""
    rows = []
    for index in range(warmup + trials):
        outcome = trial(index, index % 2 == 1)
        if index >= warmup:
            rows.append(outcome)
    return {key: common.summary([r[key] for r in rows]) for key in rows[0]}


def in_order(reverse: bool, *steps: Callable[[], None]) -> None:
    for step in reversed(steps) if reverse else steps:
        step()


def ok(response: httpx.Response, what: str) -> dict[str, Any]:
    if response.status_code != 200:
        raise RuntimeError(f"{what}: {response.status_code} {response.text[:500]}")
    return response.json()  # type: ignore[no-any-return]


def until_done(http: httpx.Client, operation: dict[str, Any], what: str) -> dict[str, Any]:
    """The finished operation (the server answers these done; poll in case one is not)."""
    deadline = time.monotonic() + 120
    while not operation.get("done"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {operation['name']} not done within 120s")
        time.sleep(0.01)
        operation = ok(http.get(f"/v1/{operation['name']}"), what)
    if "error" in operation:
        raise RuntimeError(f"{what} failed: {operation['error']}")
    return operation


# ------------------------------------------------------------------------------------------ 1. create
def create_dataset(http: httpx.Client, name: str) -> dict[str, Any]:
    body = {
        "displayName": name,
        "metadataSchemaUri": TABULAR,
        "metadata": {"inputConfig": {"gcsSource": {"uri": [f"gs://{DATA_BUCKET}/{TABLE_KEY}"]}}},
    }
    operation = ok(http.post(f"/v1/{common.PARENT}/datasets", json=body), "create dataset")
    return until_done(http, operation, "create dataset")["response"]  # type: ignore[no-any-return]


def parse_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        records = list(csv.reader(handle))
    return records[0], records[1:]


def create_trial(
    http: httpx.Client, table: Path, scratch: Path, rows: int, index: int, reverse: bool
) -> dict[str, float]:
    out: dict[str, float] = {}
    created: list[str] = []

    def server_create() -> None:
        out["create"], dataset = timed(lambda: create_dataset(http, f"bench-create-{index}"))
        created.append(dataset["name"])
        if int(dataset.get("dataItemCount", 0)) != rows:
            raise RuntimeError(f"the dataset holds {dataset.get('dataItemCount')} items, not {rows}")

    def csv_parse() -> None:
        out["parse"], (header, body) = timed(lambda: parse_csv(table))
        if header != COLUMNS or len(body) != rows:
            raise RuntimeError(f"csv parse read {len(body)} rows, not {rows}")

    def copy() -> None:
        target = scratch / f"copy-{index}.csv"
        out["copy"], _ = timed(lambda: shutil.copyfile(table, target))
        target.unlink()

    in_order(reverse, server_create, csv_parse, copy)
    for name in created:  # untimed: the next trial starts without this copy of the rows
        until_done(http, ok(http.delete(f"/v1/{name}"), "delete dataset"), "delete dataset")
    return out


# ------------------------------------------------------------------------------------------ 2. export
def snapshot_database(live: Path, copy: Path) -> None:
    """A consistent copy of the server's SQLite database (WAL included) through SQLite's backup API."""
    source = sqlite3.connect(f"file:{live}?mode=ro", uri=True)
    target = sqlite3.connect(copy)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def export_service(db: Database, home: Path) -> DatasetService:
    """Built as wiring.py builds it, over the copied database and the server's home."""
    projects = Projects(db)
    return DatasetService(
        DatasetStore(db),
        projects,
        ObjectStore((home / "buckets").resolve()),
        home / "datasets",
    )


def baseline_split(source: Path, out_dir: Path) -> dict[str, int]:
    """csv.reader, a SHA-256 of index and content per row against the cumulative fractions, csv.writer
    shards of SHARD_ROWS rows with the header; returns the rows per set."""
    bounds = (FRACTIONS[0], FRACTIONS[0] + FRACTIONS[1], sum(FRACTIONS))
    sets: dict[str, list[list[str]]] = {name: [] for name in SETS}
    with source.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        for i, row in enumerate(reader):
            digest = hashlib.sha256(i.to_bytes(8, "big") + ",".join(row).encode()).digest()
            u = int.from_bytes(digest[:8], "big") / 2**64
            name = SETS[0] if u < bounds[0] else SETS[1] if u < bounds[1] else SETS[2]
            sets[name].append(row)
    out_dir.mkdir(parents=True)
    for name, chosen in sets.items():
        shards = max(1, math.ceil(len(chosen) / SHARD_ROWS))
        for s in range(shards):
            path = out_dir / f"{name}-{s:05d}-of-{shards:05d}.csv"
            with path.open("w", encoding="utf-8", newline="") as handle:
                writer = csv.writer(handle, lineterminator="\n")
                writer.writerow(header)
                writer.writerows(chosen[s * SHARD_ROWS : (s + 1) * SHARD_ROWS])
    return {name: len(chosen) for name, chosen in sets.items()}


def shard_count(counts: dict[str, int]) -> int:
    return sum(max(1, math.ceil(n / SHARD_ROWS)) for n in counts.values())


def export_trial(
    service: DatasetService,
    dataset_id: str,
    data_file: Path,
    buckets: Path,
    scratch: Path,
    rows: int,
    index: int,
    reverse: bool,
) -> dict[str, float]:
    out: dict[str, float] = {}
    prefix = f"trial-{index}"
    config = {
        "datasetId": dataset_id,
        "gcsDestination": {"outputUriPrefix": f"gs://{EXPORT_BUCKET}/{prefix}/"},
        "fractionSplit": dict(
            zip(("trainingFraction", "validationFraction", "testFraction"), FRACTIONS, strict=True)
        ),
    }

    def export() -> None:
        out["export"], result = timed(
            lambda: service.export(common.PROJECT, common.LOCATION, config, now=datetime.now(UTC))
        )
        written = sorted(p.name for p in (buckets / EXPORT_BUCKET / prefix).rglob("*.csv"))
        if sum(result.counts.values()) != rows or len(written) != shard_count(result.counts):
            raise RuntimeError(f"the export wrote {result.counts} in {len(written)} shards")

    def baseline() -> None:
        out["baseline"], counts = timed(lambda: baseline_split(data_file, scratch / f"split-{index}"))
        if sum(counts.values()) != rows or len(list((scratch / f"split-{index}").iterdir())) != shard_count(
            counts
        ):
            raise RuntimeError(f"the baseline split wrote {counts}")

    in_order(reverse, export, baseline)
    shutil.rmtree(buckets / EXPORT_BUCKET / prefix)  # untimed: keep the disk use flat
    shutil.rmtree(scratch / f"split-{index}")
    return out


# ------------------------------------------------------------------------------------------ 3. registry
def upload_model(http: httpx.Client, index: int) -> dict[str, Any]:
    body = {
        "model": {
            "displayName": f"bench-model-{index}",
            "artifactUri": f"gs://{MODEL_BUCKET}/artifacts/",
            "containerSpec": {"imageUri": IMAGE},
        }
    }
    operation = ok(http.post(f"/v1/{common.PARENT}/models:upload", json=body), "models:upload")
    return until_done(http, operation, "models:upload")["response"]  # type: ignore[no-any-return]


def upload_trial(
    http: httpx.Client, artifacts: Path, scratch: Path, index: int, reverse: bool
) -> dict[str, float]:
    out: dict[str, float] = {}
    models: list[str] = []

    def upload() -> None:
        out["upload"], response = timed(lambda: upload_model(http, index))
        models.append(response["model"])
        if response.get("modelVersionId") != "1":
            raise RuntimeError(f"models:upload answered {response}")

    def copytree() -> None:
        target = scratch / f"tree-{index}"
        out["copytree"], _ = timed(lambda: shutil.copytree(artifacts, target))
        shutil.rmtree(target)

    in_order(reverse, upload, copytree)
    for name in models:  # untimed: the registry copy goes with the model
        until_done(http, ok(http.delete(f"/v1/{name}"), "delete model"), "delete model")
    return out


def get_trial(
    model_http: httpx.Client, job_http: httpx.Client, model: str, job: str, reverse: bool
) -> dict[str, float]:
    out: dict[str, float] = {}

    def get_model() -> None:
        out["model"], response = timed(lambda: model_http.get(f"/v1/{model}@1"))
        if ok(response, "get model")["versionId"] != "1":
            raise RuntimeError(f"get {model}@1 answered {response.text[:300]}")

    def get_job() -> None:
        out["job"], response = timed(lambda: job_http.get(f"/v1/{job}"))
        if ok(response, "get custom job")["state"] != "JOB_STATE_SUCCEEDED":
            raise RuntimeError(f"get {job} answered {response.text[:300]}")

    in_order(reverse, get_model, get_job)
    return out


def finished_job(http: httpx.Client) -> str:
    body = common.custom_job(common.container_pool(["true"]), name="bench-get")
    job = ok(http.post(f"/v1/{common.PARENT}/customJobs", json=body), "create custom job")
    done = common.wait_job(http, job["name"])
    if done["state"] != "JOB_STATE_SUCCEEDED":
        raise RuntimeError(f"{job['name']} ended {done['state']}: {done.get('error')}")
    return str(job["name"])


# ------------------------------------------------------------------------------------------ report
def ratios(results: dict[str, Any]) -> dict[str, float]:
    """Medians over medians: measured / against, as the tables show them."""
    pairs = {
        "create_vs_csv_parse": ("create", "create", "parse"),
        "create_vs_file_copy": ("create", "create", "copy"),
        "export_vs_python_split": ("export", "export", "baseline"),
        "upload_vs_copytree": ("upload", "upload", "copytree"),
        "get_model_vs_get_custom_job": ("get", "model", "job"),
    }
    return {
        key: results[part][measured]["median"] / results[part][against]["median"]
        for key, (part, measured, against) in pairs.items()
    }


def report(results: dict[str, Any], elapsed: float) -> str:
    data, create, export = results["data"], results["create"], results["export"]
    upload, get = results["upload"], results["get"]
    lines = [
        "## Managed datasets and the model registry vs plain Python on the same machine",
        "",
        f"Table: {data['rows']:,} rows x {len(COLUMNS)} columns, {data['table_bytes'] / 1e6:.1f} MB. "
        f"Artifacts: {len(ARTIFACT_FILES)} files, {data['artifact_bytes'] / 1e6:.0f} MB.",
        "",
        "### 1. Tabular dataset create (until the operation is done)",
        "",
        common.table(
            [
                (
                    "POST datasets (read + parse + check + store)",
                    create["create"],
                    "csv.reader of the same file",
                    create["parse"],
                ),
                ("POST datasets", create["create"], "shutil.copyfile", create["copy"]),
            ],
            size=data["table_bytes"],
        ),
        "",
        "### 2. Export, fractionSplit 0.8/0.1/0.1, 5,000-row CSV shards (DatasetService.export in-process)",
        "",
        common.table(
            [
                (
                    "DatasetService.export (exact cut after a SHA-256 order)",
                    export["export"],
                    "csv + per-row SHA-256 + csv shards",
                    export["baseline"],
                )
            ],
            size=data["table_bytes"],
        ),
        "",
        "### 3. Model registry",
        "",
        common.table(
            [("models:upload (until done)", upload["upload"], "shutil.copytree", upload["copytree"])],
            size=data["artifact_bytes"],
        ),
        "",
        common.table([("GET models/M@1", get["model"], "GET customJobs/J", get["job"])]),
        "",
        f"{elapsed:.0f}s in all; machine: {common.machine()}",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ main
def run(args: argparse.Namespace, server: common.Server, scratch: Path) -> dict[str, Any]:
    home = server.home
    buckets = home / "buckets"
    table_path = buckets / DATA_BUCKET / TABLE_KEY
    artifacts = buckets / MODEL_BUCKET / "artifacts"
    results: dict[str, Any] = {
        "data": {
            "rows": args.rows,
            "table_bytes": write_table(table_path, args.rows),
            "artifact_bytes": write_artifacts(artifacts),
        }
    }
    with httpx.Client(base_url=server.url, timeout=300.0) as http:
        results["create"] = interleaved(
            args.create_trials,
            args.warmup,
            lambda i, r: create_trial(http, table_path, scratch, args.rows, i, r),
        )

        dataset = create_dataset(http, "bench-export")
        dataset_id = dataset["name"].rsplit("/", 1)[-1]
        snapshot_database(home / "trainworks.db", scratch / "copy.db")
        db = Database(f"sqlite:///{scratch / 'copy.db'}", migrate=False)
        try:
            service = export_service(db, home)
            row = service.find(common.PROJECT, common.LOCATION, dataset_id)
            data_file = Path(str(row.data_path))
            results["export"] = interleaved(
                args.export_trials,
                args.warmup,
                lambda i, r: export_trial(service, dataset_id, data_file, buckets, scratch, args.rows, i, r),
            )
        finally:
            db.dispose()

        results["upload"] = interleaved(
            args.upload_trials, args.warmup, lambda i, r: upload_trial(http, artifacts, scratch, i, r)
        )

        model = upload_model(http, 10_000)["model"]
        job = finished_job(http)
        with (
            httpx.Client(base_url=server.url, timeout=60.0) as model_http,
            httpx.Client(base_url=server.url, timeout=60.0) as job_http,
        ):
            results["get"] = interleaved(
                args.get_trials, GET_WARMUP, lambda _i, r: get_trial(model_http, job_http, model, job, r)
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--create-trials", type=int, default=7, help="measured dataset creates per side")
    parser.add_argument("--export-trials", type=int, default=5, help="measured exports per side")
    parser.add_argument("--upload-trials", type=int, default=10, help="measured models:upload per side")
    parser.add_argument("--get-trials", type=int, default=500, help="measured gets per side")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured trials before 1-3a")
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the seeded table")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args()
    trials = (args.create_trials, args.export_trials, args.upload_trials, args.get_trials, args.rows)
    if min(trials) < 1 or args.warmup < 0:
        parser.error("trial counts and --rows must be >= 1 and --warmup >= 0")
    # SIGTERM (a timeout, a CI cancel) must still run the finally below that stops the server
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    started = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="trainworks-datasets-bench-"))
    server = common.Server()
    try:
        server.start()
        results = run(args, server, scratch)
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    results["ratios"] = ratios(results)
    elapsed = time.perf_counter() - started
    if args.json:
        print(
            common.dump_json({"datasets_registry": results, "seconds": elapsed, "machine": common.machine()})
        )
    else:
        print(report(results, elapsed))


if __name__ == "__main__":
    main()
