"""Python package tasks: fetch the packageUris and install them into a cached virtual environment.

The environment is keyed by the content hashes of the packages, so a resubmitted job reuses it and a changed
package gets a fresh one. In host mode the server's own Python environment plays the executor image: the
job's environment sees its libraries through a .pth file, and the job's packages are installed on top.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from trainworks.backends.host_python import server_site_packages, site_pth, venv_flags
from trainworks.storage.gcs import ObjectStore, parse_gcs_uri


class PackageInstallError(Exception):
    pass


class PackageEnvironments:
    def __init__(self, cache_dir: Path, store: ObjectStore) -> None:
        self.cache_dir = cache_dir
        self.store = store
        self._lock = threading.Lock()

    def _fetch(self, uris: list[str]) -> list[Path]:
        """Copy each package into a content-addressed cache folder; returns local paths in order."""
        local: list[Path] = []
        for uri in uris:
            try:
                data = self.store.read_bytes(uri)
            except FileNotFoundError:
                raise PackageInstallError(f"package {uri} does not exist") from None
            except OSError as exc:
                raise PackageInstallError(f"could not read package {uri}: {exc}") from exc
            digest = hashlib.sha256(data).hexdigest()
            name = Path(parse_gcs_uri(uri).key).name or "package.tar.gz"
            target = self.cache_dir / "packages" / digest / name
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_suffix(target.suffix + ".part")
                tmp.write_bytes(data)
                tmp.replace(target)
            local.append(target)
        return local

    def fetch(self, uris: list[str]) -> list[Path]:
        """The packages copied into the local cache, in order (for runtimes that install them elsewhere)."""
        return self._fetch(uris)

    def ensure(self, uris: list[str]) -> Path:
        """The python interpreter of a ready environment with these packages installed."""
        packages = self._fetch(uris)
        key = hashlib.sha256("\n".join(p.parent.name + "/" + p.name for p in packages).encode()).hexdigest()
        env_dir = self.cache_dir / "venvs" / key[:32]
        python = env_dir / "bin" / "python"
        with self._lock:
            if (env_dir / ".ready").exists():
                return python
            building = env_dir.with_name(env_dir.name + ".building")
            shutil.rmtree(building, ignore_errors=True)
            self._build(building, packages)
            shutil.rmtree(env_dir, ignore_errors=True)
            building.rename(env_dir)
            # venv scripts hard-code their folder; the interpreter itself does not, so only python is used.
            self._write_pth(env_dir)
            (env_dir / ".ready").write_text("\n".join(str(p) for p in packages))
        return python

    def _write_pth(self, env_dir: Path) -> None:
        lib = next((env_dir / "lib").glob("python3*/site-packages"))
        (lib / "_trainworks_executor.pth").write_text(site_pth(server_site_packages()))

    def _build(self, env_dir: Path, packages: list[Path]) -> None:
        run = subprocess.run(
            [sys.executable, "-m", "venv", *venv_flags(), str(env_dir)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if run.returncode != 0:
            raise PackageInstallError(f"could not create a virtual environment: {run.stderr.strip()}")
        self._write_pth(env_dir)
        env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
        run = subprocess.run(
            [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", *map(str, packages)],
            capture_output=True,
            text=True,
            timeout=1800,
            env=env,
        )
        if run.returncode != 0:
            tail = "\n".join((run.stderr or run.stdout).strip().splitlines()[-15:])
            raise PackageInstallError(f"installing the python packages failed:\n{tail}")
