"""The CLI starts with what a client command needs: the server's database, web server, storage and gRPC
modules load only in the commands that use them (admin tokens, serve, submit and package staging), and a
kind's commands only when they are named (`cli.main.COMMANDS`).

Every command pays its start-up (0.9 s with all of them, 0.3 s now, on this 2-core machine), and scripts
run many commands.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Modules no client command needs at start: each is imported inside the commands that use it.
SERVER_SIDE = ("sqlalchemy", "alembic", "uvicorn", "fastapi", "fsspec", "gcsfs", "grpc", "optuna")

PROBE = """
import json, sys
import trainworks.cli.main
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules} & set(sys.argv[1:]))))
"""


def test_the_cli_starts_without_the_server_side_modules() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *SERVER_SIDE], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == []


# Runs one kind's command and says which kinds' command modules were loaded.
ONE_KIND = """
import contextlib, json, sys
from trainworks.cli.main import main
sys.argv = ["trainworks", *sys.argv[1:]]
with contextlib.redirect_stdout(sys.stderr), contextlib.suppress(SystemExit):
    main()
loaded = [m for m in sys.modules if m.startswith("trainworks.kinds.") and m.endswith(".cli")]
print(json.dumps(sorted(loaded)))
"""


def test_the_server_starts_without_the_cli_and_the_tuning_search() -> None:
    """The HTTP app and its services load neither the CLI's framework nor Optuna (the first tuning job
    does)."""
    modules = ("typer", "optuna", "numpy")
    probe = PROBE.replace("import trainworks.cli.main", "import trainworks.api.app, trainworks.wiring")
    done = subprocess.run(
        [sys.executable, "-c", probe, *modules], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == []


def test_a_command_loads_its_own_kind_only() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ONE_KIND, "hp-tuning-jobs", "list", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == ["trainworks.kinds.tuning_jobs.cli"]


@pytest.mark.parametrize(
    "argv",
    [["serve", "--help"], ["admin", "tokens", "create", "--help"], ["submit", "--help"], ["--version"]],
)
def test_the_commands_that_load_them_still_show_their_help(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainworks.cli.main", *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "trainworks" in done.stdout
