"""Training clusters on a real Slurm: what the API costs over driving the same Slurm by hand.

Three measurements, each against a bare-Slurm baseline measured in the same run, trials interleaved and the
side that goes first alternated (so drift on a shared machine hits both alike):

1. Cluster lifecycle: POST modelDevelopmentClusters (2 static compute nodes + a login node) until the LRO is
   done, vs `scripts/slurm-local.sh up` of 2 nodes (returns once both are idle); then the delete LRO vs
   `slurm-local.sh down`.
2. Config update: PATCH orchestrator_spec.slurm_spec.config (USER_ONLY) until the LRO is done and the new
   value shows in `scontrol show config`, vs editing slurm.conf + `scontrol reconfigure` until it shows.
3. CustomJob on a cluster: a 2-replica job (2 pools x 1 replica) labelled `trainworks-cluster: <id>`,
   submit -> RUNNING and submit -> SUCCEEDED (GET polled), vs `sbatch` of the equivalent het job (one
   `--nodes=1 --exclusive` component per pool, `srun --het-group=0,1 python -c ...`) polled with squeue until
   RUNNING / COMPLETED, and `sbatch --wait`'s own return. The command sleeps 1 s so RUNNING is observable.

Every daemon started here is stopped by PID at the end, even on errors: the server by Server.stop, its
clusters by LocalSlurm.down, the bare clusters by `slurm-local.sh down`.

    python benchmarks/slurm_clusters.py [--cluster-trials 10] [--update-trials 10] [--job-trials 12] [--json]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from trainworks.ports import free_block
from trainworks.slurm.daemons import LocalSlurm

try:
    from benchmarks import common
except ImportError:  # run as a script: python benchmarks/slurm_clusters.py
    import common  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[1]
SLURM_LOCAL = REPO / "scripts" / "slurm-local.sh"
CLUSTERS = f"/v1beta1/{common.PARENT}/modelDevelopmentClusters"
MACHINE = "n2-standard-8"
NODES = 2  # static compute nodes on both sides (the login node runs no Slurm daemon)
CPUS = 8  # what n2-standard-8 nodes declare, so the bare nodes look the same to the scheduler
BARE_PORTS = 26000  # away from the tests' blocks (21000+) and the server's clusters (30000+)
POLL_S = 0.02  # both sides poll alike: GET every 20 ms, squeue/scontrol every 20 ms
JOB_CODE = "import time; time.sleep(1)"
DONE_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"}
# A key `scontrol reconfigure` applies in place; PriorityType is set by the warm-up trial on both sides.
UPDATE_KEY = "PriorityWeightAge"

T = TypeVar("T")


def poll(probe: Callable[[], T | None], timeout: float, what: str, interval: float = POLL_S) -> T:
    return common.poll(probe, timeout, what, interval)


def cluster_body(config: dict[str, str] | None = None) -> dict[str, Any]:
    """2 static CPU nodes and a login node, in the documents' own (snake_case) shape (as the API tests)."""

    def pool(pool_id: str, count: int) -> dict[str, Any]:
        return {
            "id": pool_id,
            "machine_spec": {"machine_type": MACHINE},
            "scaling_spec": {"min_node_count": count, "max_node_count": count},
            "zone": "us-central1-a",
            "enable_public_ips": True,
            "boot_disk": {"boot_disk_type": "pd-standard", "boot_disk_size_gb": 120},
        }

    slurm: dict[str, Any] = {
        "home_directory_storage": f"projects/{common.PROJECT}/locations/us-central1-a/instances/home",
        "partitions": [{"id": "cpu", "node_pool_ids": ["cpu"]}],
        "login_node_pool_id": "login",
    }
    if config:
        slurm["config"] = config
    return {
        "display_name": "bench",
        "network": {
            "network": f"projects/{common.PROJECT}/global/networks/default",
            "subnetwork": f"projects/{common.PROJECT}/regions/us-central1/subnetworks/default",
        },
        "node_pools": [pool("cpu", NODES), pool("login", 1)],
        "orchestrator_spec": {"slurm_spec": slurm},
    }


def update_config(value: int) -> dict[str, str]:
    return {"PriorityType": "priority/multifactor", UPDATE_KEY: str(value)}


def shows_config(conf: Path, key: str, value: str) -> bool:
    out = subprocess.run(
        ["scontrol", "show", "config"],
        env={**os.environ, "SLURM_CONF": str(conf)},
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    for line in out.splitlines():
        name, sep, shown = line.partition("=")
        if sep and name.strip() == key:
            return shown.strip() == value
    return False


def squeue_states(conf: Path, name: str) -> list[str]:
    """States of every component of the jobs named `name` (finished ones stay listed for MinJobAge)."""
    out = subprocess.run(
        ["squeue", "-h", "-t", "all", "-n", name, "-o", "%T"],
        env={**os.environ, "SLURM_CONF": str(conf)},
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    return out.split()


# ------------------------------------------------------------------------------------------ bare Slurm
class BareSlurm:
    """A cluster of scripts/slurm-local.sh in `base` on a free port block; `down` stops it by PID."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = 0

    @property
    def conf(self) -> Path:
        return self.base / "etc" / "slurm.conf"

    def _script(self, action: str) -> None:
        env = {
            **os.environ,
            "SLURM_LOCAL_DIR": str(self.base),
            "SLURM_LOCAL_PORT": str(self.port),
            "SLURM_LOCAL_NODES": str(NODES),
            "SLURM_LOCAL_CPUS": str(CPUS),
        }
        done = subprocess.run(
            ["bash", str(SLURM_LOCAL), action], env=env, capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            raise RuntimeError(f"slurm-local.sh {action} failed:\n{done.stdout}\n{done.stderr[-2000:]}")

    def up(self) -> None:
        self.port = free_block("127.0.0.1", BARE_PORTS, 100, NODES + 1, set())
        self._script("up")

    def down(self) -> None:
        if self.port and self.base.exists():
            self._script("down")


BARE_CLUSTERS: list[BareSlurm] = []  # every bare cluster brought up (or tried), stopped in main's finally


# ------------------------------------------------------------------------------------------ Trainworks side
class Trainworks:
    def __init__(self, client: httpx.Client, clusters_dir: Path) -> None:
        self.client = client
        self.clusters_dir = clusters_dir

    def wait_operation(self, op: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            body: dict[str, Any] = self.client.get(f"/v1/{op['name']}").json()
            return body if body.get("done") else None

        result = poll(done, timeout, f"operation {op['name']}")
        if "error" in result:
            raise RuntimeError(f"{op['name']} failed: {result['error']}")
        return result

    def create(self, cluster_id: str) -> None:
        response = self.client.post(
            CLUSTERS, params={"modelDevelopmentClusterId": cluster_id}, json=cluster_body()
        )
        if response.status_code != 200:
            raise RuntimeError(f"create {cluster_id}: {response.status_code} {response.text[:500]}")
        state = self.wait_operation(response.json())["response"]["clusterStatus"]["state"]
        if state != "RUNNING":
            raise RuntimeError(f"{cluster_id} is {state} after create")

    def delete(self, cluster_id: str) -> None:
        response = self.client.delete(f"{CLUSTERS}/{cluster_id}")
        if response.status_code != 200:
            raise RuntimeError(f"delete {cluster_id}: {response.status_code} {response.text[:500]}")
        self.wait_operation(response.json())

    def conf(self, cluster_id: str) -> Path:
        """slurm.conf of the Slurm behind a training cluster (found by its ClusterName)."""
        for conf in self.clusters_dir.glob("*/etc/slurm.conf"):
            if f"ClusterName={cluster_id}\n" in conf.read_text():
                return conf
        raise RuntimeError(f"no Slurm cluster for {cluster_id} under {self.clusters_dir}")


# ------------------------------------------------------------------------------------------ trials
def lifecycle_trial(side: str, tw: Trainworks, root: Path, trial: int) -> dict[str, float]:
    if side == "trainworks":
        cluster_id = f"life{trial}"
        t0 = time.perf_counter()
        tw.create(cluster_id)
        created = time.perf_counter() - t0
        t0 = time.perf_counter()
        tw.delete(cluster_id)
        return {"create": created, "delete": time.perf_counter() - t0}
    bare = BareSlurm(root / f"life{trial}")
    BARE_CLUSTERS.append(bare)  # registered first: a failed `up` is torn down at the end too
    t0 = time.perf_counter()
    bare.up()
    created = time.perf_counter() - t0
    t0 = time.perf_counter()
    bare.down()
    deleted = time.perf_counter() - t0
    shutil.rmtree(bare.base, ignore_errors=True)
    return {"create": created, "delete": deleted}


def update_trial(side: str, tw: Trainworks, cluster_id: str, bare: BareSlurm, value: int) -> dict[str, float]:
    config = update_config(value)
    if side == "trainworks":
        conf = tw.conf(cluster_id)
        t0 = time.perf_counter()
        response = tw.client.patch(
            f"{CLUSTERS}/{cluster_id}",
            params={"updateMask": "orchestrator_spec.slurm_spec.config", "updateMode": "USER_ONLY"},
            json=cluster_body(config),
        )
        if response.status_code != 200:
            raise RuntimeError(f"patch {cluster_id}: {response.status_code} {response.text[:500]}")
        tw.wait_operation(response.json())
        lro = time.perf_counter() - t0
    else:
        conf = bare.conf
        t0 = time.perf_counter()
        # the edit an operator makes: replace the keys' lines (if any), reconfigure the running slurmctld
        keys = {k.lower() for k in config}
        lines = [
            line
            for line in conf.read_text().splitlines()
            if line.partition("=")[0].strip().lower() not in keys
        ]
        conf.write_text("\n".join([*lines, *(f"{k}={v}" for k, v in config.items())]) + "\n")
        subprocess.run(
            ["scontrol", "reconfigure"],
            env={**os.environ, "SLURM_CONF": str(conf)},
            check=True,
            capture_output=True,
            timeout=60,
        )
        lro = time.perf_counter() - t0
    poll(lambda: shows_config(conf, UPDATE_KEY, str(value)) or None, 60, f"{UPDATE_KEY}={value} in Slurm")
    return {"visible": time.perf_counter() - t0, "returned": lro}


def job_trial(side: str, tw: Trainworks, cluster_id: str, bare: BareSlurm, trial: int) -> dict[str, float]:
    if side == "trainworks":
        pool = {
            "machineSpec": {"machineType": "n1-standard-4"},
            "replicaCount": "1",
            "containerSpec": {"imageUri": "python:3.11", "command": [sys.executable, "-c", JOB_CODE]},
        }
        body = {
            "displayName": f"slurm-bench-{trial}",
            "labels": {"trainworks-cluster": cluster_id},
            "jobSpec": {"workerPoolSpecs": [pool, dict(pool)]},
        }
        t0 = time.perf_counter()
        response = tw.client.post(f"/v1/{common.PARENT}/customJobs", json=body)
        if response.status_code != 200:
            raise RuntimeError(f"customJobs: {response.status_code} {response.text[:500]}")
        name = response.json()["name"]
        running = float("nan")
        while True:
            job = tw.client.get(f"/v1/{name}").json()
            now = time.perf_counter() - t0
            if job["state"] == "JOB_STATE_RUNNING" and math.isnan(running):
                running = now
            if job["state"] in common.TERMINAL:
                break
            if now > 120:
                raise TimeoutError(f"{name} still {job['state']} after 120s")
            time.sleep(POLL_S)
        if job["state"] != "JOB_STATE_SUCCEEDED":
            raise RuntimeError(f"{name} ended {job['state']}: {job.get('error')}")
        return {"running": running, "done": now}  # NaN running: never seen between two polls

    name = f"bare-{trial}"
    script = bare.base / f"{name}.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"#SBATCH --job-name={name}\n"
        f"#SBATCH --output={bare.base}/{name}.out\n"
        "#SBATCH --nodes=1 --ntasks-per-node=1 --exclusive\n"
        "#SBATCH hetjob\n"
        "#SBATCH --nodes=1 --ntasks-per-node=1 --exclusive\n"
        f'srun --het-group=0,1 {sys.executable} -c "{JOB_CODE}"\n'
    )
    env = {**os.environ, "SLURM_CONF": str(bare.conf)}
    t0 = time.perf_counter()
    # sbatch --wait returns at the job's end, but it polls slurmctld itself at 2 s and longer intervals:
    # squeue, polled as often as the API is, gives the baseline's own RUNNING and end times.
    process = subprocess.Popen(
        ["sbatch", "--wait", str(script)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:

        def states_when(done: Callable[[list[str]], bool]) -> float | None:
            states = squeue_states(bare.conf, name)
            return time.perf_counter() - t0 if states and done(states) else None

        running = poll(lambda: states_when(lambda s: set(s) == {"RUNNING"}), 120, f"{name} RUNNING")
        ended = poll(lambda: states_when(lambda s: set(s) <= DONE_STATES), 120, f"{name} to end")
        process.wait(timeout=120)
        waited = time.perf_counter() - t0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    states = squeue_states(bare.conf, name)
    if process.returncode != 0 or set(states) != {"COMPLETED"}:
        stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
        raise RuntimeError(f"{name}: sbatch --wait exited {process.returncode}, states {states}: {stderr}")
    return {"running": running, "done": ended, "wait": waited}


def interleaved(trials: int, warmup: int, run: Callable[[str, int], dict[str, float]]) -> dict[str, Any]:
    rows: dict[str, list[dict[str, float]]] = {"trainworks": [], "bare": []}
    for trial in range(warmup + trials):
        for side in ("trainworks", "bare") if trial % 2 == 0 else ("bare", "trainworks"):
            outcome = run(side, trial)
            if trial >= warmup:
                rows[side].append(outcome)
    return {
        side: {key: common.summary([r[key] for r in found if not math.isnan(r[key])]) for key in found[0]}
        for side, found in rows.items()
    }


# ------------------------------------------------------------------------------------------ report
def fmt(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1000:.0f} ms"


def table(title: str, rows: list[tuple[str, dict[str, float], str, dict[str, float]]]) -> str:
    lines = [
        [
            what,
            tw["n"],
            fmt(tw["median"]),
            fmt(tw["p90"]),
            baseline,
            fmt(bare["median"]),
            fmt(bare["p90"]),
            f"{tw['median'] / bare['median']:.2f}x",
        ]
        for what, tw, baseline, bare in rows
    ]
    headers = [
        "measurement",
        "trials",
        "trainworks median",
        "trainworks p90",
        "baseline",
        "baseline median",
        "baseline p90",
        "ratio (median)",
    ]
    return f"### {title}\n\n" + common.markdown_table(headers, lines)


def report(results: dict[str, Any], elapsed: float) -> str:
    life, upd, job = results["lifecycle"], results["update"], results["job"]
    tables = [
        table(
            "Cluster lifecycle (2 compute nodes + login node)",
            [
                (
                    "create -> RUNNING",
                    life["trainworks"]["create"],
                    "slurm-local.sh up",
                    life["bare"]["create"],
                ),
                (
                    "delete -> gone",
                    life["trainworks"]["delete"],
                    "slurm-local.sh down",
                    life["bare"]["delete"],
                ),
            ],
        ),
        table(
            f"Config update (slurm_spec.config {UPDATE_KEY}, USER_ONLY)",
            [
                (
                    "PATCH -> LRO done",
                    upd["trainworks"]["returned"],
                    "edit + scontrol reconfigure returns",
                    upd["bare"]["returned"],
                ),
                (
                    "PATCH -> value in scontrol show config",
                    upd["trainworks"]["visible"],
                    "edit + reconfigure -> value shown",
                    upd["bare"]["visible"],
                ),
            ],
        ),
        table(
            "CustomJob on the cluster: 2 pools x 1 replica, python sleeping 1 s",
            [
                (
                    "submit -> RUNNING",
                    job["trainworks"]["running"],
                    "sbatch het job, squeue RUNNING",
                    job["bare"]["running"],
                ),
                (
                    "submit -> SUCCEEDED",
                    job["trainworks"]["done"],
                    "sbatch het job, squeue COMPLETED",
                    job["bare"]["done"],
                ),
                (
                    "submit -> SUCCEEDED",
                    job["trainworks"]["done"],
                    "sbatch --wait returns",
                    job["bare"]["wait"],
                ),
            ],
        ),
    ]

    def ratio(tw: dict[str, float], bare: dict[str, float]) -> str:
        return f"{tw['median'] / bare['median']:.2f}x"

    summary = (
        "Summary (trainworks/bare, medians): "
        f"create {ratio(life['trainworks']['create'], life['bare']['create'])}, "
        f"delete {ratio(life['trainworks']['delete'], life['bare']['delete'])}, "
        f"config update {ratio(upd['trainworks']['visible'], upd['bare']['visible'])}, "
        f"job RUNNING {ratio(job['trainworks']['running'], job['bare']['running'])}, "
        f"job SUCCEEDED {ratio(job['trainworks']['done'], job['bare']['done'])} "
        f"({ratio(job['trainworks']['done'], job['bare']['wait'])} vs sbatch --wait)"
    )
    return "\n\n".join(
        [
            "## Training clusters on Slurm: Trainworks API vs bare Slurm",
            *tables,
            summary,
            f"{elapsed:.0f}s in all; machine: {common.machine()}",
        ]
    )


# ------------------------------------------------------------------------------------------ main
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cluster-trials", type=int, default=10, help="measured create+delete per side")
    parser.add_argument("--update-trials", type=int, default=10, help="measured config updates per side")
    parser.add_argument("--job-trials", type=int, default=12, help="measured jobs per side")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured trials before each measurement")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args()
    missing = [p for p in ("slurmctld", "slurmd", "munged", "sbatch", "scontrol") if not shutil.which(p)]
    if missing:
        sys.exit(f"Slurm is not installed ({', '.join(missing)}): run scripts/install-test-deps.sh as root")
    # SIGTERM (a timeout, a CI cancel) must still run the finally below that stops the daemons
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    started = time.perf_counter()
    # Short and searchable by all: munged wants that of its socket's parents, and socket paths are short.
    root = Path(tempfile.mkdtemp(prefix="twsc-", dir="/tmp"))
    root.chmod(0o755)
    clusters_dir = root / "c"
    clusters_dir.mkdir(mode=0o755)
    server = common.Server(["--clusters-dir", str(clusters_dir)])
    results: dict[str, Any] = {}
    try:
        server.start()
        with httpx.Client(base_url=server.url, timeout=60.0) as client:
            tw = Trainworks(client, clusters_dir)
            results["lifecycle"] = interleaved(
                args.cluster_trials, args.warmup, lambda side, i: lifecycle_trial(side, tw, root, i)
            )
            # one long-lived cluster per side for the updates and the jobs
            tw.create("bench")
            bare = BareSlurm(root / "bare")
            BARE_CLUSTERS.append(bare)
            bare.up()
            results["update"] = interleaved(
                args.update_trials,
                args.warmup,
                lambda side, i: update_trial(side, tw, "bench", bare, 1000 + i),
            )
            results["job"] = interleaved(
                args.job_trials, args.warmup, lambda side, i: job_trial(side, tw, "bench", bare, i)
            )
            tw.delete("bench")
    finally:
        # the server first, so that its controller does not restart what is being stopped
        server.stop()
        for base in sorted(clusters_dir.glob("*")):
            LocalSlurm(base).down()
        for bare_cluster in BARE_CLUSTERS:
            try:
                bare_cluster.down()
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                print(f"warning: {exc}", file=sys.stderr)
        shutil.rmtree(root, ignore_errors=True)
    elapsed = time.perf_counter() - started
    if args.json:
        print(common.dump_json({"slurm_clusters": results, "seconds": elapsed, "machine": common.machine()}))
    else:
        print(report(results, elapsed))


if __name__ == "__main__":
    main()
