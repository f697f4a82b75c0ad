"""Pure-Python training that survives preemption: a linear model fit by SGD with momentum, checkpointed.

It imports nothing outside the standard library, so a replica starts in milliseconds: the preemption storm
(tests/system/test_preemption_storm.py) runs 50 jobs of it through many restarts. The data of each step is
derived from (seed, rank, step), so a run that was stopped and resumed any number of times ends with exactly
the weights of an uninterrupted run, byte for byte.

Every replica (its rank from CLUSTER_SPEC) trains on its own shard and checkpoints its whole state (weights,
momentum, step) to AIP_CHECKPOINT_DIR/rank-R.json every few steps, write-then-rename, so a kill at any moment
leaves the previous checkpoint or the next one, never half of one. Workers publish their final weights to
AIP_MODEL_DIR/rank-R.json; the chief (rank 0) waits for all of them, averages them and writes
AIP_MODEL_DIR/model.json.
Runs unchanged on Vertex AI (gs:// paths are read through Cloud Storage FUSE at /gcs).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FEATURES = 4
BATCH = 8
LEARNING_RATE = 0.05
MOMENTUM = 0.9
POOLS = ("workerpool0", "workerpool1", "workerpool2", "workerpool3")


def local(uri: str) -> Path:
    """gs://bucket/path -> /gcs/bucket/path (Cloud Storage FUSE), anything else as a plain path."""
    return Path("/gcs") / uri[len("gs://") :] if uri.startswith("gs://") else Path(uri)


def rank_and_world(environ: Mapping[str, str]) -> tuple[int, int]:
    """This replica's rank in CLUSTER_SPEC order (workerpool0 first) and the number of replicas."""
    raw = environ.get("CLUSTER_SPEC")
    if not raw:
        return 0, 1
    spec = json.loads(raw)
    cluster, task = spec["cluster"], spec["task"]
    sizes = [len(cluster.get(pool, [])) for pool in POOLS]
    return sum(sizes[: POOLS.index(task["type"])]) + int(task["index"]), sum(sizes)


def write_atomically(path: Path, payload: dict[str, Any]) -> None:
    """A unique temporary file renamed into place: readers (and a resumed run) see all of it or none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes it private; a checkpoint is as readable as any output
        with os.fdopen(fd, "w") as handle:
            json.dump(payload, handle)  # floats round-trip exactly through repr
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def batch(seed: int, rank: int, step: int) -> list[tuple[list[float], float]]:
    """The examples of one step: a function of (seed, rank, step) only, whenever and however often run."""
    rng = random.Random(f"{seed}/{rank}/{step}")
    truth = [1.5, -2.0, 0.5, 3.0]
    rows = []
    for _ in range(BATCH):
        x = [rng.gauss(0.0, 1.0) for _ in range(FEATURES)]
        y = sum(w * v for w, v in zip(truth, x, strict=True)) + 0.1 + 0.01 * rng.gauss(0.0, 1.0)
        rows.append((x, y))
    return rows


def sgd_step(state: dict[str, Any], rows: list[tuple[list[float], float]]) -> None:
    """One step of SGD with momentum on the mean squared error, in place."""
    grad_w = [0.0] * FEATURES
    grad_b = 0.0
    for x, y in rows:
        error = sum(w * v for w, v in zip(state["w"], x, strict=True)) + state["b"] - y
        for i in range(FEATURES):
            grad_w[i] += 2.0 * error * x[i] / len(rows)
        grad_b += 2.0 * error / len(rows)
    for i in range(FEATURES):
        state["vw"][i] = MOMENTUM * state["vw"][i] + grad_w[i]
        state["w"][i] -= LEARNING_RATE * state["vw"][i]
    state["vb"] = MOMENTUM * state["vb"] + grad_b
    state["b"] -= LEARNING_RATE * state["vb"]


def wait_for_workers(model_dir: Path, world: int, timeout: float) -> list[dict[str, Any]]:
    """The chief's barrier: every worker's published weights (each file is written atomically)."""
    deadline = time.monotonic() + timeout
    results = []
    for rank in range(1, world):
        path = model_dir / f"rank-{rank}.json"
        while not path.exists():
            if time.monotonic() > deadline:
                raise SystemExit(f"worker rank {rank} published no weights within {timeout}s")
            time.sleep(0.02)
        results.append(json.loads(path.read_text()))
    return results


def main(argv: list[str] | None = None, environ: Mapping[str, str] = os.environ) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--checkpoint-every", type=int, default=4)
    parser.add_argument("--step-seconds", type=float, default=0.0)
    parser.add_argument("--worker-timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    rank, world = rank_and_world(environ)
    checkpoint = local(environ["AIP_CHECKPOINT_DIR"]) / f"rank-{rank}.json"
    model_dir = local(environ["AIP_MODEL_DIR"])

    state: dict[str, Any] = {"step": 0, "w": [0.0] * FEATURES, "b": 0.0, "vw": [0.0] * FEATURES, "vb": 0.0}
    if checkpoint.exists():
        state = json.loads(checkpoint.read_text())  # a torn file would fail here, loudly: it never exists
        print(f"resumed from step {state['step']} (rank {rank} of {world})", flush=True)
    else:
        print(f"fresh start (rank {rank} of {world})", flush=True)
    while state["step"] < args.steps:
        sgd_step(state, batch(args.seed, rank, state["step"]))
        state["step"] += 1
        if state["step"] % args.checkpoint_every == 0 or state["step"] == args.steps:
            write_atomically(checkpoint, state)
            print(f"checkpoint {state['step']}", flush=True)
        if args.step_seconds:
            time.sleep(args.step_seconds)

    weights = {"w": state["w"], "b": state["b"]}
    if rank != 0:
        write_atomically(model_dir / f"rank-{rank}.json", weights)
        print(f"published rank {rank}", flush=True)
        return
    everyone = [weights, *wait_for_workers(model_dir, world, args.worker_timeout)]
    averaged = {
        "w": [sum(r["w"][i] for r in everyone) / world for i in range(FEATURES)],
        "b": sum(r["b"] for r in everyone) / world,
        "seed": args.seed,
        "steps": args.steps,
        "replicas": world,
    }
    write_atomically(model_dir / "model.json", averaged)
    print(f"done {json.dumps(averaged)}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
