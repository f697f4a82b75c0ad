"""Server settings: where state lives and how jobs run."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def default_home() -> Path:
    return Path(os.environ.get("TRAINWORKS_HOME") or Path.home() / ".trainworks").expanduser()


@dataclass
class Settings:
    home: Path = field(default_factory=default_home)
    database_url: str | None = None
    container_runtime: str = "host"  # "podman" or "host"; resolved at start by the CLI
    api_tokens: frozenset[str] = frozenset()  # bearer tokens or API keys; empty = no auth
    bucket_root: Path | None = None
    gcs_protocol: str = "file"  # "gcs" sends gs:// to real Cloud Storage through gcsfs
    cancel_grace_seconds: float = 10.0
    inventory_path: Path | None = None  # regions, zones, machines and quotas; None: elastic local capacity
    preemption_notice_seconds: float = 30.0  # SIGTERM to SIGKILL when a SPOT replica is preempted
    insecure_registries: tuple[str, ...] = ()  # loopback registries podman may pull from (host:port)
    resync_seconds: float = 1.0
    default_location: str = "us-central1"

    def __post_init__(self) -> None:
        self.home = Path(self.home).expanduser().resolve()

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'trainworks.db'}"

    @property
    def buckets(self) -> Path:
        return (self.bucket_root or self.home / "buckets").resolve()

    @property
    def jobs_dir(self) -> Path:
        return self.home / "jobs"

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"

    def ensure_dirs(self) -> None:
        for path in (self.home, self.buckets, self.jobs_dir, self.cache_dir):
            path.mkdir(parents=True, exist_ok=True)
