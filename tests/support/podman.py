"""A private podman store for tests, and images built without any registry.

Everything lives under one folder of the test session: storage.conf (graphroot, runroot) is handed to the
server through CONTAINERS_STORAGE_CONF, so the tests never read or write the host's podman storage. Images
are imported from root filesystems made here: busybox-static (2 MB), and, for python package tasks, the
interpreter the tests run under with its standard library and pip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.server import ServerProcess
from trainworks.backends.podman import RUNROOT_LIMIT, Podman

BUSYBOX = Path("/bin/busybox")
BUSYBOX_IMAGE = "localhost/trainworks-test/busybox:1"
PYTHON_IMAGE = "localhost/trainworks-test/python:1"
APPLETS = "sh ls cat echo env id hostname sleep true false mkdir test printf wc tr grep kill ps".split()  # noqa: SIM905
# Standard-library folders an executor image does not need (tests, GUI, the bundled wheels).
STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "site-packages"}


def podman_unavailable_reason() -> str | None:
    if shutil.which("podman") is None:
        return "podman is not installed (run scripts/install-test-deps.sh)"
    if not BUSYBOX.exists():
        return f"{BUSYBOX} is missing (apt-get install busybox-static)"
    return None


@dataclass
class PodmanStore:
    root: Path  # everything but the run state: configuration, storage
    # The run state, in a short folder of its own: podman's clean-up after a container refuses a run root
    # longer than 50 characters (a test folder's path is longer), and a container job then ends 20 s late.
    run_root: Path | None = None

    @property
    def storage_conf(self) -> Path:
        return self.root / "storage.conf"

    @property
    def podman(self) -> Podman:
        """The same containers.conf/registries.conf as a server writes, here for the tests' own commands."""
        return Podman(home=self.root / "client", executable=shutil.which("podman"))

    def env(self) -> dict[str, str]:
        return {**os.environ, **self.podman.env(), "CONTAINERS_STORAGE_CONF": str(self.storage_conf)}

    def setup(self) -> PodmanStore:
        self.root.mkdir(parents=True, exist_ok=True)
        self.run_root = Path(tempfile.mkdtemp(prefix="twpod-", dir="/tmp"))
        assert len(str(self.run_root)) <= RUNROOT_LIMIT
        self.storage_conf.write_text(
            "[storage]\n"
            'driver = "overlay"\n'
            f'graphroot = "{self.root / "storage"}"\n'
            f'runroot = "{self.run_root}"\n'
        )
        self.podman.write_config()
        return self

    def run(self, *args: str, check: bool = True, timeout: float = 120, **kwargs: object) -> str:
        done = subprocess.run(
            ["podman", *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            **kwargs,  # type: ignore[arg-type]
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"podman {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def containers(self, prefix: str = "trainworks-") -> list[str]:
        out = self.run("ps", "--all", "--filter", f"name={prefix}", "--format", "{{.Names}}")
        return [line for line in out.split() if line]

    def import_rootfs(self, rootfs: Path, image: str, cmd: str, path: str) -> None:
        """`tar -C rootfs -cf` then `podman import` (§1.3a of the containers notes)."""
        tarball = rootfs.with_suffix(".tar")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True, timeout=300)
        self.run("import", "--change", f'CMD ["{cmd}"]', "--change", f"ENV PATH={path}", str(tarball), image)
        tarball.unlink()

    def build_busybox(self) -> str:
        root = self.root / "rootfs-busybox"
        for sub in ("bin", "etc", "tmp", "proc", "sys", "dev", "work"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        shutil.copy2(BUSYBOX, root / "bin" / "busybox")
        for applet in APPLETS:
            (root / "bin" / applet).symlink_to("busybox")
        (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
        (root / "etc" / "group").write_text("root:x:0:\n")
        self.import_rootfs(root, BUSYBOX_IMAGE, "/bin/sh", "/bin")
        return BUSYBOX_IMAGE

    def build_python(self) -> str:
        """The running interpreter (same prefix), its stdlib, pip, the shared libraries they load, busybox.

        Debug info and the optimized (.opt-N.pyc) byte code are left out, which keeps the image near 60 MB.
        """
        root = self.root / "rootfs-python"
        prefix = Path(sys.base_prefix)
        stdlib = Path(sysconfig.get_path("stdlib"))
        real = Path(os.path.realpath(sys.executable))
        if not real.is_relative_to(prefix):
            real = prefix / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
        skip = shutil.ignore_patterns("*.opt-1.pyc", "*.opt-2.pyc", "test", "tests", "*.so", "*.so.*")

        def place(src: Path) -> Path:
            target = root / src.relative_to("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            return target

        def put(src: Path) -> None:
            if src.is_dir():
                shutil.copytree(
                    src,
                    place(src),
                    symlinks=True,
                    ignore=skip,
                    copy_function=_link_or_copy,
                    dirs_exist_ok=True,
                )
            elif not place(src).exists():
                _link_or_copy(str(src), str(place(src)))

        def put_stripped(src: Path) -> None:
            target = place(src)
            if subprocess.run(
                ["strip", "--strip-debug", "-o", str(target), str(src)], check=False
            ).returncode:
                _link_or_copy(str(src), str(target))

        elf = [real, *prefix.joinpath("lib").glob("libpython3*.so*"), *stdlib.glob("lib-dynload/*.so")]
        elf = [e for e in elf if "_tkinter" not in e.name and not e.is_symlink()]
        for obj in elf:
            put_stripped(obj)
        for entry in stdlib.iterdir():
            wanted = entry.is_dir() and entry.name not in STDLIB_SKIP and not entry.name.startswith("config-")
            if wanted or entry.suffix == ".py":
                put(entry)
        for pip in (stdlib / "site-packages").glob("pip*"):
            put(pip)
        for lib in _shared_libraries(elf):
            if not lib.is_relative_to(prefix):
                put(lib)
        bin_dir = root / "usr" / "local" / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        for name in ("python3", "python"):
            (bin_dir / name).symlink_to(real)
        (root / "bin").mkdir(exist_ok=True)
        shutil.copy2(BUSYBOX, root / "bin" / "busybox")
        for applet in APPLETS:
            (root / "bin" / applet).symlink_to("busybox")
        for sub in ("tmp", "proc", "sys", "dev", "root", "etc"):
            (root / sub).mkdir(exist_ok=True)
        (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
        self.import_rootfs(root, PYTHON_IMAGE, "/usr/local/bin/python3", "/usr/local/bin:/bin")
        return PYTHON_IMAGE

    def teardown(self) -> None:
        """Remove every container and image of the private store, then the store itself."""
        try:
            self.run("rm", "--all", "--force", "--time", "0", check=False)
            self.run("rmi", "--all", "--force", check=False)
        finally:
            for folder in (self.root, self.run_root):
                if folder is None:
                    continue
                for mount in _mounts_under(folder):
                    subprocess.run(["umount", "--lazy", mount], check=False, capture_output=True)
                shutil.rmtree(folder, ignore_errors=True)


def _link_or_copy(src: str, dst: str) -> str:
    """A hard link to src's file (symlinks followed), or a copy where linking is not possible."""
    try:
        os.link(os.path.realpath(src), dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


def _shared_libraries(objects: list[Path]) -> set[Path]:
    """Everything ldd resolves for these ELF files, plus the dynamic loader."""
    found: set[Path] = set()
    for start in range(0, len(objects), 50):
        run = subprocess.run(
            ["ldd", *map(str, objects[start : start + 50])], capture_output=True, text=True, check=False
        )
        for line in run.stdout.splitlines():
            parts = line.split()
            if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
                found.add(Path(parts[2]))
            elif parts and parts[0].startswith("/") and "ld-linux" in parts[0]:
                found.add(Path(parts[0]))
    return found


def _mounts_under(root: Path) -> list[str]:
    prefix = str(root.resolve()) + "/"
    points = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefix):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def podman_store_or_skip(folder: Path) -> PodmanStore:
    """A set-up store in `folder`; else the test is skipped (TRAINWORKS_SKIP_PODMAN=1) or fails with why."""
    reason = podman_unavailable_reason()
    if reason:
        if os.environ.get("TRAINWORKS_SKIP_PODMAN") == "1":
            pytest.skip(reason)
        pytest.fail(f"{reason}; set TRAINWORKS_SKIP_PODMAN=1 to skip the podman tests")
    return PodmanStore(folder).setup()


@contextmanager
def podman_backed_server(factory: pytest.TempPathFactory, args: list[str]) -> Iterator[ServerProcess]:
    """A server whose replicas run in podman (with a busybox image built), stopped and cleaned up after."""
    store = podman_store_or_skip(factory.mktemp("podman"))
    try:
        store.build_busybox()
        proc = ServerProcess(
            home=factory.mktemp("podman-home"),
            args=["--container-runtime", "podman", *args],
            env={"CONTAINERS_STORAGE_CONF": str(store.storage_conf)},
        ).start()
        try:
            yield proc
        finally:
            proc.stop()
    finally:
        store.teardown()
