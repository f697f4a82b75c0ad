"""gcloud-style autopackaging for `custom-jobs create --local-package-path DIR --script task.py`.

The folder becomes a Python source distribution (with a generated setup.py when it has no setup.py or
pyproject.toml of its own), staged at `gs://<bucket>/trainworks-packages/<name>-<hash>.tar.gz`, where the hash
covers every shipped file and the generated setup: an object of that name already holds this code, so it is
neither built nor uploaded again. The job then runs it as a pythonPackageSpec.

Pure parts first (module names, the package layout, setup file text, names), then the I/O (reading the
folder, building the sdist in a subprocess of this interpreter, uploading).
"""

from __future__ import annotations

import keyword
import re
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from trainworks.code_staging.sources import SourceFile, content_digest, read_sources
from trainworks.code_staging.store import CodeStore, Progress
from trainworks.storage.gcs import StoragePathError, parse_gcs_uri

#: Where staged packages go in the staging bucket.
PACKAGES_PREFIX = "trainworks-packages"
HASH_LENGTH = 12
#: Version of a generated package (the content hash is in the object's name, not here).
GENERATED_VERSION = "0.1"
#: setup.py-only projects and generated ones build with setuptools' legacy backend, as pip would.
LEGACY_BACKEND = "setuptools.build_meta:__legacy__"
OWN_SETUP_FILES = ("pyproject.toml", "setup.py")

_DISTRIBUTION_NAME = re.compile(r"[^A-Za-z0-9]+")


class AutopackageError(ValueError):
    """A packaging flag's value is wrong; `flag` names the flag, the message says what and why."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(message)
        self.flag = flag
        self.message = message


class PackageBuildError(Exception):
    """Building the source distribution failed; the message holds the build's own output."""


# ====================================================================== pure: names and layout
def _is_identifier(part: str) -> bool:
    return part.isidentifier() and not keyword.iskeyword(part)


def module_from_script(script: str) -> str:
    """`trainer/task.py` -> `trainer.task`: the module `python -m` runs for a script inside the package."""
    flag = "--script"
    text = script.strip().replace("\\", "/")
    if not text:
        raise AutopackageError(flag, "the script path is empty")
    path = PurePosixPath(text)
    if path.is_absolute():
        raise AutopackageError(flag, f"[{script}] must be relative to --local-package-path, not absolute")
    parts = [p for p in path.parts if p != "."]
    if ".." in parts:
        raise AutopackageError(
            flag, f"[{script}] must stay inside --local-package-path ('..' is not allowed)"
        )
    if not parts or not parts[-1].endswith(".py"):
        raise AutopackageError(flag, f"[{script}] is not a Python file (it must end in .py)")
    parts[-1] = parts[-1][: -len(".py")]
    if parts[-1] == "__init__":
        raise AutopackageError(flag, f"[{script}] is a package's __init__.py; name a module to run")
    bad = [p for p in parts if not _is_identifier(p)]
    if bad:
        raise AutopackageError(
            flag,
            f"[{script}] cannot run as a module: [{bad[0]}] is not a valid Python identifier "
            "(folders and the file name must be importable names, e.g. trainer/task.py)",
        )
    return ".".join(parts)


def check_module(module: str) -> str:
    """A --python-module value: dotted Python identifiers."""
    name = module.strip()
    if not name or not all(_is_identifier(p) for p in name.split(".")):
        raise AutopackageError(
            "--python-module", f"[{module}] is not a Python module name (e.g. trainer.task)"
        )
    return name


def distribution_name(folder_name: str) -> str:
    """A distribution (and object) name from the folder's name: `My Trainer!` -> `my_trainer`."""
    name = _DISTRIBUTION_NAME.sub("_", folder_name).strip("_").lower()
    return name or "trainer"


def package_layout(files: Iterable[str]) -> tuple[list[str], list[str]]:
    """(packages, top-level modules) of a folder's relative file paths, as setup() takes them.

    Every folder on the way to a .py file is a package (namespace packages need no __init__.py); .py files at
    the top are modules. Folders whose names cannot be imported, and what is below them, are left out.
    """
    packages: set[str] = set()
    modules: set[str] = set()
    for name in files:
        path = PurePosixPath(name)
        if path.suffix != ".py":
            continue
        folders = path.parts[:-1]
        if not folders:
            if _is_identifier(path.stem) and path.stem != "setup":
                modules.add(path.stem)
            continue
        if not all(_is_identifier(p) for p in folders):
            continue
        for depth in range(1, len(folders) + 1):
            packages.add(".".join(folders[:depth]))
    return sorted(packages), sorted(modules)


def setup_text(name: str, packages: list[str], modules: list[str], requirements: list[str]) -> str:
    """The generated setup.py: the folder's packages and modules, their data files, the requirements."""
    # Files beside the code (configs, vocabularies) ship too, in folders of their own as well.
    data = {package: ["**/*"] for package in packages}
    return (
        "# Generated by trainworks custom-jobs create --local-package-path.\n"
        "from setuptools import setup\n\n"
        "setup(\n"
        f"    name={name!r},\n"
        f"    version={GENERATED_VERSION!r},\n"
        f"    packages={packages!r},\n"
        f"    py_modules={modules!r},\n"
        f"    package_data={data!r},\n"
        f"    install_requires={requirements!r},\n"
        ")\n"
    )


def manifest_text() -> str:
    """MANIFEST.in of a generated package: everything copied into the build folder goes into the sdist."""
    return "graft .\nglobal-exclude *.py[cod]\n"


def staging_prefix(value: str) -> str:
    """`gs://bucket[/folder]` -> `gs://bucket[/folder]` without a trailing slash, checked."""
    flag = "--staging-bucket"
    text = value.strip()
    if not text:
        raise AutopackageError(
            flag, "a staging bucket is required with --local-package-path (or set TRAINWORKS_STAGING_BUCKET)"
        )
    if not text.startswith("gs://"):
        text = "gs://" + text  # a bare bucket name, as the SDK's staging_bucket also accepts
    try:
        path = parse_gcs_uri(text.rstrip("/") + "/")
    except StoragePathError as exc:
        raise AutopackageError(flag, f"[{value}] is not a bucket: {exc}") from None
    return f"gs://{path.bucket}/{path.key}".rstrip("/")


def package_uri(prefix: str, name: str, digest: str) -> str:
    return f"{prefix}/{PACKAGES_PREFIX}/{name}-{digest[:HASH_LENGTH]}.tar.gz"


def build_backend(pyproject: str | None) -> tuple[str, list[str]]:
    """(backend, backend-path) from a pyproject.toml's [build-system]; setuptools' legacy one without it."""
    if pyproject is None:
        return LEGACY_BACKEND, []
    try:
        data = tomllib.loads(pyproject)
    except tomllib.TOMLDecodeError as exc:
        raise AutopackageError(
            "--local-package-path", f"its pyproject.toml is not valid TOML: {exc}"
        ) from None
    system = data.get("build-system") or {}
    backend = system.get("build-backend") or LEGACY_BACKEND
    paths = system.get("backend-path") or []
    if not isinstance(backend, str) or not isinstance(paths, list):
        raise AutopackageError("--local-package-path", "its pyproject.toml has a malformed [build-system]")
    return backend, [str(p) for p in paths]


# ====================================================================== the plan: flags and files
@dataclass(frozen=True)
class PackagePlan:
    """What to build and where it goes; made without building anything."""

    root: Path
    name: str
    module: str | None  # from --script or --python-module; None: every pool names its own
    files: tuple[SourceFile, ...]
    setup: str | None  # the generated setup.py; None when the folder has its own
    digest: str
    uri: str

    @property
    def object_name(self) -> str:
        return self.uri.rsplit("/", 1)[-1]


def plan_package(
    local_package_path: Path,
    staging_bucket: str | None,
    script: str | None = None,
    python_module: str | None = None,
    requirements: list[str] | None = None,
) -> PackagePlan:
    """Check the packaging flags and read the folder: the package's name, module, content hash and URI."""
    if script and python_module:
        raise AutopackageError("--script", "give --script or --python-module, not both")
    module = (
        module_from_script(script) if script else (check_module(python_module) if python_module else None)
    )
    prefix = staging_prefix(staging_bucket or "")
    root = Path(local_package_path).expanduser()
    if not root.is_dir():
        raise AutopackageError("--local-package-path", f"[{local_package_path}] is not a directory")
    root = root.resolve()
    files = read_sources(root)
    if not files:
        raise AutopackageError("--local-package-path", f"[{local_package_path}] has no files to package")
    names = {f.path for f in files}
    if script:
        relative = PurePosixPath(script.strip().replace("\\", "/")).as_posix()
        if relative not in names:
            raise AutopackageError("--script", f"[{script}] does not exist in [{local_package_path}]")
    own_setup = any(name in names for name in OWN_SETUP_FILES)
    requirements = [r.strip() for r in requirements or [] if r.strip()]
    name = distribution_name(root.name)
    setup: str | None = None
    if own_setup:
        if requirements:
            raise AutopackageError(
                "--requirements",
                f"[{local_package_path}] has its own {' / '.join(n for n in OWN_SETUP_FILES if n in names)}: "
                "declare the requirements there",
            )
    else:
        packages, modules = package_layout(names)
        if not packages and not modules:
            raise AutopackageError(
                "--local-package-path", f"[{local_package_path}] holds no importable Python code"
            )
        setup = setup_text(name, packages, modules, requirements)
    digest = content_digest(files, setup or "")
    return PackagePlan(root, name, module, files, setup, digest, package_uri(prefix, name, digest))


# ====================================================================== I/O: build and stage
#: Runs in a fresh interpreter in the project folder: a PEP 517 build_sdist, without build isolation.
_BUILD_SDIST = """
import importlib, sys
backend_name, out_dir, *backend_path = sys.argv[1:]
sys.path[:0] = backend_path
module, _, attribute = backend_name.partition(":")
backend = importlib.import_module(module)
for part in filter(None, attribute.split(".")):
    backend = getattr(backend, part)
print(backend.build_sdist(out_dir))
"""


def build_sdist(plan: PackagePlan) -> bytes:
    """The folder's source distribution, built in a copy of it by a subprocess of this interpreter."""
    with tempfile.TemporaryDirectory(prefix="trainworks-package-") as tmp:
        project = Path(tmp) / plan.name
        for source in plan.files:
            target = project / source.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.content)
            target.chmod(0o755 if source.executable else 0o644)
        pyproject = None
        if plan.setup is not None:
            (project / "setup.py").write_text(plan.setup)
            (project / "MANIFEST.in").write_text(manifest_text())
        elif (project / "pyproject.toml").exists():
            pyproject = (project / "pyproject.toml").read_text()
        backend, backend_path = build_backend(pyproject)
        out = Path(tmp) / "dist"
        out.mkdir()
        argv = [sys.executable, "-c", _BUILD_SDIST, backend, str(out), *backend_path]
        try:
            run = subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PackageBuildError(f"building the package of {plan.root} failed: {exc}") from exc
        built = sorted(out.glob("*.tar.gz"))
        if run.returncode != 0 or len(built) != 1:
            tail = "\n".join((run.stderr or run.stdout).strip().splitlines()[-15:])
            raise PackageBuildError(f"building the package of {plan.root} with {backend} failed:\n{tail}")
        return built[0].read_bytes()


@dataclass(frozen=True)
class StagedPackage:
    uri: str
    size: int  # bytes uploaded; 0 when the object was already there
    uploaded: bool  # False: an object with this content hash was already staged


def stage_package(
    store: CodeStore,
    plan: PackagePlan,
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
    create_bucket: bool = False,
) -> StagedPackage:
    """Build and upload the package unless its object is already staged (then nothing is built).

    A staging bucket that does not exist is an AutopackageError naming --staging-bucket (a typo must not
    make a new bucket), unless `create_bucket` (--create-staging-bucket) asks for it."""
    bucket = parse_gcs_uri(plan.uri).bucket
    if create_bucket:
        store.ensure_bucket(bucket)
    elif not store.fs.exists(bucket):
        raise AutopackageError(
            "--staging-bucket",
            f"the bucket gs://{bucket} does not exist: check its name, or add --create-staging-bucket "
            "to create it",
        )
    if store.exists(plan.uri):
        return StagedPackage(plan.uri, 0, uploaded=False)
    data = build_sdist(plan)
    if on_total is not None:
        on_total(len(data))
    store.put_bytes(plan.uri, data, progress)
    return StagedPackage(plan.uri, len(data), uploaded=True)
