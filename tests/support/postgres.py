"""A throwaway PostgreSQL cluster for the test suite.

``PostgresServer`` runs ``initdb`` into a temporary directory and starts ``postgres`` directly as a
child process (no ``pg_ctl`` daemonisation, so the postmaster PID is known), listening only on
127.0.0.1 at a free port, with trust authentication and durability switched off for speed.

PostgreSQL refuses to run as root; when the tests run as root the server is run as the unprivileged
``postgres`` OS user (created by the Debian ``postgresql`` package). Install the server with
``scripts/install-test-deps.sh``.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

INSTALL_HINT = "run scripts/install-test-deps.sh (as root) to install the PostgreSQL server"
DEFAULT_DATABASE = "trainworks_test"
SUPERUSER = "postgres"
OS_USER = "postgres"
BINDIR_ENV = "TRAINWORKS_PG_BINDIR"

_DB_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_PORT_IN_USE_MARKERS = ("could not bind", "address already in use")


class PostgresUnavailableError(RuntimeError):
    """The PostgreSQL server binaries (or the OS user to run them) are not available."""


class PostgresStartupError(RuntimeError):
    """The throwaway PostgreSQL server could not be initialised or started."""


def _version_key(path: str) -> tuple[int, ...]:
    version = Path(path).parent.parent.name  # /usr/lib/postgresql/<version>/bin/initdb
    return tuple(int(part) for part in re.findall(r"\d+", version)) or (0,)


def find_bindir() -> Path:
    """Directory holding ``initdb`` and ``postgres``; the newest Debian install wins.

    Search order: ``$TRAINWORKS_PG_BINDIR``, ``/usr/lib/postgresql/*/bin``, then ``$PATH``.
    """
    candidates: list[Path] = []
    override = os.environ.get(BINDIR_ENV)
    if override:
        candidates.append(Path(override))
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version_key, reverse=True)
    candidates.extend(Path(p).parent for p in debian)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for bindir in candidates:
        if all(os.access(bindir / name, os.X_OK) for name in ("initdb", "postgres")):
            return bindir
    searched = ", ".join(str(c) for c in candidates) or "/usr/lib/postgresql/*/bin and $PATH"
    raise PostgresUnavailableError(
        f"PostgreSQL server binaries (initdb, postgres) not found (searched: {searched}); {INSTALL_HINT}"
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (bind to port 0 and let the kernel pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class PostgresServer:
    """A disposable PostgreSQL cluster: ``start()`` it, hand out database URLs, ``stop()`` it.

    Usable as a context manager. All state lives in one temporary directory that ``stop()`` removes.
    """

    host = "127.0.0.1"

    def __init__(
        self,
        *,
        database: str = DEFAULT_DATABASE,
        startup_timeout: float = 30.0,
        stop_timeout: float = 15.0,
        base_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.database = _check_db_name(database)
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.base_dir = base_dir
        self.bindir: Path | None = None
        self.tmpdir: Path | None = None
        self.port: int | None = None
        self.pid: int | None = None
        self.url: str | None = None
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> str:
        """Initialise and start the cluster, create the default database; return its SQLAlchemy URL."""
        if self._proc is not None:
            raise RuntimeError("PostgresServer already started")
        began = time.monotonic()
        self.bindir = find_bindir()
        run_as = self._run_as()
        self.tmpdir = Path(tempfile.mkdtemp(prefix="trainworks-pg-", dir=self.base_dir))
        atexit.register(self.stop)
        try:
            (self.tmpdir / "sock").mkdir()
            if run_as is not None:
                for path in (self.tmpdir, self.tmpdir / "sock"):
                    os.chown(path, run_as.pw_uid, run_as.pw_gid)
            self._initdb(run_as)
            self._start_postgres(run_as)
            self.url = self.create_database(self.database)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self.url

    def stop(self) -> None:
        """Stop the server (signal, bounded wait, escalate to SIGKILL) and remove the temporary directory.

        Idempotent. The first signal is SIGINT, PostgreSQL's "fast" shutdown, which disconnects open
        client sessions; SIGTERM ("smart" shutdown) would wait for every connection a test leaked
        (e.g. an undisposed SQLAlchemy pool) and so always run into the timeout. If the server does
        not exit in time it gets SIGQUIT (immediate shutdown; the postmaster kills its backends),
        and finally SIGKILL together with any backend still alive.
        """
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            steps = (
                (signal.SIGINT, self.stop_timeout),
                (signal.SIGQUIT, self.stop_timeout),
                (signal.SIGKILL, 10.0),
            )
            for sig, timeout in steps:
                victims = [proc.pid, *child_pids(proc.pid)] if sig == signal.SIGKILL else [proc.pid]
                for pid in victims:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, sig)
                try:
                    proc.wait(timeout=timeout)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        tmpdir, self.tmpdir = self.tmpdir, None
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
        atexit.unregister(self.stop)

    def halt(self) -> None:
        """Fast shutdown (SIGINT: open sessions are disconnected) keeping the data directory and the port, so
        ``resume()`` can start the same cluster again: a database outage under a running client."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            raise RuntimeError("PostgresServer is not running")
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGQUIT)  # immediate shutdown: the postmaster kills its backends
            proc.wait(timeout=self.stop_timeout)

    def resume(self) -> None:
        """Start a halted cluster again on its port and data directory; return once it accepts connections."""
        if self._proc is not None or self.tmpdir is None:
            raise RuntimeError("PostgresServer is not halted")
        self._spawn(self._run_as(), self.tmpdir / "postgres.log", mode="ab")
        self._wait_until_ready(self.tmpdir / "postgres.log")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- databases -----------------------------------------------------------------------------

    def url_for(self, database: str) -> str:
        self._require_running()
        return f"postgresql+psycopg://{SUPERUSER}@{self.host}:{self.port}/{_check_db_name(database)}"

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database (a unique name when ``name`` is None); return its SQLAlchemy URL."""
        name = _check_db_name(name or f"test_{uuid.uuid4().hex[:16]}")
        with self._admin_connection() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, terminating any sessions still connected to it."""
        with self._admin_connection() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(_check_db_name(name))
                )
            )

    # -- internals -----------------------------------------------------------------------------

    def _admin_connection(self) -> psycopg.Connection[Any]:
        self._require_running()
        return psycopg.connect(**self._conninfo("postgres"), autocommit=True)

    def _conninfo(self, dbname: str) -> dict[str, Any]:
        return {
            "host": self.host,
            "port": self.port,
            "user": SUPERUSER,
            "dbname": dbname,
            "connect_timeout": 2,
        }

    def _require_running(self) -> None:
        if not self.running:
            raise RuntimeError("PostgresServer is not running")

    @staticmethod
    def _run_as() -> pwd.struct_passwd | None:
        """The unprivileged account to run the server as, or None to run as the current user."""
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam(OS_USER)
        except KeyError:
            raise PostgresUnavailableError(
                f"running as root but there is no {OS_USER!r} OS user to run PostgreSQL as; {INSTALL_HINT}"
            ) from None

    @staticmethod
    def _env() -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", LANG="C")
        return env

    @staticmethod
    def _user_kwargs(run_as: pwd.struct_passwd | None) -> dict[str, Any]:
        if run_as is None:
            return {}
        return {"user": run_as.pw_uid, "group": run_as.pw_gid, "extra_groups": []}

    def _initdb(self, run_as: pwd.struct_passwd | None) -> None:
        assert self.bindir is not None and self.tmpdir is not None
        cmd = [
            str(self.bindir / "initdb"),
            "--pgdata", str(self.tmpdir / "data"),
            "--username", SUPERUSER,
            "--auth", "trust",
            "--encoding", "UTF8",
            "--locale", "C",
            "--no-sync",
        ]  # fmt: skip
        result = subprocess.run(
            cmd,
            cwd=self.tmpdir,
            env=self._env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
            check=False,
            **self._user_kwargs(run_as),
        )
        if result.returncode != 0:
            output = result.stdout.decode(errors="replace").strip()
            hint = ""
            if run_as is not None:
                hint = (
                    f"\n(initdb runs as OS user {run_as.pw_name!r}: {self.tmpdir} and its parents must be "
                    "accessible to it; pass base_dir= or set TMPDIR to a directory such as /tmp)"
                )
            raise PostgresStartupError(f"initdb failed (exit {result.returncode}):\n{output}{hint}")

    def _postgres_cmd(self, run_as: pwd.struct_passwd | None) -> list[str]:
        assert self.bindir is not None and self.tmpdir is not None
        prefix: list[str] = []
        setpriv = shutil.which("setpriv")
        if setpriv and threading.current_thread() is threading.main_thread():
            # Have the kernel send the postmaster SIGINT (fast shutdown) should this process die
            # without running stop(), so a killed test run leaves no server behind. The signal
            # fires when the *thread* that forked exits, hence only from the main thread.
            prefix = [setpriv, "--pdeathsig", "INT", "--"]
        return [
            *prefix,
            str(self.bindir / "postgres"),
            "-D", str(self.tmpdir / "data"),
            "-p", str(self.port),
            "-c", f"listen_addresses={self.host}",
            "-c", f"unix_socket_directories={self.tmpdir / 'sock'}",
            "-c", "fsync=off",
            "-c", "synchronous_commit=off",
            "-c", "full_page_writes=off",
        ]  # fmt: skip

    def _start_postgres(self, run_as: pwd.struct_passwd | None, attempts: int = 3) -> None:
        assert self.tmpdir is not None
        log_path = self.tmpdir / "postgres.log"
        for attempt in range(1, attempts + 1):
            self.port = free_port(self.host)
            self._spawn(run_as, log_path, mode="wb")
            try:
                self._wait_until_ready(log_path)
                return
            except PostgresStartupError as exc:
                port_taken = any(m in str(exc).lower() for m in _PORT_IN_USE_MARKERS)
                if self._proc is not None and self._proc.poll() is None:
                    raise
                self._proc = None
                if not port_taken or attempt == attempts:
                    raise

    def _spawn(self, run_as: pwd.struct_passwd | None, log_path: Path, mode: str) -> None:
        """Start the postmaster on ``self.port`` with its output in ``log_path``."""
        if self._log_file is not None:
            self._log_file.close()
        self._log_file = open(log_path, mode)  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            self._postgres_cmd(run_as),
            cwd=self.tmpdir,
            env=self._env(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **self._user_kwargs(run_as),
        )
        self.pid = self._proc.pid

    def _wait_until_ready(self, log_path: Path) -> None:
        """Poll with real connection attempts until the server accepts one (bounded in time)."""
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        last_error: Exception | None = None
        while True:
            returncode = self._proc.poll()
            if returncode is not None:
                raise PostgresStartupError(
                    f"postgres exited with code {returncode} during startup; log:\n{_tail(log_path)}"
                )
            try:
                with psycopg.connect(**self._conninfo("postgres")) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError as exc:
                last_error = exc
            if time.monotonic() >= deadline:
                raise PostgresStartupError(
                    f"postgres did not accept connections on {self.host}:{self.port} within "
                    f"{self.startup_timeout:.0f}s (last error: {last_error}); log:\n{_tail(log_path)}"
                )
            time.sleep(0.05)


def child_pids(pid: int) -> list[int]:
    """PIDs of the live child processes of ``pid`` (Linux /proc; empty elsewhere)."""
    children = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(pid):
            children.append(int(Path(stat).parent.name))
    return children


def _check_db_name(name: str) -> str:
    if not _DB_NAME_RE.match(name):
        raise ValueError(f"invalid database name {name!r} (letters, digits, underscore; max 63 chars)")
    return name


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"<could not read {path}: {exc}>"
