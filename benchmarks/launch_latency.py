"""Launch latency: from just before `POST customJobs` until every replica's command has started.

Each replica runs `python -c CODE MARKER_DIR`: CODE writes a marker file named after its task (from
CLUSTER_SPEC) and then waits, bounded, for a release file. A trial ends when all N markers exist; then the
release file is written and the job is waited for, so trials never overlap. The baseline, measured in the
same run and interleaved with the Trainworks trials, spawns the same N commands with subprocess.Popen.

The light command starts at once; the heavy one does `import torch` first, to show the overhead against a
real training start. Target: Trainworks latency <= 1.5x the bare spawn.

The Trainworks side runs on two servers at once, interleaved with the baseline: one as served by default,
each sandboxed replica with a /tmp and /var/tmp of its own, and one with `--replica-tmp shared` (the host's),
so the cost of the private /tmp on a replica's start shows as the ratio private / shared. The marker folders
lie under each server's scratch folder, which both bind into their replicas.

    python benchmarks/launch_latency.py [--trials 10] [--heavy-trials 3] [--no-heavy] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

try:
    from benchmarks import common
except ImportError:  # run as a script: python benchmarks/launch_latency.py
    import common  # type: ignore[no-redef]

POLL_S = 0.001
MARKER_TIMEOUT_S = 90.0
RELEASE = "release"

REPLICA_CODE = """\
import json, os, sys, time
task = json.loads(os.environ["CLUSTER_SPEC"])["task"]
folder = sys.argv[1]
open(os.path.join(folder, "%s-%s" % (task["type"], task["index"])), "w").close()
release = os.path.join(folder, "release")
deadline = time.monotonic() + 120
while not os.path.exists(release) and time.monotonic() < deadline:
    time.sleep(0.005)
"""
HEAVY_PREFIX = "import torch\n"


def replica_code(heavy: bool) -> str:
    return (HEAVY_PREFIX if heavy else "") + REPLICA_CODE


def wait_markers(folder: Path, count: int, t0: float) -> float:
    """Seconds from t0 until `count` markers are in `folder`, polling every POLL_S."""
    deadline = t0 + MARKER_TIMEOUT_S
    while True:
        names = os.listdir(folder)
        if len(names) - (RELEASE in names) >= count:
            return time.perf_counter() - t0
        if time.perf_counter() > deadline:
            raise TimeoutError(f"only {len(names)} of {count} replicas started in {folder}")
        time.sleep(POLL_S)


def bare_env(task_index: int, replicas: int) -> dict[str, str]:
    """What a replica needs from the environment: the server's kept variables plus CLUSTER_SPEC."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR", "USER") if k in os.environ}
    env["PYTHONUNBUFFERED"] = "1"
    cluster = {"workerpool0": ["127.0.0.1:20000"]}
    if replicas > 1:
        cluster["workerpool1"] = [f"127.0.0.1:{20001 + i}" for i in range(replicas - 1)]
    task = (
        {"type": "workerpool0", "index": 0}
        if task_index == 0
        else {"type": "workerpool1", "index": task_index - 1}
    )
    spec = {"cluster": cluster, "environment": "cloud", "task": task}
    env["CLUSTER_SPEC"] = json.dumps(spec)
    return env


def bare_trial(folder: Path, replicas: int, heavy: bool) -> dict[str, Any]:
    code = replica_code(heavy)
    envs = [bare_env(i, replicas) for i in range(replicas)]
    t0 = time.perf_counter()
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(folder)],
            env=envs[i],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for i in range(replicas)
    ]
    try:
        latency = wait_markers(folder, replicas, t0)
    finally:
        (folder / RELEASE).touch()
        for process in processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    codes = [p.returncode for p in processes]
    if any(codes):
        raise RuntimeError(f"bare replicas exited with {codes}")
    return {"latency": latency}


def trainworks_trial(
    client: httpx.Client, server: common.Server, folder: Path, replicas: int, heavy: bool
) -> dict[str, Any]:
    """`folder` must be under `server.scratch`: the only host folder its sandboxed replicas can write."""
    # As on Vertex, the primary pool has one replica: N replicas are 1 primary plus N-1 workers.
    command = [sys.executable, "-c", replica_code(heavy)]
    pools = [common.container_pool(command, 1, args=[str(folder)])]
    if replicas > 1:
        pools.append(common.container_pool(command, replicas - 1, args=[str(folder)]))
    body = common.custom_job(*pools, name=f"launch-{replicas}")
    wall0 = time.time()
    t0 = time.perf_counter()
    response = client.post(f"/v1/{common.PARENT}/customJobs", json=body)
    posted = time.perf_counter() - t0
    try:
        if response.status_code != 200:
            raise RuntimeError(f"create failed: {response.status_code} {response.text[:500]}")
        name = response.json()["name"]
        latency = wait_markers(folder, replicas, t0)
    finally:
        (folder / RELEASE).touch()
    job = common.wait_job(client, name)
    if job["state"] != "JOB_STATE_SUCCEEDED":
        raise RuntimeError(f"{name} ended {job['state']}: {job.get('error')}")
    # Phases, from the supervisors' own start records (wall clock): when the first and the last
    # supervisor had started, relative to just before the POST.
    job_dir = server.home / "jobs" / name.rsplit("/", 1)[1]
    shim_starts = []
    for record in job_dir.glob("workerpool*/shim.json"):
        with contextlib.suppress(OSError, ValueError):
            shim_starts.append(json.loads(record.read_text())["started"] - wall0)
    return {
        "latency": latency,
        "post": posted,
        "first_shim": min(shim_starts, default=float("nan")),
        "last_shim": max(shim_starts, default=float("nan")),
    }


#: The Trainworks servers compared: each replica with a /tmp of its own (the default), or the host's.
TMP_MODES = ("private", "shared")
SIDES = (*TMP_MODES, "bare")


class Side:
    """One Trainworks server and its client, by its replicas' /tmp."""

    def __init__(self, tmp: str) -> None:
        self.tmp = tmp
        self.server = common.Server(["--replica-tmp", tmp])
        self.client: httpx.Client | None = None

    def start(self) -> None:
        self.server.start()
        self.client = httpx.Client(base_url=self.server.url, timeout=30.0)

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        self.server.stop()


def run_config(
    sides: dict[str, Side],
    root: Path,
    replicas: int,
    heavy: bool,
    trials: int,
    warmup: int,
) -> dict[str, Any]:
    results: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    for trial in range(warmup + trials):
        # Rotate which side goes first, so slow drift on a shared machine hits all alike.
        shift = trial % len(SIDES)
        for side in SIDES[shift:] + SIDES[:shift]:
            if side == "bare":
                folder = Path(tempfile.mkdtemp(prefix=f"bare-{replicas}-", dir=root))
                outcome = bare_trial(folder, replicas, heavy)
            else:
                server, client = sides[side].server, sides[side].client
                assert client is not None
                folder = server.scratch_dir(f"{side}-{replicas}-")
                outcome = trainworks_trial(client, server, folder, replicas, heavy)
            if trial >= warmup:
                results[side].append(outcome)
            shutil.rmtree(folder, ignore_errors=True)
    out: dict[str, Any] = {"replicas": replicas, "command": "import torch" if heavy else "light"}
    # "trainworks" is the server as served by default (private /tmp); "trainworks_shared" the other.
    keys = {"private": "trainworks", "shared": "trainworks_shared", "bare": "bare"}
    for side, rows in results.items():
        out[keys[side]] = common.summary([r["latency"] for r in rows])
    for tmp in TMP_MODES:
        for phase in ("post", "first_shim", "last_shim"):
            out[keys[tmp]][phase + "_median"] = common.summary([r[phase] for r in results[tmp]])["median"]
    private, shared, bare = out["trainworks"], out["trainworks_shared"], out["bare"]
    out["ratio_median"] = private["median"] / bare["median"]
    out["ratio_p90"] = private["p90"] / bare["p90"]
    out["shared_ratio_median"] = shared["median"] / bare["median"]
    out["shared_ratio_p90"] = shared["p90"] / bare["p90"]
    out["private_over_shared_median"] = private["median"] / shared["median"]
    out["private_over_shared_p90"] = private["p90"] / shared["p90"]
    return out


def ms(value: float) -> str:
    return f"{value * 1000:.0f}" if value >= 0.1 else f"{value * 1000:.1f}"


def report(results: list[dict[str, Any]], elapsed: float) -> str:
    rows = [
        [
            r["command"],
            r["replicas"],
            r["trainworks"]["n"],
            ms(r["trainworks"]["median"]),
            ms(r["trainworks"]["p90"]),
            ms(r["bare"]["median"]),
            ms(r["bare"]["p90"]),
            f"{r['ratio_median']:.2f}x",
            f"{r['ratio_p90']:.2f}x",
            ms(r["trainworks_shared"]["median"]),
            ms(r["trainworks_shared"]["p90"]),
            f"{r['shared_ratio_median']:.2f}x",
            f"{r['private_over_shared_median']:.2f}x",
            f"{r['private_over_shared_p90']:.2f}x",
        ]
        for r in results
    ]
    table = common.markdown_table(
        [
            "command",
            "replicas",
            "trials",
            "trainworks median ms",
            "trainworks p90 ms",
            "bare median ms",
            "bare p90 ms",
            "ratio (median)",
            "ratio (p90)",
            "shared /tmp median ms",
            "shared /tmp p90 ms",
            "shared /tmp ratio (median)",
            "private / shared (median)",
            "private / shared (p90)",
        ],
        rows,
    )
    phases = common.markdown_table(
        [
            "command",
            "replicas",
            "/tmp",
            "POST answered ms",
            "first supervisor up ms",
            "last supervisor up ms",
            "all running ms",
        ],
        [
            [
                r["command"],
                r["replicas"],
                tmp,
                ms(r[key]["post_median"]),
                ms(r[key]["first_shim_median"]),
                ms(r[key]["last_shim_median"]),
                ms(r[key]["median"]),
            ]
            for r in results
            for tmp, key in (("private", "trainworks"), ("shared", "trainworks_shared"))
        ],
    )
    lines = [
        "## Launch latency: submit -> all replicas running (Trainworks vs bare subprocess.Popen)",
        "",
        "trainworks: each replica with a /tmp of its own (the default); shared /tmp: `serve --replica-tmp "
        "shared`; ratios are against the bare spawn, private / shared is the cost of the private /tmp.",
        "",
        table,
        "",
        "Trainworks phases (medians, from just before the POST):",
        "",
        phases,
        "",
    ]
    for r in results:
        verdict = "meets" if r["ratio_median"] <= 1.5 else "misses"
        lines.append(
            f"- {r['command']}, {r['replicas']} replica(s): trainworks/bare = {r['ratio_median']:.2f}x "
            f"(median), {r['ratio_p90']:.2f}x (p90); {verdict} the 1.5x target; with the host's /tmp "
            f"{r['shared_ratio_median']:.2f}x; private / shared /tmp = "
            f"{r['private_over_shared_median']:.2f}x (median), {r['private_over_shared_p90']:.2f}x (p90)"
        )
    lines.append(f"\n{elapsed:.0f}s in all; machine: {common.machine()}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=10, help="measured trials per light config")
    parser.add_argument(
        "--heavy-trials", type=int, default=3, help="measured trials per `import torch` config"
    )
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured trials before the light configs")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--no-heavy", action="store_true", help="skip the `import torch` command")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args()

    heavy = not args.no_heavy
    if heavy:
        probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True)
        heavy = probe.returncode == 0  # also warms the page cache for the heavy trials
        if not heavy:
            print("torch does not import here: skipping the heavy command", file=sys.stderr)

    started = time.perf_counter()
    results: list[dict[str, Any]] = []
    root = Path(tempfile.mkdtemp(prefix="trainworks-launch-"))  # the bare spawns' markers
    sides = {tmp: Side(tmp) for tmp in TMP_MODES}
    try:
        for side in sides.values():
            side.start()
        for replicas in args.replicas:
            results.append(run_config(sides, root, replicas, False, args.trials, args.warmup))
        if heavy:
            for replicas in args.replicas:
                results.append(run_config(sides, root, replicas, True, args.heavy_trials, 0))
    finally:
        for side in sides.values():
            side.stop()
        shutil.rmtree(root, ignore_errors=True)
    elapsed = time.perf_counter() - started
    if args.json:
        print(common.dump_json({"launch_latency": results, "seconds": elapsed, "machine": common.machine()}))
    else:
        print(report(results, elapsed))


if __name__ == "__main__":
    main()
