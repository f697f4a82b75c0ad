"""Reconciles custom jobs: QUEUED -> PENDING -> RUNNING -> SUCCEEDED | FAILED, and CANCELLING -> CANCELLED.

Every decision reads the database and writes it back with a compare-and-set, so the loop can stop at any
point and a restarted server picks up where it was: running replicas are re-adopted through their pid and
start time, and exit codes survive in each replica's exit record.

When a job ends (see docs/state-machines.md):
* it SUCCEEDS when the primary replica (workerpool0-0) exits 0; the other replicas are then stopped;
* it FAILS when any replica exits non-zero or disappears before that, when it passes scheduling.timeout,
  or when it cannot start; the other replicas are stopped;
* a non-primary replica that exits 0 early is simply done.
Stopping is SIGTERM to each replica's process group, then SIGKILL after the grace period.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from functools import cached_property
from pathlib import Path
from typing import Any

from trainworks.backends.base import Backend, LaunchError, LaunchRequest, Phase, ProcessHandle
from trainworks.backends.commands import TaskError, host_argv, podman_argv, pool_env
from trainworks.backends.podman import Podman, container_name, launch_env
from trainworks.backends.python_packages import PackageEnvironments, PackageInstallError
from trainworks.config import Settings
from trainworks.contract.environment import POOL_NAMES, JobContext, ReplicaSlot, replica_environment
from trainworks.controllers.ports import free_port
from trainworks.controllers.service_log import log_service
from trainworks.resources.custom_job import DEFAULT_TIMEOUT
from trainworks.resources.enums import JobState
from trainworks.resources.status import Code, status_dict
from trainworks.resources.wire import now_utc, parse_duration
from trainworks.store.jobs import JobStore
from trainworks.store.operations import OperationStore
from trainworks.store.tables import CustomJobRow, ReplicaRow

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
S = JobState


def _tail(path: Path, lines: int = 20, max_bytes: int = 8192) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _handle(replica: ReplicaRow) -> ProcessHandle | None:
    if replica.pid is None:
        return None
    return ProcessHandle(pid=replica.pid, pid_start=replica.pid_start or 0)


class CustomJobController:
    def __init__(
        self,
        settings: Settings,
        jobs: JobStore,
        operations: OperationStore,
        backend: Backend,
        packages: PackageEnvironments,
    ) -> None:
        self.settings = settings
        self.jobs = jobs
        self.operations = operations
        self.backend = backend
        self.packages = packages
        self.wake_event = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._prepare_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="prepare")
        self._preparing: dict[int, Future[dict[int, Path]]] = {}

    # -------------------------------------------------------------- loop
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="custom-job-controller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.wake_event.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._prepare_pool.shutdown(wait=False, cancel_futures=True)

    def wake(self) -> None:
        self.wake_event.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.wake_event.clear()
            try:
                busy = self.reconcile_once()
            except Exception:  # keep reconciling: one bad pass must not stop every job
                log.exception("reconcile pass failed")
                busy = False
            # While replicas run, look often enough to notice exits promptly.
            self.wake_event.wait(0.05 if busy else self.settings.resync_seconds)

    def reconcile_once(self) -> bool:
        """One pass over every job that is not finished; True while some job has live work."""
        busy = False
        for job in self.jobs.active():
            try:
                busy |= self.reconcile(job)
            except Exception:
                log.exception("reconciling job %s failed", job.id)
        return busy

    # -------------------------------------------------------------- one job
    def job_dir(self, job: CustomJobRow) -> Path:
        return self.settings.jobs_dir / str(job.id)

    def reconcile(self, job: CustomJobRow) -> bool:
        if job.delete_operation_id is not None and S(job.state).terminal:
            self._finish_delete(job)
            return False
        state = S(job.state)
        if job.outcome is not None:
            return self._tear_down(job)
        if state == S.JOB_STATE_QUEUED:
            if not self.jobs.transition(job.id, [S.JOB_STATE_QUEUED], state=S.JOB_STATE_PENDING):
                return True
            log_service(self.job_dir(job), "Waiting for job to be provisioned.")
            # Go on to start it in this pass: waiting for the next one cost a poll interval (50 ms).
            state = S.JOB_STATE_PENDING
            job.state = int(state)
        if state == S.JOB_STATE_PENDING:
            return self._start(job)
        if state == S.JOB_STATE_RUNNING:
            return self._watch(job)
        if state == S.JOB_STATE_CANCELLING:
            # Cancel always records an outcome; a row without one is repaired here.
            self.jobs.set_fields(job.id, outcome=self._cancel_outcome())
            return True
        return False

    @staticmethod
    def _cancel_outcome() -> dict[str, Any]:
        return {"state": int(S.JOB_STATE_CANCELLED), "error": status_dict(Code.CANCELLED, "CANCELED")}

    def _decide(self, job: CustomJobRow, state: JobState, error: dict[str, Any] | None = None) -> None:
        """Record how the job ends; replicas are stopped before the state becomes final."""
        outcome = {"state": int(state), "error": error}
        active = [S.JOB_STATE_QUEUED, S.JOB_STATE_PENDING, S.JOB_STATE_RUNNING, S.JOB_STATE_CANCELLING]
        if self.jobs.transition(job.id, active, outcome=outcome):
            job.outcome = outcome
            if error:
                log_service(self.job_dir(job), error["message"], severity="ERROR")

    def _fail(self, job: CustomJobRow, code: Code, message: str) -> None:
        self._decide(job, S.JOB_STATE_FAILED, status_dict(code, message))

    # -------------------------------------------------------------- PENDING
    def _plan(self, job: CustomJobRow) -> list[ReplicaRow]:
        taken = self.jobs.ports_in_use()
        rows: list[ReplicaRow] = []
        for pool, spec in enumerate(job.spec["jobSpec"]["workerPoolSpecs"]):
            for index in range(int(spec.get("replicaCount", 0) or 0)):
                task = f"{POOL_NAMES[pool]}-{index}"
                rows.append(
                    ReplicaRow(
                        job_id=job.id,
                        pool=pool,
                        replica_index=index,
                        host=LOOPBACK,
                        port=free_port(LOOPBACK, taken),
                        phase="planned",
                        run_dir=str(self.job_dir(job) / task),
                    )
                )
        return self.jobs.add_replicas(rows)

    def _prepare(self, job: CustomJobRow) -> dict[int, Path]:
        """Per pool, the python of its package environment (python package tasks only); under podman, the
        folder holding the pool's package files instead, which its executor image installs itself."""
        pythons: dict[int, Path] = {}
        for pool, spec in enumerate(job.spec["jobSpec"]["workerPoolSpecs"]):
            package = spec.get("pythonPackageSpec")
            if package and self.podman is not None:
                log_service(self.job_dir(job), f"Fetching the python packages of {POOL_NAMES[pool]}.")
                pythons[pool] = self._stage_packages(job, pool, list(package["packageUris"]))
            elif package:
                log_service(self.job_dir(job), f"Installing the python packages of {POOL_NAMES[pool]}.")
                pythons[pool] = self.packages.ensure(list(package["packageUris"]))
        return pythons

    def _stage_packages(self, job: CustomJobRow, pool: int, uris: list[str]) -> Path:
        """<job>/packages/<pool>/<i>/<file name>: what podman mounts read-only at /trainworks/packages."""
        folder = self.job_dir(job) / "packages" / POOL_NAMES[pool]
        for index, cached in enumerate(self.packages.fetch(uris)):
            target = folder / str(index) / cached.name
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".part")
            tmp.unlink(missing_ok=True)
            try:
                os.link(cached, tmp)
            except OSError:
                shutil.copyfile(cached, tmp)
            tmp.replace(target)  # a replica of a restarted server may be reading the previous copy
        return folder

    @cached_property
    def podman(self) -> Podman | None:
        """Podman, when this server runs container and python package tasks in containers."""
        if getattr(self.backend, "container_runtime", "host") != "podman":
            return None
        return Podman.from_settings(self.settings)

    def _container_names(self, job: CustomJobRow) -> list[str]:
        return [
            container_name(self.settings.home, job.id, f"{POOL_NAMES[r.pool]}-{r.replica_index}")
            for r in self.jobs.replicas(job.id)
            if r.phase != "skipped"
        ]

    def _start(self, job: CustomJobRow) -> bool:
        replicas = self.jobs.replicas(job.id) or self._plan(job)
        future = self._preparing.get(job.id)
        if future is None:
            if any(spec.get("pythonPackageSpec") for spec in job.spec["jobSpec"]["workerPoolSpecs"]):
                future = self._prepare_pool.submit(self._prepare, job)
                future.add_done_callback(lambda _f: self.wake())
            else:  # nothing to prepare: start now, not after a trip through the pool and another pass
                future = Future()
                future.set_result({})
            self._preparing[job.id] = future
        if not future.done():
            return True
        del self._preparing[job.id]
        try:
            pythons = future.result()
        except (PackageInstallError, OSError) as exc:
            self._fail(job, Code.FAILED_PRECONDITION, f"The job could not be prepared: {exc}")
            return True
        log_service(self.job_dir(job), "Waiting for training program to start.")
        slots = [ReplicaSlot(r.pool, r.replica_index, r.host, r.port) for r in replicas]
        context = JobContext(
            job_id=str(job.id),
            project_number=job.project_number,
            job_spec=job.spec["jobSpec"],
            slots=slots,
            region=job.location,
        )
        pools = job.spec["jobSpec"]["workerPoolSpecs"]
        for replica, slot in zip(replicas, slots, strict=True):
            if replica.phase != "planned":
                continue
            orphan = self.backend.find(Path(replica.run_dir))
            if orphan is not None:  # started before a crash, never recorded: adopt it, do not start twice
                self.jobs.update_replica(
                    replica.id,
                    phase="running",
                    pid=orphan.pid,
                    pid_start=orphan.pid_start,
                    started_at=now_utc(),
                )
                continue
            try:
                handle = self._launch(
                    job, replica, slot, context, pools[replica.pool], pythons.get(replica.pool)
                )
            except (TaskError, LaunchError) as exc:
                self._fail(
                    job, Code.FAILED_PRECONDITION, f"The replica {slot.task_name} could not start: {exc}"
                )
                return True
            self.jobs.update_replica(
                replica.id, phase="running", pid=handle.pid, pid_start=handle.pid_start, started_at=now_utc()
            )
        if self.jobs.transition(
            job.id, [S.JOB_STATE_PENDING], state=S.JOB_STATE_RUNNING, start_time=now_utc()
        ):
            log_service(self.job_dir(job), "Job is running.")
        return True

    def _launch(
        self,
        job: CustomJobRow,
        replica: ReplicaRow,
        slot: ReplicaSlot,
        context: JobContext,
        pool: dict[str, Any],
        python: Path | None,
    ) -> ProcessHandle:
        env = replica_environment(context, slot, pool_env(pool))
        # /gcs shows the local bucket root; objects in real Cloud Storage would need a FUSE mount instead.
        gcs_root = self.settings.buckets if self.settings.gcs_protocol == "file" else None
        shim_gcs_root: Path | None = gcs_root
        if self.podman is not None:
            # Inside `podman run`: the image is checked first (TaskError naming it when it is not there),
            # env values travel in the podman client's environment, and podman mounts /gcs itself.
            spec = pool.get("containerSpec") or pool.get("pythonPackageSpec") or {}
            pull = self.podman.pull_policy(spec.get("imageUri") or spec.get("executorImageUri") or "")
            process_env, explicit = launch_env(_host_env(), env, self.podman)
            packages = None
            if python is not None and "pythonPackageSpec" in pool:
                staged = sorted(python.glob("*/*"), key=lambda p: int(p.parent.name))
                packages = [str(p.relative_to(python)) for p in staged]
            argv = podman_argv(
                pool,
                env,
                container_name(self.settings.home, job.id, slot.task_name),
                gcs_root,
                podman=self.podman.executable or "podman",
                pull=pull,
                explicit_env=explicit,
                packages_dir=python,
                packages=packages,
                labels={"trainworks.job": str(job.id), "trainworks.task": slot.task_name},
            )
            shim_gcs_root = None  # the supervisor must not unshare its mount namespace around podman
        else:
            argv = host_argv(pool, env, python)
            process_env = {**_host_env(), **env}
        request = LaunchRequest(
            job_id=str(job.id),
            task_name=slot.task_name,
            argv=argv,
            env=process_env,
            run_dir=Path(replica.run_dir),
            cwd=Path(replica.run_dir),
            gcs_root=shim_gcs_root,
        )
        return self.backend.launch(request)

    # -------------------------------------------------------------- RUNNING
    def _watch(self, job: CustomJobRow) -> bool:
        for replica in self.jobs.replicas(job.id):
            handle = _handle(replica)
            if handle is None or replica.phase != "running":
                continue
            status = self.backend.poll(handle, Path(replica.run_dir))
            if status.phase == Phase.RUNNING:
                continue
            task = f"{POOL_NAMES[replica.pool]}-{replica.replica_index}"
            self._record_exit(replica, status.phase, status.exit_code, status.detail)
            if status.phase == Phase.LOST:
                self._fail(
                    job,
                    Code.INTERNAL,
                    f"The replica {task} was lost: its process ended without reporting an exit status "
                    "(was the host restarted or the process killed from outside?).",
                )
                return True
            log_service(self.job_dir(job), f"Task {task} completed. Exit code ({status.exit_code}).")
            if status.exit_code != 0:
                reason = status.detail or "Error"
                message = (
                    f"The replica {task} exited with a non-zero status of {status.exit_code}. "
                    f"Termination reason: {reason}."
                )
                tail = _tail(Path(replica.run_dir) / "stderr.log")
                if tail:
                    message += f"\n{tail}"
                self._fail(job, Code.INVALID_ARGUMENT, message)
                return True
            if replica.pool == 0 and replica.replica_index == 0:
                self._decide(job, S.JOB_STATE_SUCCEEDED)
                return True
        timeout = _job_timeout(job)
        if job.start_time is not None and now_utc() - job.start_time > timeout:
            self._fail(
                job,
                Code.DEADLINE_EXCEEDED,
                f"The job ran longer than its timeout of {int(timeout.total_seconds())}s.",
            )
        return True

    def _record_exit(self, replica: ReplicaRow, phase: Phase, code: int | None, detail: str) -> None:
        self.jobs.update_replica(
            replica.id, phase=phase.value, exit_code=code, detail=detail or None, ended_at=now_utc()
        )

    # -------------------------------------------------------------- teardown
    def _tear_down(self, job: CustomJobRow) -> bool:
        assert job.outcome is not None
        self._preparing.pop(job.id, None)
        alive: list[tuple[ReplicaRow, ProcessHandle]] = []
        for replica in self.jobs.replicas(job.id):
            handle = _handle(replica)
            if replica.phase == "planned":
                self.jobs.update_replica(replica.id, phase="skipped")
                continue
            if handle is None or replica.phase != "running":
                continue
            status = self.backend.poll(handle, Path(replica.run_dir))
            if status.phase == Phase.RUNNING:
                alive.append((replica, handle))
            else:
                self._record_exit(replica, status.phase, status.exit_code, status.detail or "stopped")
        if alive:
            now = now_utc()
            if job.teardown_started is None:
                log_service(self.job_dir(job), "Tearing down training program.")
                for _replica, handle in alive:
                    self.backend.signal(handle, signal.SIGTERM)
                self.jobs.set_fields(job.id, teardown_started=now)
            elif now - job.teardown_started > timedelta(seconds=self.settings.cancel_grace_seconds):
                for _replica, handle in alive:
                    self.backend.signal(handle, signal.SIGKILL)
            return True
        if self.podman is not None:
            # A podman client killed by SIGKILL (grace period over, or killed from outside) leaves its
            # container running: remove whatever is left of this job's containers before it ends.
            self.podman.remove_containers(self._container_names(job))
        state = S(job.outcome["state"])
        done = self.jobs.transition(
            job.id,
            [S.JOB_STATE_QUEUED, S.JOB_STATE_PENDING, S.JOB_STATE_RUNNING, S.JOB_STATE_CANCELLING],
            state=state,
            error=job.outcome.get("error"),
            end_time=now_utc(),
            outcome=None,
        )
        if done:
            final = {
                S.JOB_STATE_SUCCEEDED: "Job completed successfully.",
                S.JOB_STATE_FAILED: "Job failed.",
                S.JOB_STATE_CANCELLED: "Job was cancelled.",
            }.get(state, f"Job ended in {state.name}.")
            log_service(self.job_dir(job), final)
        return False

    # -------------------------------------------------------------- delete
    def _finish_delete(self, job: CustomJobRow) -> None:
        op_id = job.delete_operation_id
        shutil.rmtree(self.job_dir(job), ignore_errors=True)
        self.jobs.remove(job.id)
        if op_id is not None:
            self.operations.finish(op_id, response={"@type": "type.googleapis.com/google.protobuf.Empty"})


def _job_timeout(job: CustomJobRow) -> timedelta:
    scheduling = job.spec["jobSpec"].get("scheduling") or {}
    return parse_duration(scheduling["timeout"]) if scheduling.get("timeout") else DEFAULT_TIMEOUT


def _host_env() -> dict[str, str]:
    """The part of the server's environment a replica inherits: enough to find programs and a home."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    # In host mode the server's Python environment is the executor image: its python comes first.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    env["PYTHONUNBUFFERED"] = "1"
    return env
