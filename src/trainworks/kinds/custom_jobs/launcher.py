"""Starts one replica: prepares what its pool needs, builds its argv and environment, hands it over."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from functools import cached_property
from pathlib import Path
from typing import Any

from trainworks.backends.base import (
    Backend,
    Capability,
    GangBackend,
    GangMember,
    GangRequest,
    LaunchRequest,
    PlacementRequest,
    ProcessHandle,
)
from trainworks.backends.capture import write_limits
from trainworks.backends.commands import TaskError, host_argv, podman_argv, pool_env
from trainworks.backends.gpus import accelerators_per_replica, detect_gpus, pick, record_devices
from trainworks.backends.host_python import HostPython, pip_settings
from trainworks.backends.podman import Podman, container_name, launch_env
from trainworks.backends.python_packages import PackageEnvironments
from trainworks.catalog.machines import machine_type
from trainworks.config import Settings
from trainworks.contract.environment import POOL_NAMES, JobContext, ReplicaSlot, replica_environment
from trainworks.jobs.service_log import log_service
from trainworks.kinds.custom_jobs.rules import replica_task
from trainworks.store.tables import CustomJobRow, ReplicaRow
from trainworks.tls import replica_trust_env
from trainworks.tuning.trial_jobs import METRIC_FILE, trial_of


def machine_memory(pool: dict[str, Any]) -> int | None:
    """The memory of a pool's machine type in bytes (None for a type the catalog does not know)."""
    machine = machine_type(str((pool.get("machineSpec") or {}).get("machineType", "")))
    return int(machine.memory_gib * (1 << 30)) if machine is not None else None


def host_env() -> dict[str, str]:
    """The part of the server's environment a replica inherits: enough to find programs and a home."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    # In host mode the server's Python environment is the executor image: its python comes first.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    env["PYTHONUNBUFFERED"] = "1"
    # The executor image's pip settings (index, find-links, build isolation...): offline sites run pip jobs.
    env.update(pip_settings(os.environ))
    return env


def storage_env(settings: Settings) -> dict[str, str]:
    """STORAGE_EMULATOR_HOST for replicas, so google-cloud-storage and gcsfs reach this server's storage API
    over the local buckets; nothing when gs:// goes to real Cloud Storage. A job's own env entry wins."""
    if settings.gcs_protocol != "file" or not settings.storage_url:
        return {}
    # gcsfs >= 2025 asks the Storage Control gRPC API (TLS, same host:port) for each bucket's layout first;
    # this server has none, and every call would stall a minute before falling back to the JSON API.
    return {"STORAGE_EMULATOR_HOST": settings.storage_url, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}


def placement(job: CustomJobRow) -> PlacementRequest:
    """What a gang backend decides from whether, and where, the job runs."""
    return PlacementRequest(
        project_number=job.project_number,
        location=job.location,
        labels=dict(job.labels or {}),
        persistent_resource_id=job.spec["jobSpec"].get("persistentResourceId"),
    )


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port_block(host: str, count: int, taken: set[int]) -> int:
    """A base port P with P..P+count-1 free here and not held by a live replica: the replicas of a gang
    job listen on P + rank, and emulated Slurm nodes may all be this host."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            base = int(sock.getsockname()[1])
        ports = range(base, base + count)
        if ports[-1] > 65535 or any(p in taken for p in ports):
            continue
        if all(_port_free(host, p) for p in ports[1:]):
            return base
    raise RuntimeError(f"no block of {count} free ports found")


class ReplicaLauncher:
    def __init__(self, settings: Settings, backend: Backend, packages: PackageEnvironments) -> None:
        self.settings = settings
        self.backend = backend
        self.packages = packages
        self.gpus = detect_gpus()
        self.host_python = HostPython(settings.cache_dir)

    def gpu_environment(
        self, job_dir: Path, replica: ReplicaRow, pool: dict[str, Any], busy: set[int]
    ) -> dict[str, str]:
        """CUDA_VISIBLE_DEVICES for a replica: its share of this host's GPUs, or none at all.

        With no GPU asked for, the host's GPUs are hidden, as on a CPU-only VM. When the host lacks what a
        pool asks for, the replica runs on the CPU and the job's service log says so."""
        kind, count = accelerators_per_replica(pool)
        if count == 0:
            return {"CUDA_VISIBLE_DEVICES": ""} if self.gpus else {}
        picked = pick(self.gpus, busy, count)
        if picked is None:
            have = f"{len(self.gpus)} GPU(s), {len(self.gpus) - len(busy)} free" if self.gpus else "no GPUs"
            log_service(
                job_dir,
                f"{replica_task(replica)} asks for {count} × {kind} but this host has {have}: "
                "it runs without them.",
                severity="WARNING",
            )
            return {"CUDA_VISIBLE_DEVICES": ""}
        record_devices(Path(replica.run_dir), picked)
        return {"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in picked)}

    @cached_property
    def podman(self) -> Podman | None:
        """Podman, when this server runs container and python package tasks in containers."""
        if Capability.CONTAINERS not in self.backend.capabilities:
            return None
        return Podman.from_settings(self.settings)

    @staticmethod
    def needs_preparation(job: CustomJobRow) -> bool:
        return any(spec.get("pythonPackageSpec") for spec in job.spec["jobSpec"]["workerPoolSpecs"])

    def prepare(self, job: CustomJobRow, job_dir: Path) -> dict[int, Path]:
        """Per pool, the python of its package environment (python package tasks only); under podman, the
        folder holding the pool's package files instead, which its executor image installs itself."""
        pythons: dict[int, Path] = {}
        for pool, spec in enumerate(job.spec["jobSpec"]["workerPoolSpecs"]):
            package = spec.get("pythonPackageSpec")
            if package and self.podman is not None:
                log_service(job_dir, f"Fetching the python packages of {POOL_NAMES[pool]}.")
                pythons[pool] = self._stage_packages(job_dir, pool, list(package["packageUris"]))
            elif package:
                log_service(job_dir, f"Installing the python packages of {POOL_NAMES[pool]}.")
                pythons[pool] = self.packages.ensure(list(package["packageUris"]))
        return pythons

    def _stage_packages(self, job_dir: Path, pool: int, uris: list[str]) -> Path:
        """<job>/packages/<pool>/<i>/<file name>: what podman mounts read-only at /trainworks/packages."""
        folder = job_dir / "packages" / POOL_NAMES[pool]
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

    def gcs_root(self, backend: Backend | GangBackend) -> Path | None:
        """The bucket root a backend that mounts /gcs shows there; objects in real Cloud Storage would need a
        FUSE mount instead."""
        if self.settings.gcs_protocol != "file" or Capability.GCS_MOUNT not in backend.capabilities:
            return None
        return self.settings.buckets

    def container_names(self, job: CustomJobRow, replicas: Sequence[ReplicaRow]) -> list[str]:
        return sorted({container_name(self.settings.home, job.id, replica_task(r)) for r in replicas})

    def remove_leftovers(self, job: CustomJobRow, replicas: Sequence[ReplicaRow]) -> None:
        """A podman client killed by SIGKILL leaves its container running: remove what is left."""
        if self.podman is not None:
            self.podman.remove_containers(self.container_names(job, replicas))

    @staticmethod
    def context(job: CustomJobRow, replicas: Sequence[ReplicaRow]) -> JobContext:
        slots = [ReplicaSlot(r.pool, r.replica_index, r.host, r.port) for r in replicas]
        return JobContext(
            job_id=str(job.id),
            project_number=job.project_number,
            job_spec=job.spec["jobSpec"],
            slots=slots,
            trial_id=trial_of(job.labels or {}),  # set on the CustomJob backing a tuning trial
            region=job.location,
        )

    def log_limit(self, job: CustomJobRow) -> int:
        """The bytes of log each replica of `job` keeps (0: all): --log-limit-replica, and a share of
        --log-limit-job."""
        limits = [self.settings.log_limit_replica_bytes] if self.settings.log_limit_replica_bytes else []
        if self.settings.log_limit_job_bytes:
            pools = job.spec["jobSpec"]["workerPoolSpecs"]
            replicas = sum(int(pool.get("replicaCount", 0) or 0) for pool in pools) or 1
            limits.append(max(self.settings.log_limit_job_bytes // replicas, 1))
        return min(limits, default=0)

    def launch(
        self,
        job: CustomJobRow,
        replica: ReplicaRow,
        context: JobContext,
        python: Path | None,
        busy_gpus: set[int] | None = None,
    ) -> ProcessHandle:
        pool: dict[str, Any] = job.spec["jobSpec"]["workerPoolSpecs"][replica.pool]
        resource = job.spec["jobSpec"].get("persistentResourceId")
        slot = ReplicaSlot(replica.pool, replica.replica_index, replica.host, replica.port)
        task = replica_task(replica)
        job_dir = Path(replica.run_dir).parent
        write_limits(replica.run_dir, self.log_limit(job))
        extra = {
            **storage_env(self.settings),
            **self.gpu_environment(job_dir, replica, pool, busy_gpus or set()),
        }
        if self.podman is None:  # a container sees no host file: its image must trust the server's CA
            extra.update(replica_trust_env(self.settings.tls, Path(replica.run_dir)))
        if context.trial_id:  # where cloudml-hypertune writes this replica's reports
            extra["CLOUD_ML_HP_METRIC_FILE"] = str(Path(replica.run_dir) / METRIC_FILE)
        context = replace(context, extra_env={**context.extra_env, **extra})
        env = replica_environment(context, slot, pool_env(pool))
        gcs_root = self.gcs_root(self.backend)
        shim_gcs_root: Path | None = gcs_root
        if self.podman is not None:
            # Inside `podman run`: the image is checked first (TaskError naming it when it is not there),
            # env values travel in the podman client's environment, and podman mounts /gcs itself.
            spec = pool.get("containerSpec") or pool.get("pythonPackageSpec") or {}
            pull = self.podman.pull_policy(spec.get("imageUri") or spec.get("executorImageUri") or "")
            process_env, explicit = launch_env(host_env(), env, self.podman)
            packages = None
            if python is not None and "pythonPackageSpec" in pool:
                staged = sorted(python.glob("*/*"), key=lambda p: int(p.parent.name))
                packages = [str(p.relative_to(python)) for p in staged]
            argv = podman_argv(
                pool,
                env,
                container_name(self.settings.home, job.id, task),
                gcs_root,
                podman=self.podman.executable or "podman",
                pull=pull,
                explicit_env=explicit,
                packages_dir=python,
                packages=packages,
                labels={"trainworks.job": str(job.id), "trainworks.task": task},
            )
            shim_gcs_root = None  # the supervisor must not unshare its mount namespace around podman
        else:
            argv = host_argv(pool, env, python)
            # The executor environment's python and pip first on PATH, installs in a user base of its own.
            base = host_env()
            image = self.host_python.replica_env(Path(replica.run_dir), base["PATH"])
            process_env = {**base, **image, **env}
        request = LaunchRequest(
            job_id=str(job.id),
            task_name=task,
            argv=argv,
            env=process_env,
            run_dir=Path(replica.run_dir),
            cwd=Path(replica.run_dir),
            gcs_root=shim_gcs_root,
            project=job.project_number,
            memory_bytes=machine_memory(pool),
            persistent_resource=(job.project_number, job.location, resource) if resource else None,
        )
        return self.backend.launch(request)

    def gang_request(
        self,
        gang: GangBackend,
        job: CustomJobRow,
        replicas: Sequence[ReplicaRow],
        pythons: dict[int, Path],
        taken: set[int],
        time_limit: timedelta | None,
    ) -> GangRequest:
        """Every replica of the current attempt, for `gang`, which starts them together (Slurm). Replicas
        run their command on the nodes directly (host mode); GPUs are the backend scheduler's business."""
        base = free_port_block(replicas[0].host, len(replicas), taken)
        context = self.context(job, replicas)
        context = replace(
            context, slots=[replace(slot, port=base + i) for i, slot in enumerate(context.slots)]
        )
        members = []
        for replica in replicas:
            pool: dict[str, Any] = job.spec["jobSpec"]["workerPoolSpecs"][replica.pool]
            python = pythons.get(replica.pool)
            write_limits(replica.run_dir, self.log_limit(job))
            if self.podman is not None and "pythonPackageSpec" in pool:
                # Under podman, prepare() staged the package files for an image, not an environment.
                raise TaskError(
                    f"{replica_task(replica)}: python package tasks run on Slurm only when the server runs "
                    "them in host mode (--container-runtime host)"
                )
            try:
                host_argv(pool, {}, python)  # a pool that cannot run fails here, not on the nodes
            except TaskError as exc:
                raise TaskError(f"{replica_task(replica)}: {exc}") from exc
            extra = {
                **storage_env(self.settings),
                **replica_trust_env(self.settings.tls, Path(replica.run_dir)),
            }
            if context.trial_id:
                extra["CLOUD_ML_HP_METRIC_FILE"] = str(Path(replica.run_dir) / METRIC_FILE)
            members.append(
                GangMember(replica.pool, replica.replica_index, Path(replica.run_dir), extra, python)
            )
        return GangRequest(
            placement=placement(job),
            context=context,
            members=tuple(members),
            attempt=job.attempt,
            job_dir=Path(replicas[0].run_dir).parent,
            base_port=base,
            env=host_env(),
            gcs_root=self.gcs_root(gang),
            time_limit=time_limit,
        )
