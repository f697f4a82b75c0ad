"""Shared fixtures: a real server process per test module, and PostgreSQL from tests.support."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.pg_fixtures import postgres_server, postgres_url  # noqa: F401
from tests.support.server import ServerProcess

# pytest-xdist's workers export COLUMNS=80 and LINES=24: the CLI's human output would wrap at 80 columns
# there and not in a plain run. Tests see no terminal size, whatever runs them.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


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
