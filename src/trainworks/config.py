"""Server settings: where state lives and how jobs run."""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainworks.tls import ServerTls


def default_home() -> Path:
    return Path(os.environ.get("TRAINWORKS_HOME") or Path.home() / ".trainworks").expanduser()


@dataclass
class Settings:
    home: Path = field(default_factory=default_home)
    database_url: str | None = None
    container_runtime: str = "host"  # "podman" or "host"; resolved at start by the CLI
    # Admin tokens (--api-token: every project). Auth is on while these or any stored token (api/auth.py,
    # `trainworks admin tokens`) exist.
    api_tokens: frozenset[str] = frozenset()
    metrics_open: bool = False  # /metrics answers without a token even when api_tokens are set
    bucket_root: Path | None = None
    gcs_protocol: str = "file"  # "gcs" sends gs:// to real Cloud Storage through gcsfs
    # This server's own URL, which replicas get as STORAGE_EMULATOR_HOST (with local buckets only): https://
    # with TLS.
    storage_url: str | None = None
    # HTTPS and gRPC over TLS (`serve --tls-cert/--tls-key`, checked there); None: HTTP and insecure gRPC.
    tls: ServerTls | None = None
    cancel_grace_seconds: float = 10.0
    inventory_path: Path | None = None  # regions, zones, machines and quotas; None: elastic local capacity
    preemption_notice_seconds: float = 30.0  # SIGTERM to SIGKILL when a SPOT replica is preempted
    insecure_registries: tuple[str, ...] = ()  # loopback registries podman may pull from (host:port)
    resync_seconds: float = 1.0
    # The custom-job controller acts on the change feed (kernel/changes.py), replica exits and its timers; it
    # also reads every active job again once per this period, chunk by chunk: the safety net.
    full_resync_seconds: float = 300.0
    executor: str = "local"  # where CustomJobs run unless labelled trainworks-executor: local or slurm
    slurm_conf: Path | None = None  # the server's Slurm cluster; None: no Slurm (unless a training cluster)
    slurm_partition: str | None = None  # None: the cluster's default partition
    default_location: str = "us-central1"
    # Where training clusters' Slurm daemons keep their state. Unix socket paths are short (107 bytes) and
    # munged wants every parent directory searchable by all, so by default it is a short folder in /tmp.
    clusters_root: Path | None = None
    max_request_bytes: int = 16 << 20  # JSON request bodies (api/limits.py), gRPC requests
    # The gRPC API (kernel/rpc.py) listens here beside the HTTP one; port 0: no gRPC.
    grpc_host: str = "127.0.0.1"
    grpc_port: int = 0
    max_object_bytes: int = 5 << 40  # one Cloud Storage upload's object, as Cloud Storage allows
    sandbox: bool = True  # host replicas run sandboxed (backends/sandbox.py); off only for debugging
    # Replica supervisors are forked from the server's fork server (backends/forkserver.py), not started cold.
    fork_server: bool = True
    # Sandboxes the fork server keeps built, an interpreter waiting in each, for the next python replicas
    # (backends/slots.py); 0: none.
    replica_slots: int = 2
    # A host replica's memory limit is its machine type's memory times this (0: no limits).
    replica_memory_scale: float = 1.0
    # "private": each sandboxed host replica has /tmp and /var/tmp of its own; "shared": the host's.
    replica_tmp: str = "private"
    # Host folders every sandboxed replica sees at the same path: (folder, writable).
    replica_binds: tuple[tuple[Path, bool], ...] = ()
    # The most log a replica keeps (its newest part; backends/capture.py), and a job's replicas together:
    # each replica gets at most the job's limit divided among them. 0: no limit.
    log_limit_replica_bytes: int = 1 << 30
    log_limit_job_bytes: int = 0

    def __post_init__(self) -> None:
        self.home = Path(self.home).expanduser().resolve()

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'trainworks.db'}"

    @property
    def buckets(self) -> Path:
        return (self.bucket_root or self.home / "buckets").resolve()

    @property
    def clusters_dir(self) -> Path:
        if self.clusters_root is not None:
            return Path(self.clusters_root).resolve()
        digest = hashlib.sha1(str(self.home).encode()).hexdigest()[:10]
        return Path(tempfile.gettempdir()) / f"trainworks-{digest}"

    @property
    def jobs_dir(self) -> Path:
        return self.home / "jobs"

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"

    def ensure_dirs(self) -> None:
        for path in (self.home, self.buckets, self.jobs_dir, self.cache_dir):
            path.mkdir(parents=True, exist_ok=True)


def parse_replica_bind(text: str, home: Path) -> tuple[Path, bool]:
    """`--replica-bind PATH[:ro|:rw]`: an existing host folder, read-write unless `:ro`. Not `/` (that would
    open the whole host to every replica) and not inside the server's home (its places stay hidden)."""
    path, _, mode = text.rpartition(":") if text.endswith((":ro", ":rw")) else (text, "", "rw")
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise ValueError(f"{path!r} is not a folder on this host")
    if folder == Path("/"):
        raise ValueError("binding / would give every replica the whole host")
    home = home.expanduser().resolve()
    if folder == home or home in folder.parents:
        raise ValueError(f"{folder} is inside the server's home, which replicas never see")
    return folder, mode == "rw"
