"""Shared fixtures: a real server process per test module, and PostgreSQL from tests.support."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.command_forks import WARM
from tests.support.paths import REPO
from tests.support.pg_fixtures import postgres_server, postgres_url  # noqa: F401
from tests.support.server import ServerProcess
from tests.support.supervisors import stop_warm_interpreters

# pytest-xdist's workers export COLUMNS=80 and LINES=24: the CLI's human output would wrap at 80 columns
# there and not in a plain run. Tests see no terminal size, whatever runs them.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


# The modules that take longest, started first: `make test` hands whole modules to its workers in collection
# order (--dist loadfile --no-loadscope-reorder), so the run ends on short ones instead of waiting for one of
# these on a single worker. From `--durations` of full runs (2026-12-05); a module not named keeps its place.
# The modules that run Slurm daemons (marked `slurm_daemons`) take a machine-wide lock one at a time: they are
# spread out between the others, so that a worker taking one seldom sits waiting for the lock (their fixtures
# waited 77-160 s when they came one after another).
SLOW_FIRST = (
    "tests/slurm/test_slurm_daemons.py",  # Slurm
    "tests/system/test_fuzz_api.py",
    "tests/backends/test_memory_limits.py",
    "tests/backends/test_podman.py",
    "tests/system/test_chaos.py",  # Slurm
    "tests/system/test_preemption_storm.py",
    "tests/kinds/custom_jobs/test_shell.py",
    "tests/system/test_console_features.py",
    "tests/kinds/clusters/test_api.py",  # Slurm
    "tests/system/test_console_browser.py",
    "tests/system/test_readme.py",
    "tests/kinds/models/test_cli.py",
    "tests/kinds/clusters/test_cli.py",  # Slurm
    "tests/kinds/custom_jobs/test_cli_local_package.py",
    "tests/kinds/tuning_jobs/",
    "tests/backends/test_slurm_backend.py",  # Slurm
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return next((i for i, prefix in enumerate(SLOW_FIRST) if path.startswith(prefix)), len(SLOW_FIRST))

    items.sort(key=rank)  # stable: within a rank, and for every other module, the collection's order


@pytest.fixture(scope="session", autouse=True)
def _replicas_see_the_test_folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every server a test starts binds this run's temporary folders (tmp_path: job scripts, gates, files
    replicas and tests share) into its replicas, and the checkout read-only (examples and test scripts run by
    their host path): replicas have a /tmp of their own, so anything under /tmp is otherwise out of
    their sight. Servers see it through `serve --replica-bind`'s variable."""
    binds = [str(tmp_path_factory.getbasetemp().resolve()), f"{REPO}:ro"]
    os.environ["TRAINWORKS_REPLICA_BIND"] = " ".join(binds)
    yield
    os.environ.pop("TRAINWORKS_REPLICA_BIND", None)


@pytest.fixture(scope="session", autouse=True)
def _no_warm_interpreter_outlives_the_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Persistent resources' warm interpreters outlive their server (a restarted one adopts them) and live
    while their records do, which pytest keeps for a few runs: the ones this run's servers left are
    stopped by the pids their records name."""
    yield
    stop_warm_interpreters(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session", autouse=True)
def _warm_interpreters() -> Iterator[None]:
    """The interpreters this worker's servers and CLI runs are forked from (tests/support/command_forks.py),
    stopped by PID once every server of the session has been."""
    yield
    for warm in WARM.values():
        warm.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path_factory.mktemp("home")).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path / "home").start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module", autouse=True)
def _one_slurm_module_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """Modules marked `slurm_daemons` hold a machine-wide lock while they run.

    `make test` runs modules on parallel workers; Slurm clusters pick their loopback port blocks by probing
    which are free, so two clusters started at the same moment by two workers could pick the same block.
    """
    if request.node.get_closest_marker("slurm_daemons") is None:
        yield
        return
    with open(Path(tempfile.gettempdir()) / "trainworks-tests-slurm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # blocks until the module holding it ends
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
