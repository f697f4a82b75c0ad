"""The bootstrap of every Slurm task: `python -m trainworks.slurm.task <job manifest.json>`.

A task works out which replica it is from SLURM_PROCID and the task counts of the het components (or of the
plain job), finds every component's nodes and their addresses, and builds the Vertex AI contract
(CLUSTER_SPEC, TF_CONFIG, MASTER_ADDR/PORT, WORLD_SIZE, RANK, AIP_*) with contract/environment.py, so
every replica sees the same cluster. Replica i listens on the manifest's base port + i: emulated nodes may
share one host. The replica runs as under the local supervisor (backends/shim.py): output in its run_dir's log
(backends/capture.py), /gcs mounted when asked, exit status in exit.json; the task exits with the
replica's code.

Signals: Slurm signals every process of the step (scancel, time limit, requeue), the replica included; the
task itself only waits for the replica, so it always records how the replica ended.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainworks.backends import shim
from trainworks.backends.capture import Capture, log_dir, write_platform_message
from trainworks.backends.commands import TaskError, host_argv, pool_env
from trainworks.contract.environment import JobContext, ReplicaSlot, replica_environment
from trainworks.slurm.jobs import SlurmClient, SlurmError

MANIFEST_VERSION = 1
EXIT_NOT_STARTED = 127  # as the local supervisor reports a command that could not start


class PlacementError(Exception):
    """The Slurm allocation does not match the job's manifest."""


@dataclass(frozen=True)
class Placement:
    component: int  # het group (0 for a plain job)
    index: int  # task within the component = replica index within its pool
    rank: int  # SLURM_PROCID = position in CLUSTER_SPEC order
    counts: tuple[int, ...]  # tasks per component


def placement(environ: Mapping[str, str]) -> Placement:
    """Where this task sits, from SLURM_PROCID and SLURM_NTASKS_HET_GROUP_n (or the plain job's count)."""
    try:
        rank = int(environ["SLURM_PROCID"])
        size = int(environ.get("SLURM_HET_SIZE") or 0)
        if size:
            counts = tuple(int(environ[f"SLURM_NTASKS_HET_GROUP_{g}"]) for g in range(size))
        else:
            counts = (int(environ.get("SLURM_STEP_NUM_TASKS") or environ["SLURM_NTASKS"]),)
    except (KeyError, ValueError) as exc:
        raise PlacementError(f"not inside a Slurm task, or Slurm did not set {exc}") from exc
    first = 0
    for component, count in enumerate(counts):
        if rank < first + count:
            return Placement(component, rank - first, rank, counts)
        first += count
    raise PlacementError(f"SLURM_PROCID {rank} is beyond the {first} tasks of the job")


def nodelists(environ: Mapping[str, str], components: int) -> list[str]:
    """Each component's node list (SLURM_JOB_NODELIST_HET_GROUP_n, or SLURM_JOB_NODELIST)."""
    if int(environ.get("SLURM_HET_SIZE") or 0):
        return [environ[f"SLURM_JOB_NODELIST_HET_GROUP_{g}"] for g in range(components)]
    return [environ.get("SLURM_JOB_NODELIST") or environ["SLURM_NODELIST"]]


def check(manifest: Mapping[str, Any], where: Placement) -> None:
    expected = tuple(int(c["replicas"]) for c in manifest["components"])
    if where.counts != expected:
        raise PlacementError(
            f"the Slurm job has tasks {list(where.counts)} per component but the job needs {list(expected)}"
        )


def slots(
    manifest: Mapping[str, Any], nodes: Sequence[Sequence[str]], addresses: Mapping[str, str]
) -> list[ReplicaSlot]:
    """Every replica's address, in CLUSTER_SPEC order: task j of component g runs on its j-th node."""
    base = int(manifest["base_port"])
    found: list[ReplicaSlot] = []
    for component, names in zip(manifest["components"], nodes, strict=True):
        count = int(component["replicas"])
        if len(names) < count:
            raise PlacementError(
                f"workerpool{component['pool']} has {count} replicas but nodes {list(names)}"
            )
        for index in range(count):
            host = addresses.get(names[index], names[index])
            found.append(ReplicaSlot(int(component["pool"]), index, host, base + len(found)))
    return found


def environment(
    manifest: Mapping[str, Any], all_slots: Sequence[ReplicaSlot], rank: int, environ: Mapping[str, str]
) -> dict[str, str]:
    """The replica's variables: the manifest's base, Slurm's own (SLURM_*), then the Vertex contract."""
    job = manifest["job"]
    member = manifest["members"][rank]
    slot = all_slots[rank]
    context = JobContext(
        job_id=str(job["job_id"]),
        project_number=str(job["project_number"]),
        job_spec=job["job_spec"],
        slots=list(all_slots),
        trial_id=job.get("trial_id"),
        region=job.get("region"),
        extra_env=dict(member.get("extra_env") or {}),
    )
    pool = job["job_spec"]["workerPoolSpecs"][slot.pool]
    env = dict(manifest.get("env") or {})
    env.update({k: v for k, v in environ.items() if k.startswith(("SLURM_", "SLURMD_"))})
    env.update(replica_environment(context, slot, pool_env(pool)))
    return env


def _write_exit(run_dir: Path, code: int, signum: int | None, slurm_job: int) -> None:
    """exit.json as the local supervisor writes it, plus the Slurm job it belongs to (a late task of an
    earlier attempt must not pass for this one)."""
    fields: list[tuple[str, Any]] = [("exit_code", code)]
    if signum is not None:
        fields.append(("signal", signum))
    fields += [("ended", time.time()), ("slurm_job_id", slurm_job)]
    shim._write_record(str(run_dir / "exit.json"), fields)


def run(argv: list[str], env: Mapping[str, str], run_dir: Path, gcs_root: str | None, slurm_job: int) -> int:
    """Run the replica with its output in run_dir, record how it ended, return its exit code."""
    capture = Capture(str(run_dir))
    out, err = capture.stdout, capture.stderr
    if gcs_root:
        try:
            shim._mount_gcs(gcs_root, err)
        except OSError as exc:
            os.write(err, f"[trainworks] /gcs is not available in this replica: {exc}\n".encode())
    # Slurm signals the replica itself; the task stays to write the exit record.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda _s, _f: None)
    capture.start()
    child = os.fork()
    if child == 0:
        try:
            os.dup2(out, 1)
            os.dup2(err, 2)
            capture.close_in_child()
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.chdir(run_dir)
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            os.execvpe(argv[0], argv, dict(env))
        except BaseException as exc:  # noqa: BLE001 - anything here means the command never started
            os.write(2, f"[trainworks] could not start {argv[0]!r}: {exc}\n".encode())
            os._exit(EXIT_NOT_STARTED)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    capture.finish()
    if os.WIFSIGNALED(status):
        killed_by = os.WTERMSIG(status)
        code, got = 128 + killed_by, killed_by
    else:
        code, got = os.WEXITSTATUS(status), None
    _write_exit(run_dir, code, got, slurm_job)
    return code


def _fail(run_dir: Path | None, message: str, slurm_job: int) -> int:
    """A replica that could not start: say why where its logs are read, and record exit 127."""
    print(f"trainworks.slurm.task: {message}", file=sys.stderr, flush=True)
    if run_dir is not None:
        write_platform_message(log_dir(str(run_dir)), f"[trainworks] {message}", "ERROR")
        _write_exit(run_dir, EXIT_NOT_STARTED, None, slurm_job)
    return EXIT_NOT_STARTED


def main(args: list[str]) -> int:
    if len(args) != 1:
        print("usage: python -m trainworks.slurm.task <job manifest.json>", file=sys.stderr)
        return 2
    environ = dict(os.environ)
    slurm_job = int(environ.get("SLURM_JOB_ID") or 0)
    run_dir: Path | None = None
    try:
        manifest = json.loads(Path(args[0]).read_text())
        if manifest.get("version") != MANIFEST_VERSION:
            raise PlacementError(f"manifest version {manifest.get('version')} is not {MANIFEST_VERSION}")
        where = placement(environ)
        check(manifest, where)
        member = manifest["members"][where.rank]
        run_dir = Path(member["run_dir"])
        run_dir.mkdir(parents=True, exist_ok=True)
        client = SlurmClient(Path(environ.get("SLURM_CONF") or manifest["slurm_conf"]), env=environ)
        lists = nodelists(environ, len(where.counts))
        nodes = [client.hostnames(nodelist) for nodelist in lists]
        addresses = client.addresses(",".join(lists))
        all_slots = slots(manifest, nodes, addresses)
        env = environment(manifest, all_slots, where.rank, environ)
        pool = manifest["job"]["job_spec"]["workerPoolSpecs"][all_slots[where.rank].pool]
        python = Path(member["python"]) if member.get("python") else None
        argv = host_argv(pool, env, python)
    except (OSError, ValueError, KeyError, IndexError, PlacementError, SlurmError, TaskError) as exc:
        return _fail(run_dir, f"the replica could not start on Slurm: {exc}", slurm_job)
    me = nodes[where.component][where.index]
    record = {
        "slurm_job_id": slurm_job,
        "procid": where.rank,
        "node": me,
        "address": all_slots[where.rank].address,
        "pid": os.getpid(),
    }
    (run_dir / "task.json").write_text(json.dumps(record))
    if environ.get("SLURMD_NODENAME") not in (None, me):
        print(
            f"trainworks.slurm.task: rank {where.rank} runs on {environ['SLURMD_NODENAME']}, not on {me}",
            file=sys.stderr,
            flush=True,
        )
    return run(argv, env, run_dir, manifest.get("gcs_root"), slurm_job)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
