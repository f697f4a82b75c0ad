"""The submitter's client side: code staging through gcsfs, large objects, and `submit_run` without waiting.

All against one real server (its GCS JSON API and its REST API) on 127.0.0.1; each measurement has a baseline
measured in the same run, trials interleaved and the side that goes first alternated (so drift on a shared
machine hits both alike). Medians (and p90) over the measured trials, after unmeasured warm-up trials.

1. Code staging of a realistic package (seeded random content: ~200 .py modules in subpackages and a few
   binary data files, about 5 MB). Before each trial one module changes, so the content hash is new.
   (a) the first `stage_code` (zip + hash + exists check + bucket check + gcsfs upload) vs one raw
       `httpx.post` of the same zip bytes to `/upload/storage/v1/b/{bucket}/o?uploadType=media`;
   (b) `stage_code` again with the code unchanged (read + hash + exists check, nothing zipped or uploaded)
       vs the first stage:
       what the content hash saves;
   (c) `read_package(...).zip()` alone (read + hash + zip, no I/O to the server), so the split of (a) and (b)
       shows.
2. A 64 MiB object of seeded random bytes: `CodeStore.put_bytes` (a gcsfs resumable upload in 4 MiB
   chunks) vs one raw httpx media upload of the same bytes; `CodeStore.get_bytes` vs one raw httpx GET
   `alt=media`. Downloads are checked byte for byte.
3. `submit_run(cfg, wait=False)` of a 1-worker CPU job with the code already staged (its own target and
   gcsfs store, zip + hash + exists check, run.yaml upload, capacity preflight, create, the one status look,
   the ledger upload) vs a fresh `TrainworksClient` and `create_custom_job` of the equivalent body, built
   beforehand with `trainworks.submit.plan.build_custom_job`. The entry module exits at once; after each
   trial (untimed) the job is awaited and must have SUCCEEDED, so no work piles up and both bodies are known
   to run. The submitter's phases come from the times of its own events.

The stores and raw clients of 1 and 2 are made once and reused (connections kept), on both sides alike. The
server (and so every job it started) is stopped by PID at the end, even on errors.

    python benchmarks/submit_staging.py [--stage-trials 15] [--big-trials 5] [--submit-trials 10] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import yaml

from trainworks.client import ApiError, TrainworksClient
from trainworks.code_staging.store import CHUNK, CodeStore
from trainworks.submit.config import RunConfig, load_run_config
from trainworks.submit.plan import build_custom_job, make_run_id, plan_run
from trainworks.submit.staging import config_uri, read_package, stage_code
from trainworks.submit.submitter import LoggingEvents, submit_run

try:
    from benchmarks import common
except ImportError:  # run as a script: python benchmarks/submit_staging.py
    import common  # type: ignore[no-redef]

BUCKET = "bench-code"
PACKAGE = "benchpkg"
REGION = common.LOCATION
BIG_BYTES = 64 * 1024 * 1024
SEED = 20240611
SUBPACKAGES = 10
MODULES_PER_SUBPACKAGE = 20  # 200 modules, ~10 KB each
BINARY_FILES = {"data/embeddings.bin": 1_500_000, "data/vocab.bin": 1_000_000, "data/lookup.bin": 500_000}
WORDS = [
    *("batch", "loss", "grad", "step", "model", "layer", "weight", "bias", "scale", "shard", "rank", "epoch"),
    *("optimizer", "metric", "buffer", "tensor", "window", "feature", "label", "score", "norm", "mean"),
    *("var", "sample", "token", "vocab", "decay", "rate"),
]


# ------------------------------------------------------------------------------------------ the package
def _module_text(rng: random.Random, target_chars: int) -> str:
    """Plausible Python: imports, constants and small functions with seeded names and numbers."""
    lines = ['"""Generated for the staging benchmark."""', "", "import math", ""]
    size = sum(len(line) + 1 for line in lines)
    while size < target_chars:
        name = "_".join(rng.choices(WORDS, k=3))
        args = ", ".join(rng.sample(WORDS, 3))
        body = [
            f"def {name}_{rng.randrange(10_000)}({args}):",
            f'    """Combine {args} ({rng.random():.6f})."""',
            f"    total = {rng.random():.8f} * {rng.choice(WORDS)} + {rng.randrange(1000)}",
            f"    for i in range({rng.randrange(2, 64)}):",
            f"        total += math.sqrt(abs({rng.choice(WORDS)} - i * {rng.random():.5f}))",
            f"    return total / max(1, {rng.choice(WORDS)})",
            "",
            "",
        ]
        lines += body
        size += sum(len(line) + 1 for line in body)
    return "\n".join(lines)


def write_package(root: Path) -> Path:
    rng = random.Random(SEED)
    pkg = root / PACKAGE
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "task.py").write_text('"""The entry module: exits at once."""\n')
    for sub in range(SUBPACKAGES):
        folder = pkg / f"part{sub:02d}"
        folder.mkdir()
        (folder / "__init__.py").write_text("")
        for index in range(MODULES_PER_SUBPACKAGE - 1):
            (folder / f"mod{index:02d}.py").write_text(_module_text(rng, rng.randrange(7_000, 13_000)))
    for relative, size in BINARY_FILES.items():
        path = pkg / relative
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(rng.randbytes(size))
    return pkg


def touch_stamp(pkg: Path, value: str) -> None:
    """A new content hash: the one module that changes between trials."""
    (pkg / "_stamp.py").write_text(f"STAMP = {value!r}\n")


def package_stats(pkg: Path) -> dict[str, int]:
    files = [p for p in pkg.rglob("*") if p.is_file()]
    return {
        "files": len(files),
        "py_files": sum(p.suffix == ".py" for p in files),
        "bytes": sum(p.stat().st_size for p in files),
    }


# ------------------------------------------------------------------------------------------ raw baselines
def raw_upload(raw: httpx.Client, name: str, data: bytes) -> None:
    response = raw.post(
        f"/upload/storage/v1/b/{BUCKET}/o",
        params={"uploadType": "media", "name": name},
        content=data,
        headers={"content-type": "application/octet-stream"},
    )
    if response.status_code != 200 or int(response.json()["size"]) != len(data):
        raise RuntimeError(f"raw upload of {name}: {response.status_code} {response.text[:300]}")


def raw_download(raw: httpx.Client, name: str) -> bytes:
    response = raw.get(f"/storage/v1/b/{BUCKET}/o/{quote(name, safe='')}", params={"alt": "media"})
    if response.status_code != 200:
        raise RuntimeError(f"raw download of {name}: {response.status_code} {response.text[:300]}")
    return response.content


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


# ------------------------------------------------------------------------------------------ 1. staging
def staging_trial(
    store: CodeStore, raw: httpx.Client, pkg: Path, index: int, reverse: bool
) -> dict[str, float]:
    touch_stamp(pkg, f"stage-{index}")
    # The same zip bytes for the raw baseline, built untimed (its content is deterministic).
    sources = read_package(pkg)
    zipped = sources.zip()
    out: dict[str, float] = {}

    def first() -> None:
        out["first"], staged = timed(lambda: stage_code(store, pkg, BUCKET))
        if not staged.uploaded or staged.size != len(zipped):
            raise RuntimeError(f"first stage_code did not upload the {len(zipped)}-byte zip: {staged}")

    def raw_post() -> None:
        out["raw"], _ = timed(lambda: raw_upload(raw, f"raw/{sources.object_name}", zipped))

    def unchanged() -> None:
        out["unchanged"], staged = timed(lambda: stage_code(store, pkg, BUCKET))
        if staged.uploaded:
            raise RuntimeError("stage_code uploaded unchanged code again")

    def zip_only() -> None:
        out["zip"], again = timed(lambda: read_package(pkg).zip())
        if again != zipped:
            raise RuntimeError("the package zip is not deterministic")

    in_order(reverse, first, raw_post)  # the first stage must come before the unchanged one
    in_order(reverse, unchanged, zip_only)
    return out


# ------------------------------------------------------------------------------------------ 2. big objects
def big_trial(
    store: CodeStore, raw: httpx.Client, data: bytes, index: int, reverse: bool
) -> dict[str, float]:
    out: dict[str, float] = {}
    gcsfs_name, raw_name = "big/gcsfs.bin", "big/raw.bin"

    def put_gcsfs() -> None:
        out["put_gcsfs"], _ = timed(lambda: store.put_bytes(f"gs://{BUCKET}/{gcsfs_name}", data))

    def put_raw() -> None:
        out["put_raw"], _ = timed(lambda: raw_upload(raw, raw_name, data))

    def get_gcsfs() -> None:
        out["get_gcsfs"], got = timed(lambda: store.get_bytes(f"gs://{BUCKET}/{gcsfs_name}"))
        if got != data:
            raise RuntimeError("CodeStore.get_bytes returned other bytes than were put")

    def get_raw() -> None:
        out["get_raw"], got = timed(lambda: raw_download(raw, raw_name))
        if got != data:
            raise RuntimeError("the raw download returned other bytes than were put")

    in_order(reverse, put_gcsfs, put_raw)
    in_order(reverse, get_gcsfs, get_raw)
    return out


# ------------------------------------------------------------------------------------------ 3. submit_run
class PhaseClock(LoggingEvents):
    """Notes when the submitter reports each step (messages only: no logging, no output)."""

    MARKS = {
        "code ": "staged",
        "preflight ": "preflighted",
        "submitting to ": "creating",
        "submitted ": "done",
    }

    def __init__(self) -> None:
        self.at: dict[str, float] = {}

    def info(self, message: str) -> None:
        for prefix, mark in self.MARKS.items():
            if message.startswith(prefix):
                self.at.setdefault(mark, time.perf_counter())


def write_run_config(root: Path, url: str) -> Path:
    config = {
        "name": "bench",
        "entry_module": f"{PACKAGE}.task",
        "package_dir": PACKAGE,
        "hardware": {"profile": "cpu", "machine_type": "n1-standard-4", "threads": 1},
        "workers": 1,
        "regions": [REGION],
        "image": "python:3.11",
        "python": sys.executable,
        "code_bucket": f"gs://{BUCKET}",
        "labels": {"purpose": "bench"},
        "target": {"kind": "trainworks", "endpoint": url, "project": common.PROJECT},
        "capacity": {"preflight": True, "same_region_retries": 0},
        "follow": {"stream_logs": False},
    }
    path = root / "run.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def baseline_body(cfg: RunConfig, package_uri: str, digest: str) -> dict[str, Any]:
    """What submit_run sends, built the same way (the capacity ledger label aside)."""
    run_id = make_run_id(cfg.name, datetime.now(UTC), digest)
    plan = plan_run(
        cfg, run_id=run_id, package_uri=package_uri, config_uri=config_uri(cfg.code_bucket, run_id)
    ).in_region(REGION)
    return build_custom_job(
        plan,
        labels={**cfg.labels, "trainworks-code-hash": digest[:12]},
        env=cfg.env,
        base_output_dir=cfg.base_output_dir,
        scheduling=cfg.scheduling,
    )


def finish(raw: httpx.Client, name: str, created: list[str]) -> None:
    """Untimed: the job must reach SUCCEEDED (its bootstrap fetches the staged code) before the next trial."""
    job = common.wait_job(raw, name, timeout=120)
    created.remove(name)
    if job["state"] != "JOB_STATE_SUCCEEDED":
        raise RuntimeError(f"{name} ended {job['state']}: {job.get('error')}")


def submit_trial(
    url: str,
    cfg: RunConfig,
    body: dict[str, Any],
    raw: httpx.Client,
    created: list[str],
    index: int,
    reverse: bool,
) -> dict[str, float]:
    out: dict[str, float] = {}
    names: list[str] = []

    def submitter() -> None:
        clock = PhaseClock()
        t0 = time.perf_counter()
        _run_id, name, handle = submit_run(cfg, wait=False, events=clock)
        out["submit"] = time.perf_counter() - t0
        created.append(name)
        names.append(name)
        if handle.code.uploaded:
            raise RuntimeError("submit_run uploaded code that was already staged")
        missing = {"staged", "preflighted", "creating", "done"} - set(clock.at)
        if missing:
            raise RuntimeError(f"submit_run did not report {sorted(missing)}")
        out["phase_stage"] = clock.at["staged"] - t0
        out["phase_preflight"] = clock.at["preflighted"] - clock.at["staged"]
        out["phase_create"] = clock.at["done"] - clock.at["preflighted"]

    def baseline() -> None:
        t0 = time.perf_counter()
        with TrainworksClient(url) as client:
            job = client.create_custom_job(f"projects/{common.PROJECT}/locations/{REGION}", body)
        out["create"] = time.perf_counter() - t0
        created.append(job.name)
        names.append(job.name)

    in_order(reverse, submitter, baseline)
    for name in names:
        finish(raw, name, created)
    return out


# ------------------------------------------------------------------------------------------ report
def ratios(results: dict[str, Any]) -> dict[str, float]:
    """Medians over medians: measured / against, as the tables show them."""
    pairs = {
        "first_stage_vs_raw_post": ("staging", "first", "raw"),
        "unchanged_stage_vs_first_stage": ("staging", "unchanged", "first"),
        "zip_vs_first_stage": ("staging", "zip", "first"),
        "put_bytes_vs_raw_post": ("big", "put_gcsfs", "put_raw"),
        "get_bytes_vs_raw_get": ("big", "get_gcsfs", "get_raw"),
        "submit_run_vs_create": ("submit", "submit", "create"),
    }
    return {
        key: results[part][measured]["median"] / results[part][against]["median"]
        for key, (part, measured, against) in pairs.items()
    }


def report(results: dict[str, Any], elapsed: float) -> str:
    pkg, stage, big, sub = results["package"], results["staging"], results["big"], results["submit"]
    zip_ms = stage["zip"]["median"]
    first, unchanged = stage["first"]["median"], stage["unchanged"]["median"]
    staging_table = common.table(
        [
            (
                "first stage_code (zip + hash + checks + gcsfs upload)",
                stage["first"],
                "raw httpx media POST of the same zip",
                stage["raw"],
            ),
            (
                "stage_code, code unchanged (read + hash + exists)",
                stage["unchanged"],
                "first stage_code",
                stage["first"],
            ),
            ("read + hash + zip alone", stage["zip"], "first stage_code", stage["first"]),
        ]
    )
    big_table = common.table(
        [
            (
                "CodeStore.put_bytes (gcsfs resumable, 4 MiB chunks)",
                big["put_gcsfs"],
                "raw httpx media POST",
                big["put_raw"],
            ),
            ("CodeStore.get_bytes (gcsfs)", big["get_gcsfs"], "raw httpx GET alt=media", big["get_raw"]),
        ],
        size=BIG_BYTES,
    )
    submit_table = common.table(
        [
            (
                "submit_run(cfg, wait=False)",
                sub["submit"],
                "TrainworksClient + create_custom_job",
                sub["create"],
            )
        ]
    )
    phases = common.markdown_table(
        ["submit_run phase (medians)", "time"],
        [
            [
                "target + stage_code (read + hash + exists, code unchanged)",
                common.fmt(sub["phase_stage"]["median"]),
            ],
            ["run.yaml upload + capacity preflight", common.fmt(sub["phase_preflight"]["median"])],
            ["create + status look + ledger upload", common.fmt(sub["phase_create"]["median"])],
            ["whole submit_run", common.fmt(sub["submit"]["median"])],
        ],
    )
    lines = [
        "## Submitter client side: gcsfs staging and submit_run vs raw httpx on the same server",
        "",
        f"Package: {pkg['files']} files ({pkg['py_files']} .py), {pkg['bytes'] / 1e6:.2f} MB on disk, "
        f"{pkg['zip_bytes'] / 1e6:.2f} MB zipped.",
        "",
        "### 1. Code staging",
        "",
        staging_table,
        "",
        f"- first stage: read + hash + zip {common.fmt(zip_ms)} ({zip_ms / first:.0%}), the rest "
        f"(exists + bucket checks + upload) {common.fmt(first - zip_ms)} vs "
        f"{common.fmt(stage['raw']['median'])} for the raw POST",
        f"- unchanged code: {common.fmt(unchanged)} (read, hash, one metadata request; nothing zipped or "
        "uploaded), "
        f"saving {1 - unchanged / first:.0%} of the first stage",
        "",
        f"### 2. A {BIG_BYTES // (1024 * 1024)} MiB object ({CHUNK // (1024 * 1024)} MiB chunks for gcsfs)",
        "",
        big_table,
        "",
        "### 3. submit_run without waiting (1 worker, CPU, code already staged)",
        "",
        submit_table,
        "",
        phases,
        "",
        f"{elapsed:.0f}s in all; machine: {common.machine()}",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ main
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stage-trials", type=int, default=15, help="measured staging trials")
    parser.add_argument("--big-trials", type=int, default=5, help="measured 64 MiB put+get trials per side")
    parser.add_argument("--submit-trials", type=int, default=10, help="measured submits per side")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured trials before each measurement")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args()
    if min(args.stage_trials, args.big_trials, args.submit_trials) < 1 or args.warmup < 0:
        parser.error("trial counts must be >= 1 and --warmup >= 0")
    # SIGTERM (a timeout, a CI cancel) must still run the finally below that stops the server
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="trainworks-submit-bench-"))
    server = common.Server()
    results: dict[str, Any] = {}
    created: list[str] = []  # jobs not yet seen to end, cancelled at the end if anything went wrong
    try:
        pkg = write_package(root)
        touch_stamp(pkg, "initial")
        server.start()
        store = CodeStore.for_endpoint(server.url)
        with httpx.Client(base_url=server.url, timeout=120.0) as raw:
            try:
                store.ensure_bucket(BUCKET)
                results["package"] = {
                    **package_stats(pkg),
                    "zip_bytes": len(read_package(pkg).zip()),
                }
                results["staging"] = interleaved(
                    args.stage_trials, args.warmup, lambda i, r: staging_trial(store, raw, pkg, i, r)
                )
                data = random.Random(SEED).randbytes(BIG_BYTES)
                results["big"] = interleaved(
                    args.big_trials, args.warmup, lambda i, r: big_trial(store, raw, data, i, r)
                )
                cfg = load_run_config(write_run_config(root, server.url))
                touch_stamp(pkg, "submit")
                staged = stage_code(store, pkg, BUCKET)  # the submits below find it already staged
                body = baseline_body(cfg, staged.uri, staged.digest)
                results["submit"] = interleaved(
                    args.submit_trials,
                    args.warmup,
                    lambda i, r: submit_trial(server.url, cfg, body, raw, created, i, r),
                )
            finally:
                with TrainworksClient(server.url) as client:
                    for name in created:
                        with contextlib.suppress(ApiError):  # it ended meanwhile
                            client.cancel_custom_job(name)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    results["ratios"] = ratios(results)
    elapsed = time.perf_counter() - started
    if args.json:
        print(common.dump_json({"submit_staging": results, "seconds": elapsed, "machine": common.machine()}))
    else:
        print(report(results, elapsed))


if __name__ == "__main__":
    main()
