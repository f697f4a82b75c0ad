"""Podman as the container runtime: a private configuration owned by the server, and checks around launching.

The server never edits /etc. It writes `<home>/podman/containers.conf` and `<home>/podman/registries.conf` and
runs every podman command (the start-up check, image checks, replicas, clean-up) with CONTAINERS_CONF and
CONTAINERS_REGISTRIES_CONF pointing at them. The settings are the ones podman needs on a host without systemd
and with hybrid cgroups (Debian 12 VMs): runc (crun refuses hybrid cgroups), cgroupfs, the file events logger,
ulimits no higher than the hard limits we run under (podman's default nofile=1048576 cannot be set without
CAP_SYS_RESOURCE), and the host network namespace by default, so that podman never creates its CNI bridge
(which would also switch on net.ipv4.ip_forward).

Images come from podman's own storage (the host's, or the one CONTAINERS_STORAGE_CONF names in the server's
environment, which is passed on). Registries are only used when named with `--insecure-registry` (plain-HTTP
registries on loopback, e.g. 127.0.0.1:5000): images under them are pulled when missing; any other image must
already be present locally, or the job fails before it starts.

argv building stays in trainworks.backends.commands (`podman_argv`); this module supplies its inputs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import resource
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainworks.backends.commands import TaskError
from trainworks.backends.memory_limits import kernel_logged_oom_kill
from trainworks.config import Settings

log = logging.getLogger(__name__)

# Environment variables of the server that podman reads and replicas' podman clients must see too.
PASSTHROUGH_ENV = ("CONTAINERS_STORAGE_CONF", "REGISTRY_AUTH_FILE")
NOFILE_CAP = 1048576
NPROC_CAP = 32768  # conmon's hard nproc limit on Debian 12; higher values fail with "setting rlimit type 7"
# The clean-up podman runs after each container refuses a longer run root ("the specified runroot is longer
# than 50 characters"); `podman run` then waits 20 s for the container's state before it returns.
RUNROOT_LIMIT = 50
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


class PodmanError(Exception):
    """podman itself failed (not: the image is missing)."""


def _hard_limit(which: int, cap: int) -> int:
    try:
        _soft, hard = resource.getrlimit(which)
    except (OSError, ValueError):
        return cap
    return cap if hard == resource.RLIM_INFINITY or hard <= 0 else min(hard, cap)


def default_ulimits() -> list[str]:
    nofile = _hard_limit(resource.RLIMIT_NOFILE, NOFILE_CAP)
    nproc = _hard_limit(resource.RLIMIT_NPROC, NPROC_CAP)
    return [f"nofile={nofile}:{nofile}", f"nproc={nproc}:{nproc}"]


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def _toml_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(_toml_str(v) for v in values) + "]"


def check_registry(registry: str) -> str:
    """A registry named by --insecure-registry: host[:port] on loopback only (plain HTTP, no TLS)."""
    value = registry.strip().rstrip("/")
    if "://" in value:
        value = value.split("://", 1)[1]
    host = value.rsplit(":", 1)[0] if value.count(":") == 1 or value.startswith("[") else value
    if host not in LOOPBACK_HOSTS or "/" in value or not value:
        raise ValueError(
            f"insecure registry {registry!r}: only loopback registries "
            "(127.0.0.1:PORT, localhost:PORT) are allowed"
        )
    return value


def image_registry(image: str) -> str | None:
    """The registry of an image reference, or None for a short name (which podman never resolves here)."""
    first, sep, _rest = image.partition("/")
    if not sep:
        return None
    if "." in first or ":" in first or first == "localhost" or first.startswith("["):
        return first
    return None


def container_name(home: Path, job_id: str | int, task_name: str) -> str:
    """`trainworks-<server>-<job>-<task>`: <server> (8 hex digits of the home's path) keeps two servers that
    share podman's storage from taking, or removing, each other's containers."""
    tag = hashlib.sha256(str(home).encode()).hexdigest()[:8]
    return f"trainworks-{tag}-{job_id}-{task_name}"


@dataclass(frozen=True)
class Podman:
    home: Path  # the server's home; the configuration lives in <home>/podman
    insecure_registries: tuple[str, ...] = ()
    executable: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Podman:
        registries = tuple(check_registry(r) for r in getattr(settings, "insecure_registries", ()))
        return cls(home=settings.home, insecure_registries=registries, executable=shutil.which("podman"))

    # ------------------------------------------------------------------ configuration
    @property
    def conf_dir(self) -> Path:
        return self.home / "podman"

    @property
    def containers_conf(self) -> Path:
        return self.conf_dir / "containers.conf"

    @property
    def registries_conf(self) -> Path:
        return self.conf_dir / "registries.conf"

    def containers_conf_text(self) -> str:
        init = shutil.which("catatonit") or "/usr/libexec/podman/catatonit"
        return (
            "# Written by trainworks; rewritten at every server start.\n"
            "[containers]\n"
            f"default_ulimits = {_toml_list(default_ulimits())}\n"
            'netns = "host"\n'
            f"init_path = {_toml_str(init)}\n"
            "\n[engine]\n"
            'runtime = "runc"\n'
            'cgroup_manager = "cgroupfs"\n'
            'events_logger = "file"\n'
        )

    def registries_conf_text(self) -> str:
        lines = [
            "# Written by trainworks; rewritten at every server start.",
            "unqualified-search-registries = []",
            'short-name-mode = "disabled"',
        ]
        for registry in self.insecure_registries:
            lines += ["", "[[registry]]", f"location = {_toml_str(registry)}", "insecure = true"]
        return "\n".join(lines) + "\n"

    def write_config(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        for path, text in (
            (self.containers_conf, self.containers_conf_text()),
            (self.registries_conf, self.registries_conf_text()),
        ):
            with contextlib.suppress(OSError):
                if path.read_text() == text:
                    continue
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text)
            tmp.replace(path)

    def env(self) -> dict[str, str]:
        """What every podman invocation needs in its environment, on top of PATH and friends."""
        env = {
            "CONTAINERS_CONF": str(self.containers_conf),
            "CONTAINERS_REGISTRIES_CONF": str(self.registries_conf),
        }
        for name in PASSTHROUGH_ENV:
            if os.environ.get(name):
                env[name] = os.environ[name]
        return env

    # ------------------------------------------------------------------ running podman
    def _run(self, args: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        if self.executable is None:
            raise PodmanError("podman is not installed")
        if not self.containers_conf.exists():
            self.write_config()
        try:
            return subprocess.run(
                [self.executable, *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.env()},
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PodmanError(f"podman {args[0]} failed: {exc}") from exc

    def works(self) -> tuple[bool, str]:
        """Podman counts as available when, with our configuration, it reports runc as its OCI runtime."""
        if self.executable is None:
            return False, "podman is not installed"
        try:
            self.write_config()
        except OSError as exc:
            return False, f"cannot write the podman configuration under {self.conf_dir}: {exc}"
        fields = "{{.Host.OCIRuntime.Name}}\n{{.Store.GraphRoot}}\n{{.Store.RunRoot}}"
        try:
            run = self._run(["info", "--format", fields], timeout=30)
        except PodmanError as exc:
            return False, str(exc)
        if run.returncode != 0:
            return False, f"podman info failed: {run.stderr.strip()[-300:]}"
        runtime, root, run_root = (run.stdout.strip().split("\n") + ["", ""])[:3]
        if runtime != "runc":
            return False, f"podman uses the OCI runtime {runtime!r}, not runc (is runc installed?)"
        if len(run_root) > RUNROOT_LIMIT:
            log.warning(
                "podman's run root %s is longer than %d characters: podman's clean-up after each container "
                "refuses it, and every container job ends ~20 s late; set a shorter runroot in storage.conf",
                run_root,
                RUNROOT_LIMIT,
            )
        return True, f"podman with runc, storage {root}, configuration {self.conf_dir}"

    def pullable(self, image: str) -> bool:
        return image_registry(image) in self.insecure_registries

    def image_exists(self, image: str) -> bool:
        run = self._run(["image", "exists", image], timeout=30)
        if run.returncode == 0:
            return True
        if run.returncode == 1:
            return False
        raise PodmanError(f"podman image exists {image} failed: {run.stderr.strip()[-300:]}")

    def pull_policy(self, image: str) -> str:
        """`never` for a present image, `missing` for one in a configured registry, else TaskError."""
        if not image:
            raise TaskError("the worker pool names no container image")
        try:
            if self.image_exists(image):
                return "never"
        except PodmanError as exc:
            raise TaskError(str(exc)) from exc
        if self.pullable(image):
            return "missing"
        where = (
            f"; the registries this server pulls from are {', '.join(self.insecure_registries)}"
            if self.insecure_registries
            else ""
        )
        raise TaskError(
            f"the container image {image!r} is not present in this server's podman storage and cannot be "
            f"pulled{where}. Build or load it first (podman build / podman load / podman pull)"
        )

    def oom_killed(self, name: str) -> bool:
        """Whether the (ended, not yet removed) container was killed by the OOM killer: as podman says, or
        else as the kernel logged it for the container's cgroup (conmon misses OOM kills on hybrid cgroup v1
        hosts, where podman always says false)."""
        try:
            run = self._run(["inspect", "--format", "{{.State.OOMKilled}} {{.Id}}", name], timeout=30)
        except PodmanError as exc:
            log.warning("podman inspect %s: %s", name, exc)
            return False
        if run.returncode != 0:
            return False
        said, _, container_id = run.stdout.strip().partition(" ")
        return said == "true" or bool(container_id) and kernel_logged_oom_kill(f"/libpod-{container_id}")

    def remove_containers(self, names: Iterable[str]) -> None:
        """Kill and remove these containers if they exist; leaves nothing running behind a killed client."""
        names = sorted(set(names))
        if not names or self.executable is None:
            return
        try:
            run = self._run(["rm", "--force", "--ignore", "--time", "0", *names], timeout=120)
        except PodmanError as exc:
            log.warning("could not remove containers %s: %s", ", ".join(names), exc)
            return
        removed = [n for n in run.stdout.split() if n]
        if removed:
            log.info("removed left-over containers: %s", ", ".join(removed))
        if run.returncode != 0:
            log.warning("podman rm %s: %s", " ".join(names), run.stderr.strip()[-300:])


def podman_works(settings: Settings) -> tuple[bool, str]:
    """Writes the server's podman configuration and checks that podman runs with it."""
    return Podman.from_settings(settings).works()


def container_of(argv: list[str]) -> str | None:
    """The container name of a `podman run --name=NAME ...` command line."""
    if len(argv) < 2 or not os.path.basename(argv[0]).startswith("podman") or argv[1] != "run":
        return None
    return next((w.removeprefix("--name=") for w in argv[2:] if w.startswith("--name=")), None)


def confine(
    argv: list[str],
    memory: int | None,
    bucket_root: Path | None,
    buckets: list[str] | None,
    binds: Sequence[tuple[Path, bool]] = (),
) -> list[str]:
    """A replica's `podman run` with its memory limit (swap included: --memory-swap equal to --memory),
    when `buckets` is given only those buckets of the bucket root at /gcs, and `binds` (host folder,
    writable) at their own paths. The container is kept after it ends (no --rm) so that the backend can ask
    podman whether the OOM killer ended it, then removes it."""
    if container_of(argv) is None:
        return argv
    out = [argv[0], "run"]
    if memory is not None:
        out += [f"--memory={memory}", f"--memory-swap={memory}"]
    out += [f"--volume={path}:{path}" + ("" if writable else ":ro") for path, writable in binds]
    whole = f"--volume={bucket_root}:/gcs" if bucket_root is not None else None
    for word in argv[2:]:
        if word == "--rm":
            continue
        if word == whole and buckets is not None:
            out += [f"--volume={bucket_root}/{name}:/gcs/{name}" for name in buckets]
            continue
        out.append(word)
    return out


def launch_env(
    base: Mapping[str, str], job_env: Mapping[str, str], podman: Podman
) -> tuple[dict[str, str], set[str]]:
    """The podman client's environment for one replica, and the job variables whose value it cannot carry.

    `podman run --env NAME` copies NAME's value from the client's environment, so job values (secrets
    included) stay out of argv. A job variable that podman needs for itself (CONTAINERS_CONF, ...) keeps
    podman's value there and is passed explicitly instead.
    """
    own = podman.env()
    env = {**base, **job_env, **own}
    explicit = {name for name, value in job_env.items() if env.get(name) != value}
    return env, explicit
