"""Slurm's command-line clients for one cluster (named by its slurm.conf): sbatch, squeue --json, scancel,
scontrol; and how Slurm's job states map to ours.

Every call has a timeout and raises SlurmError with Slurm's own message. SlurmRejected means Slurm refused the
request itself (an unknown partition, a job too big for the cluster): asking again will not help.
"""

from __future__ import annotations

import enum
import json
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class SlurmError(Exception):
    """A Slurm command failed or did not answer in time (the controller may be down or busy)."""


class SlurmRejected(SlurmError):
    """Slurm refused the request (bad option, unknown partition, impossible size, Slurm not installed)."""


class SlurmPhase(enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    PREEMPTED = "preempted"  # preempted or requeued: the job lost its nodes; not a completion

    @property
    def ended(self) -> bool:
        return self not in (SlurmPhase.PENDING, SlurmPhase.RUNNING)


# Slurm's job states (squeue's job_state, without flags) → ours.
SLURM_STATES: Mapping[str, SlurmPhase] = {
    "PENDING": SlurmPhase.PENDING,
    "CONFIGURING": SlurmPhase.PENDING,  # nodes allocated, still booting: the program has not started
    "RESV_DEL_HOLD": SlurmPhase.PENDING,
    "RUNNING": SlurmPhase.RUNNING,
    "COMPLETING": SlurmPhase.RUNNING,  # processes may still be alive
    "SUSPENDED": SlurmPhase.RUNNING,
    "STOPPED": SlurmPhase.RUNNING,
    "SIGNALING": SlurmPhase.RUNNING,
    "STAGE_OUT": SlurmPhase.RUNNING,
    "RESIZING": SlurmPhase.RUNNING,
    "COMPLETED": SlurmPhase.COMPLETED,
    "FAILED": SlurmPhase.FAILED,
    "NODE_FAIL": SlurmPhase.FAILED,
    "BOOT_FAIL": SlurmPhase.FAILED,
    "OUT_OF_MEMORY": SlurmPhase.FAILED,
    "SPECIAL_EXIT": SlurmPhase.FAILED,
    "CANCELLED": SlurmPhase.CANCELLED,
    "TIMEOUT": SlurmPhase.TIMEOUT,
    "DEADLINE": SlurmPhase.TIMEOUT,
    "PREEMPTED": SlurmPhase.PREEMPTED,
    "REQUEUED": SlurmPhase.PREEMPTED,
    "REQUEUE_HOLD": SlurmPhase.PREEMPTED,
    "REQUEUE_FED": SlurmPhase.PREEMPTED,
}


# While a job is COMPLETING, squeue shows that state instead of why it ends; its reason still says.
ENDING_REASONS: Mapping[str, SlurmPhase] = {
    "TimeLimit": SlurmPhase.TIMEOUT,
    "DeadLine": SlurmPhase.TIMEOUT,
}


def slurm_phase(state: str) -> SlurmPhase:
    """The phase of a Slurm state name; flags after the base state ("RUNNING,COMPLETING") are ignored."""
    base = state.split(",")[0].strip().upper()
    return SLURM_STATES.get(base, SlurmPhase.FAILED if base else SlurmPhase.PENDING)


@dataclass(frozen=True)
class SlurmJob:
    """One job record of squeue, or one component of a heterogeneous job."""

    job_id: int
    het_job_id: int  # the leader's id; 0 for a plain job
    het_offset: int
    name: str
    state: str
    reason: str
    restart_count: int
    nodes: str

    @property
    def leader(self) -> int:
        return self.het_job_id or self.job_id

    @property
    def phase(self) -> SlurmPhase:
        if self.state.upper().startswith("COMPLETING") and self.reason in ENDING_REASONS:
            return ENDING_REASONS[self.reason]
        return slurm_phase(self.state)

    @property
    def display_id(self) -> str:
        """As squeue shows it: 12+1 for a het component, 12 for a plain job."""
        return f"{self.het_job_id}+{self.het_offset}" if self.het_job_id else str(self.job_id)


def _int(value: Any) -> int:
    """squeue --json numbers are plain ints in 22.05 and {"set", "number"} objects in later releases."""
    if isinstance(value, Mapping):
        value = value.get("number", 0) if value.get("set", True) else 0
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _text(value: Any) -> str:
    if isinstance(value, list):  # later releases give job_state as a list of flags
        return ",".join(str(v) for v in value)
    return "" if value is None else str(value)


def parse_squeue(data: Mapping[str, Any]) -> list[SlurmJob]:
    """The job records of `squeue --json` output."""
    jobs = []
    for item in data.get("jobs") or []:
        jobs.append(
            SlurmJob(
                job_id=_int(item.get("job_id")),
                het_job_id=_int(item.get("het_job_id")),
                het_offset=_int(item.get("het_job_offset")),
                name=_text(item.get("name")),
                state=_text(item.get("job_state")),
                reason=_text(item.get("state_reason")),
                restart_count=_int(item.get("restart_cnt")),
                nodes=_text(item.get("nodes")),
            )
        )
    return jobs


def parse_sbatch(stdout: str) -> int:
    """`sbatch --parsable` prints `<job id>` or `<job id>;<cluster>`."""
    first = stdout.strip().splitlines()[0] if stdout.strip() else ""
    match = re.fullmatch(r"(\d+)(;.*)?", first.strip())
    if match is None:
        raise SlurmError(f"sbatch printed no job id: {stdout.strip()!r}")
    return int(match.group(1))


def parse_nodes(text: str) -> dict[str, str]:
    """NodeName → NodeAddr from `scontrol show node -o` (one node per line)."""
    addresses = {}
    for line in text.splitlines():
        fields = {m[1]: m[2] for m in re.finditer(r"(\w+)=(\S*)", line)}
        name = fields.get("NodeName")
        if name:
            addresses[name] = fields.get("NodeAddr") or name
    return addresses


# Messages of a Slurm that cannot be reached or is busy: worth asking again later.
_TRANSIENT = re.compile(
    r"unable to contact|socket timed out|temporarily unable|connection refused|try again|"
    r"slurm_load_jobs error|communication|timed out",
    re.IGNORECASE,
)


class SlurmClient:
    """Slurm's clients against one cluster, found through SLURM_CONF."""

    def __init__(self, conf: Path, timeout: float = 20.0, env: Mapping[str, str] | None = None) -> None:
        self.conf = Path(conf)
        self.timeout = timeout
        self.env = dict(os.environ if env is None else env)

    def run(
        self, *argv: str, env: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        environment = {**(self.env if env is None else env), "SLURM_CONF": str(self.conf)}
        try:
            result = subprocess.run(
                list(argv),
                env=environment,
                capture_output=True,
                text=True,
                timeout=timeout or self.timeout,
                stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError as exc:
            raise SlurmRejected(f"{argv[0]} is not installed here: {exc}") from exc
        except subprocess.TimeoutExpired as exc:
            raise SlurmError(f"{argv[0]} did not answer within {exc.timeout:g}s ({self.conf})") from exc
        if result.returncode != 0:
            message = (result.stderr or result.stdout).strip() or f"exit status {result.returncode}"
            kind = SlurmError if _TRANSIENT.search(message) else SlurmRejected
            raise kind(f"{argv[0]} failed ({self.conf}): {message}")
        return result

    def submit(self, script: Path, env: Mapping[str, str] | None = None) -> int:
        """Submit a batch script; its environment (`env`) is what the job's tasks inherit."""
        return parse_sbatch(self.run("sbatch", "--parsable", str(script), env=env).stdout)

    def jobs(self) -> list[SlurmJob]:
        """Every job Slurm still knows (ended ones stay for MinJobAge). 22.05 ignores filters with --json."""
        output = self.run("squeue", "--json").stdout
        try:
            return parse_squeue(json.loads(output))
        except ValueError as exc:
            raise SlurmError(f"squeue --json printed something that is not JSON: {exc}") from exc

    def cancel(self, job_id: int, signal: str | None = None, full: bool = False) -> None:
        """scancel: without `signal`, Slurm's own cancel (SIGTERM, then SIGKILL after KillWait)."""
        argv = ["scancel"]
        if signal:
            argv.append(f"--signal={signal}")
        if full:
            argv.append("--full")
        self.run(*argv, str(job_id))

    def hostnames(self, nodelist: str) -> list[str]:
        """n[1-3],x → n1 n2 n3 x, in Slurm's order."""
        return self.run("scontrol", "show", "hostnames", nodelist).stdout.split()

    def addresses(self, nodelist: str) -> dict[str, str]:
        """NodeName → NodeAddr of the nodes of a node list."""
        return parse_nodes(self.run("scontrol", "show", "node", "-o", nodelist).stdout)


def find(jobs: Sequence[SlurmJob], leader: int, offset: int) -> SlurmJob | None:
    """The record of a job's component (offset 0 of a plain job is the job itself)."""
    for job in jobs:
        if job.leader == leader and (job.het_offset == offset if job.het_job_id else offset == 0):
            return job
    return None
