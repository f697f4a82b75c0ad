"""The host runtime's executor image: a cached Python environment replicas run in, installs kept per replica.

In host mode the server's own Python environment plays the container image. Commands written for an image
install into it: the official SDK's `CustomJob.from_local_script` runs `pip install --upgrade pip && pip3
install -q --user /gcs/<bucket>/<sdist> && python3 -m <module>`. Run as is, that would upgrade pip in the
server's environment, fail on `--user` (a virtual environment hides the user site) and leak installs between
jobs.

So a host replica gets, first on its PATH, the bin folder of an *executor environment*: a virtual environment
of the server's base interpreter, made once per server interpreter under the cache folder with
`--without-pip --system-site-packages` (the latter makes the user site visible). Its site-packages holds a
.pth naming the server's site-packages (the image's libraries), its site `pip.conf` makes every install a
user install, and its `pip`/`pip3` run the server's pip under its interpreter. Each replica gets its own user
base (PYTHONUSERBASE, emptied at every start like a fresh container), which its interpreter puts on sys.path
ahead of the image's libraries. pip leaves the server's environment alone: installs go to the user base, and
pip refuses to uninstall what lies outside the environment it runs in ("Not uninstalling ... outside
environment").
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import site
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from trainworks.backends.commands import TaskError

#: Part of the environment's key: a change in how environments are made gives new ones.
LAYOUT_VERSION = "2"
#: Written last: an environment without it is half-built and is made again.
READY_MARKER = ".ready"
#: The replica's user base, inside its run folder (what ~/.local is to a container).
USER_BASE_NAME = ".local"
#: Every pip run by the executor interpreter installs to the user site, whoever invokes it and however.
SITE_PIP_CONF = "[install]\nuser = true\n"
#: pip settings that decide where installs go: the executor environment decides that, not the server's shell.
PIP_LOCATION_VARIABLES = frozenset({"PIP_USER", "PIP_TARGET", "PIP_PREFIX", "PIP_ROOT"})
PIP_COMMANDS = ("pip", "pip3", f"pip3.{sys.version_info.minor}")


class HostPythonError(TaskError):
    """The executor environment could not be made: no host replica can start."""


def server_site_packages() -> list[str]:
    """The server's site-packages folders, in sys.path order: the libraries of the host "image"."""
    return [p for p in site.getsitepackages() if Path(p).is_dir()]


def pip_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The server's PIP_* settings a replica's pip follows (index, find-links, build isolation, config
    file...), less the ones that would move installs out of the replica's user base."""
    return {k: v for k, v in environ.items() if k.startswith("PIP_") and k not in PIP_LOCATION_VARIABLES}


def site_pth(folders: list[str]) -> str:
    """A .pth that adds `folders` as site directories: their own .pth files (editable installs, namespace
    packages) are processed too, which a plain path line would skip."""
    return "".join(f"import site; site.addsitedir({folder!r})\n" for folder in folders)


def venv_flags() -> list[str]:
    """`python -m venv` options for a python package task's environment: no pip (nor the old setuptools
    ensurepip brings) of its own when the server has pip, so packages build and install with the image's
    tools (its .pth names the server's site-packages), as they would in an executor image."""
    return ["--without-pip"] if importlib.util.find_spec("pip") is not None else []


def pip_wrapper(python: Path) -> str:
    """`pip` of the executor environment: the server's pip module run by the environment's interpreter."""
    return f'#!/bin/sh\nexec "{python}" -m pip "$@"\n'


def environment_key(executable: str, site_packages: list[str]) -> str:
    """One environment per server interpreter and library folders (a moved server venv gets a new one)."""
    text = "\n".join([LAYOUT_VERSION, os.path.realpath(executable), sys.version, *site_packages])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class HostPython:
    """The executor environment under `cache_dir/host-python/`, made on first use; each replica's part."""

    def __init__(self, cache_dir: Path) -> None:
        self.site_packages = server_site_packages()
        self.root = cache_dir / "host-python" / environment_key(sys.executable, self.site_packages)
        self._lock = threading.Lock()

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> Path:
        return self.bin_dir / "python"

    def ensure(self) -> Path:
        """The environment's bin folder, made if it is not there yet."""
        with self._lock:
            if not (self.root / READY_MARKER).exists():
                self._build()
        return self.bin_dir

    def replica_env(self, run_dir: Path, path: str) -> dict[str, str]:
        """For one replica start: PATH (this environment's bin ahead of `path`), a fresh private user base."""
        bin_dir = self.ensure()
        user_base = run_dir / USER_BASE_NAME
        # A restarted replica starts from the image again, as a new container would; not creating the folder
        # also keeps the interpreter's start-up identical to a warm fork's (no user site on sys.path yet).
        shutil.rmtree(user_base, ignore_errors=True)
        return {"PATH": f"{bin_dir}{os.pathsep}{path}", "PYTHONUSERBASE": str(user_base)}

    def _build(self) -> None:
        building = self.root.with_name(self.root.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        building.parent.mkdir(parents=True, exist_ok=True)
        # Run from the server's venv, venv still bases the environment on the base interpreter.
        self._run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(building)])
        lib = next((building / "lib").glob("python3*/site-packages"))
        (lib / "_trainworks_host_image.pth").write_text(site_pth(self.site_packages))
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
        python = str(building / "bin" / "python")
        if not self._succeeds([python, "-c", "import pip"], clean):
            # The server's environment has no pip (uv makes such venvs): this environment gets its own.
            self._run([python, "-m", "ensurepip", "--default-pip"], env=clean)
        # After ensurepip: the site config would make its install a user install too.
        (building / "pip.conf").write_text(SITE_PIP_CONF)
        shutil.rmtree(self.root, ignore_errors=True)
        building.rename(self.root)
        for name in PIP_COMMANDS:
            # ensurepip's own scripts hard-code the building folder's interpreter: replace them.
            script = self.bin_dir / name
            script.unlink(missing_ok=True)
            script.write_text(pip_wrapper(self.python))
            script.chmod(0o755)
        (self.root / READY_MARKER).write_text(f"{sys.executable}\n")

    @staticmethod
    def _succeeds(argv: list[str], env: dict[str, str]) -> bool:
        try:
            return subprocess.run(argv, capture_output=True, env=env, timeout=60).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False

    @staticmethod
    def _run(argv: list[str], env: dict[str, str] | None = None) -> None:
        try:
            run = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HostPythonError(f"making the host executor environment failed: {exc}") from exc
        if run.returncode != 0:
            tail = "\n".join((run.stderr or run.stdout).strip().splitlines()[-10:])
            raise HostPythonError(f"making the host executor environment failed ({argv[2]}):\n{tail}")
