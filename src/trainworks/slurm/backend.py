"""Slurm backend: each attempt of a CustomJob is one Slurm job, a component per worker pool (slurm/batch.py).

Which jobs run here, and on which cluster, is decided per job by resolvers (SlurmTargets): the server's own
cluster (--slurm-conf) for jobs labelled `trainworks-executor: slurm` or for all jobs with `--executor slurm`;
more resolvers (a training cluster's own slurm.conf for `trainworks-cluster: <id>`) go in front with
add_resolver. Each replica is tracked by its backend_ref, "slurm:<conf>:<job id>+<het offset>:<task>".

Status comes from one `squeue --json` per look plus each replica's exit.json (written by slurm/task.py as the
local supervisor writes it): PENDING keeps the job pending with Slurm's reason, a requeue (restart count > 0)
or PREEMPTED state is a preemption, TIMEOUT is the job's timeout, an exit record is an exit.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainworks.backends.base import (
    BackendUnavailable,
    Capability,
    GangRequest,
    LaunchError,
    Phase,
    PlacementRequest,
    ReplicaStatus,
)
from trainworks.backends.commands import TaskError
from trainworks.jobs.enums import JobState
from trainworks.slurm.batch import BatchJob, batch_script, components
from trainworks.slurm.jobs import (
    SlurmClient,
    SlurmError,
    SlurmJob,
    SlurmPhase,
    SlurmRejected,
    find,
)
from trainworks.slurm.task import MANIFEST_VERSION

EXECUTOR_LABEL = "trainworks-executor"  # "slurm" or "local": overrides the server's default executor
CLUSTER_LABEL = "trainworks-cluster"  # a training cluster's id: resolved by the clusters' own resolver

# How a Slurm phase ends a CustomJob (PREEMPTED has no end state: the job restarts).
JOB_STATES: Mapping[SlurmPhase, JobState] = {
    SlurmPhase.PENDING: JobState.JOB_STATE_PENDING,
    SlurmPhase.RUNNING: JobState.JOB_STATE_RUNNING,
    SlurmPhase.COMPLETED: JobState.JOB_STATE_SUCCEEDED,
    SlurmPhase.FAILED: JobState.JOB_STATE_FAILED,
    SlurmPhase.CANCELLED: JobState.JOB_STATE_CANCELLED,
    SlurmPhase.TIMEOUT: JobState.JOB_STATE_FAILED,  # DEADLINE_EXCEEDED, as the server's own timeout
}


@dataclass(frozen=True)
class SlurmTarget:
    """Where a job runs: a cluster (its slurm.conf) and optionally a partition."""

    conf: Path
    partition: str | None = None


# (job's placement) → its Slurm target, or None when this resolver has no say; may raise TaskError for a job
# that asks for something that does not exist (an unknown training cluster).
SlurmTargets = Callable[[PlacementRequest], SlurmTarget | None]


def server_targets(conf: Path | None, partition: str | None, default_executor: str = "local") -> SlurmTargets:
    """The server's own cluster: for every job with `--executor slurm`, else for jobs labelled for it. A job
    on a persistent resource stays on the resource's own machines unless its label says otherwise."""

    def resolve(job: PlacementRequest) -> SlurmTarget | None:
        labelled = job.labels.get(EXECUTOR_LABEL)
        if labelled is None and job.persistent_resource_id:
            return None
        if (labelled or default_executor) != "slurm" or conf is None:
            return None
        return SlurmTarget(Path(conf), partition)

    return resolve


@dataclass(frozen=True)
class SlurmRef:
    conf: Path
    job_id: int  # the het leader (or the plain job)
    offset: int  # het component
    task: int  # task within the component

    def __str__(self) -> str:
        return f"slurm:{self.conf}:{self.job_id}+{self.offset}:{self.task}"

    @classmethod
    def parse(cls, text: str) -> SlurmRef:
        if not text.startswith("slurm:"):
            raise ValueError(f"not a Slurm backend_ref: {text!r}")
        conf, job, task = text[len("slurm:") :].rsplit(":", 2)
        leader, offset = job.split("+")
        return cls(Path(conf), int(leader), int(offset), int(task))


def _exit_record(run_dir: Path, leader: int) -> ReplicaStatus | None:
    """exit.json of this Slurm job's run of the replica (one of an earlier attempt does not count)."""
    try:
        data = json.loads((run_dir / "exit.json").read_text())
        code = int(data["exit_code"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if int(data.get("slurm_job_id", leader)) != leader:
        return None
    detail = ""
    if "signal" in data:
        detail = f"killed by signal {signal.Signals(int(data['signal'])).name}"
    return ReplicaStatus(Phase.EXITED, exit_code=code, detail=detail)


def replica_status(ref: SlurmRef, run_dir: Path, jobs: Sequence[SlurmJob]) -> ReplicaStatus:
    """A replica's status from a squeue snapshot taken *before* its exit record is read (so a job seen ended
    has its record in place already). Preemption and the time limit come first: they kill the replica too."""
    job = find(jobs, ref.job_id, ref.offset)
    if job is not None:
        if job.restart_count > 0 or job.phase == SlurmPhase.PREEMPTED:
            how = "requeued" if job.restart_count > 0 else "preempted"
            return ReplicaStatus(Phase.PREEMPTED, detail=f"Slurm {how} job {job.leader}")
        if job.phase == SlurmPhase.TIMEOUT:
            return ReplicaStatus(Phase.TIMEOUT, detail=f"Slurm ended job {job.leader} at its time limit")
    record = _exit_record(run_dir, ref.job_id)
    if record is not None:
        return record
    if job is None:
        return ReplicaStatus(Phase.LOST, detail=f"Slurm no longer knows job {ref.job_id}")
    if job.phase == SlurmPhase.PENDING:
        reason = job.reason if job.reason and job.reason != "None" else "not scheduled yet"
        detail = f"Slurm job {job.leader} is pending ({reason})"
        return ReplicaStatus(Phase.PENDING, detail=detail, extra={"slurm_job": job.display_id})
    if job.phase == SlurmPhase.RUNNING:
        return ReplicaStatus(Phase.RUNNING, extra={"slurm_job": job.display_id})
    return ReplicaStatus(
        Phase.LOST, detail=f"Slurm job {job.display_id} ended {job.state} without an exit record"
    )


class SlurmBackend:
    name = "slurm"
    capabilities = frozenset(
        {Capability.MULTI_REPLICA, Capability.GANG, Capability.GCS_MOUNT, Capability.ADOPT}
    )

    def __init__(
        self,
        resolvers: Sequence[SlurmTargets] = (),
        tag: str = "",
        python: str = sys.executable,
        timeout: float = 20.0,
        poll_interval: float = 0.5,
    ) -> None:
        self.resolvers = list(resolvers)
        self.tag = tag  # tells this server's Slurm jobs from another's on a shared cluster
        self.python = python  # runs the task bootstrap on the nodes (a shared filesystem is assumed)
        self.timeout = timeout
        # The controller looks every 50 ms while jobs change: one squeue per cluster per interval is enough.
        self.poll_interval = poll_interval
        self._snapshots: dict[Path, tuple[float, list[SlurmJob]]] = {}

    @staticmethod
    def tag_for(home: Path) -> str:
        return hashlib.sha256(str(home).encode()).hexdigest()[:6]

    # -------------------------------------------------------------- placement
    def add_resolver(self, resolver: SlurmTargets, first: bool = True) -> None:
        """Another source of targets (a training cluster's resolver goes first: its label is explicit)."""
        if first:
            self.resolvers.insert(0, resolver)
        else:
            self.resolvers.append(resolver)

    def target(self, placement: PlacementRequest) -> SlurmTarget | None:
        for resolve in self.resolvers:
            found = resolve(placement)
            if found is not None:
                return found
        return None

    def accepts(self, placement: PlacementRequest) -> bool:
        if self.target(placement) is not None:
            return True
        if placement.labels.get(EXECUTOR_LABEL) == "slurm":
            raise TaskError(
                f"the job is labelled {EXECUTOR_LABEL}: slurm, but this server has no Slurm cluster "
                "(start it with --slurm-conf)"
            )
        return False

    def client(self, conf: Path) -> SlurmClient:
        return SlurmClient(conf, timeout=self.timeout)

    def _jobs(self, conf: Path, fresh: bool = True) -> list[SlurmJob]:
        """squeue's jobs; with fresh=False, a snapshot up to poll_interval old will do."""
        now = time.monotonic()
        cached = self._snapshots.get(conf)
        if not fresh and cached is not None and now - cached[0] < self.poll_interval:
            return cached[1]
        try:
            jobs = self.client(conf).jobs()
        except SlurmError as exc:
            raise BackendUnavailable(str(exc)) from exc
        self._snapshots[conf] = (now, jobs)
        return jobs

    # -------------------------------------------------------------- launch
    def job_name(self, request: GangRequest) -> str:
        tag = f"-{self.tag}" if self.tag else ""
        return f"trainworks{tag}-{request.context.job_id}-a{request.attempt}"

    @staticmethod
    def _refs(conf: Path, leader: int, request: GangRequest) -> list[str]:
        offsets = {c.pool: i for i, c in enumerate(components(request.context.job_spec["workerPoolSpecs"]))}
        return [str(SlurmRef(conf, leader, offsets[m.pool], m.index)) for m in request.members]

    def _target_of(self, request: GangRequest) -> SlurmTarget:
        try:
            target = self.target(request.placement)
        except TaskError as exc:
            raise LaunchError(str(exc)) from exc
        if target is None:
            raise LaunchError("no Slurm cluster is configured for this job")
        return target

    def find_gang(self, request: GangRequest) -> list[str] | None:
        target = self._target_of(request)
        name = self.job_name(request)
        leaders = sorted({j.leader for j in self._jobs(target.conf) if j.name == name})
        return self._refs(target.conf, leaders[-1], request) if leaders else None

    def manifest(self, request: GangRequest, target: SlurmTarget) -> dict[str, Any]:
        """What every task needs to build its replica's contract (slurm/task.py)."""
        context = request.context
        parts = components(context.job_spec["workerPoolSpecs"])
        return {
            "version": MANIFEST_VERSION,
            "slurm_conf": str(target.conf),
            "job": {
                "job_id": context.job_id,
                "project_number": context.project_number,
                "job_spec": dict(context.job_spec),
                "trial_id": context.trial_id,
                "region": context.region,
            },
            "components": [{"pool": c.pool, "replicas": c.replicas} for c in parts],
            "base_port": request.base_port,
            "members": [
                {
                    "pool": m.pool,
                    "index": m.index,
                    "run_dir": str(m.run_dir),
                    "extra_env": dict(m.extra_env),
                    "python": str(m.python) if m.python else None,
                }
                for m in request.members
            ],
            "env": dict(request.env),
            "gcs_root": str(request.gcs_root) if request.gcs_root else None,
        }

    def launch_gang(self, request: GangRequest) -> list[str]:
        target = self._target_of(request)
        parts = components(request.context.job_spec["workerPoolSpecs"])
        expected = [(c.pool, i) for c in parts for i in range(c.replicas)]
        if [(m.pool, m.index) for m in request.members] != expected:
            raise LaunchError("the replicas do not match the job's worker pools")
        request.job_dir.mkdir(parents=True, exist_ok=True)
        stem = request.job_dir / f"slurm-a{request.attempt}"
        manifest_path = stem.with_suffix(".json")
        # The job spec may carry secrets in its env: readable by the owner only.
        fd = os.open(manifest_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(self.manifest(request, target), handle)
        batch = BatchJob(
            name=self.job_name(request),
            components=parts,
            task_argv=(self.python, "-m", "trainworks.slurm.task", str(manifest_path)),
            output=stem.with_suffix(".out"),
            workdir=request.job_dir,
            partition=target.partition,
            time_limit=request.time_limit,
        )
        try:
            script = batch_script(batch)
        except ValueError as exc:
            raise LaunchError(str(exc)) from exc
        script_path = stem.with_suffix(".sh")
        script_path.write_text(script)
        self._snapshots.pop(target.conf, None)  # older than this job
        try:
            leader = self.client(target.conf).submit(script_path, env=request.env)
        except SlurmRejected as exc:
            raise LaunchError(str(exc)) from exc
        except SlurmError as exc:
            raise BackendUnavailable(str(exc)) from exc
        return self._refs(target.conf, leader, request)

    def describe(self, refs: Sequence[str]) -> str:
        jobs = sorted({(r.conf, r.job_id) for r in map(SlurmRef.parse, refs)})
        return ", ".join(f"Slurm job {job} (cluster {conf})" for conf, job in jobs)

    # -------------------------------------------------------------- status
    def poll_gang(self, members: Sequence[tuple[str, Path]]) -> list[ReplicaStatus]:
        parsed = [(SlurmRef.parse(ref), Path(run_dir)) for ref, run_dir in members]
        snapshots = {conf: self._jobs(conf, fresh=False) for conf in {ref.conf for ref, _ in parsed}}
        statuses = [replica_status(ref, run_dir, snapshots[ref.conf]) for ref, run_dir in parsed]
        if any(s.phase == Phase.LOST or (s.phase == Phase.EXITED and s.exit_code) for s in statuses):
            # Before calling it lost or a crash, look again: the snapshot may be older than what it shows, and
            # a replica killed by a requeue or the time limit may exit before squeue says why.
            snapshots = {conf: self._jobs(conf) for conf in snapshots}
            statuses = [replica_status(ref, run_dir, snapshots[ref.conf]) for ref, run_dir in parsed]
        return statuses

    # -------------------------------------------------------------- stop
    @staticmethod
    def _leaders(refs: Sequence[str]) -> list[tuple[Path, int]]:
        return sorted({(r.conf, r.job_id) for r in map(SlurmRef.parse, refs)})

    def _scancel(self, conf: Path, job_id: int, signal_name: str | None = None, full: bool = False) -> None:
        self._snapshots.pop(conf, None)
        try:
            self.client(conf).cancel(job_id, signal=signal_name, full=full)
        except SlurmRejected:
            pass  # the job has ended already
        except SlurmError as exc:
            raise BackendUnavailable(str(exc)) from exc

    def cancel_gang(self, refs: Sequence[str]) -> None:
        for conf, leader in self._leaders(refs):
            self._scancel(conf, leader)

    def signal_gang(self, refs: Sequence[str], signum: int) -> None:
        for conf, leader in self._leaders(refs):
            if signum == signal.SIGKILL:
                self._scancel(conf, leader, "KILL", full=True)
                continue
            parts = [j for j in self._jobs(conf) if j.leader == leader]
            if any(j.restart_count > 0 or j.phase == SlurmPhase.PENDING for j in parts):
                self._scancel(conf, leader)  # not started (or requeued): nothing to signal, just remove it
            elif any(j.phase == SlurmPhase.RUNNING for j in parts):
                self._scancel(conf, leader, signal.Signals(signum).name.removeprefix("SIG"))
