"""The README's runnable examples, run as a user types them, in order, against a real server.

A fenced block whose info string is `bash runnable` or `python runnable` runs; a `text output` block right
after it lists lines that must appear in what it prints (CONTRIBUTING.md, "Runnable examples in the README").
The README speaks of the server at its default address: each block's text has that address replaced by this
test's server, and the CLI finds the server through TRAINWORKS_ENDPOINT, as a user's shell could set it.
Blocks run in a scratch folder that stands for the repository root: its `.venv` and `examples` link to the
checkout's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.server import ServerProcess

README = REPO / "README.md"
#: The address the README's examples name: the one `make serve` listens on.
DEFAULT_URL = "http://127.0.0.1:8080"
#: How each runnable language runs a block's text: a shell that stops at the first failing command, or Python.
RUNNERS = {"bash": ["bash", "-e", "-o", "pipefail", "-c"], "python": [sys.executable, "-c"]}
#: A hang guard, not a timed assertion: the slowest block (a tuning job's trials) takes seconds.
BLOCK_TIMEOUT = 300.0

_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\]\((?P<target>[^)#\s]+)(?:#[^)]*)?\)")


@dataclass(frozen=True)
class Block:
    """A runnable block: where it starts in the README, its language, its text and the lines it must print."""

    line: int
    language: str
    body: str
    expected: tuple[str, ...] = ()


def runnable_blocks(text: str) -> list[Block]:
    """The runnable blocks of a Markdown text in order, each with its `text output` block's lines."""
    blocks: list[Block] = []
    previous_end: int | None = None
    for match in _FENCE.finditer(text):
        words = match["info"].split()
        line = text.count("\n", 0, match.start()) + 1
        if words == ["text", "output"]:
            follows = previous_end is not None and not text[previous_end : match.start()].strip()
            if not follows or not blocks:
                raise ValueError(f"README.md:{line}: an output block must follow a runnable block directly")
            lines = tuple(x.strip() for x in match["body"].splitlines() if x.strip())
            last = blocks[-1]
            blocks[-1] = Block(last.line, last.language, last.body, last.expected + lines)
            previous_end = None
            continue
        previous_end = None
        if "runnable" in words[1:]:
            if words[0] not in RUNNERS:
                raise ValueError(f"README.md:{line}: no way to run a {words[0]!r} block")
            blocks.append(Block(line, words[0], match["body"]))
            previous_end = match.end()
    return blocks


BLOCKS = runnable_blocks(README.read_text())


def test_the_readme_has_runnable_examples() -> None:
    """The quick start's CLI and SDK examples at least: a change of marker must not skip them all silently."""
    assert {block.language for block in BLOCKS} == {"bash", "python"}


def test_the_readme_links_to_files_that_exist() -> None:
    """The README sends readers to docs/ for the reference sections: every relative link leads somewhere."""
    targets = {m["target"] for m in _LINK.finditer(README.read_text()) if "://" not in m["target"]}
    assert targets, "no relative links found"
    missing = sorted(t for t in targets if not (REPO / t).exists())
    assert missing == []


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch repository root: what blocks write stays out of the checkout; `.venv` and `examples` are the
    checkout's own."""
    folder = tmp_path_factory.mktemp("readme")
    venv = Path(sys.prefix)
    if (venv / "bin" / "activate").exists():
        (folder / ".venv").symlink_to(venv)
    else:  # not run from a virtual environment: PATH (below) already holds the interpreter's bin
        (folder / ".venv" / "bin").mkdir(parents=True)
        (folder / ".venv" / "bin" / "activate").write_text("# the test's PATH holds the interpreter's bin\n")
    (folder / "examples").symlink_to(REPO / "examples")
    return folder


@pytest.fixture(scope="module")
def readme_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server as `make serve` runs it: replicas see none of the test's folders (the suite's servers bind
    them in), so an example that works here works on a user's machine."""
    proc = ServerProcess(home=tmp_path_factory.mktemp("home"), env={"TRAINWORKS_REPLICA_BIND": ""}).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def shell_env(readme_server: ServerProcess) -> dict[str, str]:
    """A user's shell after `source .venv/bin/activate`, with the CLI pointed at the test's server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINWORKS_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["TRAINWORKS_ENDPOINT"] = readme_server.url
    return env


@pytest.mark.parametrize("block", BLOCKS, ids=[f"README.md:{b.line}" for b in BLOCKS])
def test_runnable_block(
    block: Block, readme_server: ServerProcess, workdir: Path, shell_env: dict[str, str]
) -> None:
    script = block.body.replace(DEFAULT_URL, readme_server.url)
    run = subprocess.run(
        [*RUNNERS[block.language], script],
        stdin=subprocess.DEVNULL,
        cwd=workdir,
        env=shell_env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
    )
    printed = run.stdout + run.stderr
    assert run.returncode == 0, f"README.md:{block.line} exited {run.returncode}:\n{printed}"
    missing = [line for line in block.expected if line not in printed]
    assert missing == [], f"README.md:{block.line} did not print {missing}:\n{printed}"
