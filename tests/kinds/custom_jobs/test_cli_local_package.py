"""`trainworks custom-jobs create --local-package-path DIR --script task.py`: local code packaged as an sdist,
staged by content hash in the staging bucket, and run as a pythonPackageSpec.

Units for the pure parts (module names, layout, setup text, flag checks), then the CLI as a subprocess against
a real server whose pip works offline (no index, the server's setuptools builds the sdist).
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.support import command_forks
from tests.support.command_forks import cli_env
from tests.support.logs import replica_output
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_job
from trainworks.code_staging.sources import SourceFile, content_digest
from trainworks.kernel.names import FlagError
from trainworks.kinds.custom_jobs.autopackage import (
    AutopackageError,
    build_sdist,
    check_module,
    distribution_name,
    module_from_script,
    package_layout,
    plan_package,
    setup_text,
    staging_prefix,
)
from trainworks.kinds.custom_jobs.pool_specs import (
    LocalPackage,
    build_custom_job,
    check_local_package_flags,
)

PY = sys.executable
#: The server's pip: no index (nothing leaves this host), and builds use the environment's setuptools.
OFFLINE_PIP = {"PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

TASK = """\
import sys

from trainer import helper

print("task args:", " ".join(sys.argv[1:]), "|", helper.greeting())
"""
HELPER = 'def greeting() -> str:\n    return "hello from the helper"\n'


def write_package(root: Path, greeting: str = "hello from the helper") -> Path:
    (root / "trainer").mkdir(parents=True, exist_ok=True)
    (root / "trainer" / "task.py").write_text(TASK)
    (root / "trainer" / "helper.py").write_text(HELPER.replace("hello from the helper", greeting))
    return root


# ====================================================================== pure parts
@pytest.mark.parametrize(
    ("script", "module"),
    [
        ("trainer/task.py", "trainer.task"),
        ("task.py", "task"),
        ("./trainer/models/train.py", "trainer.models.train"),
        ("trainer\\task.py", "trainer.task"),
    ],
)
def test_module_from_script(script: str, module: str) -> None:
    assert module_from_script(script) == module


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("", "empty"),
        ("/abs/task.py", "must be relative"),
        ("../task.py", "must stay inside"),
        ("trainer/task.sh", "not a Python file"),
        ("my-trainer/task.py", r"\[my-trainer\] is not a valid Python identifier"),
        ("class/task.py", r"\[class\] is not a valid Python identifier"),
        ("trainer/__init__.py", "__init__.py"),
    ],
)
def test_bad_script_paths_name_the_flag(script: str, expected: str) -> None:
    with pytest.raises(AutopackageError, match=expected) as info:
        module_from_script(script)
    assert info.value.flag == "--script"


def test_python_module_and_names() -> None:
    assert check_module(" trainer.task ") == "trainer.task"
    for bad in ("", "trainer..task", "trainer/task", "1trainer"):
        with pytest.raises(AutopackageError) as info:
            check_module(bad)
        assert info.value.flag == "--python-module"
    assert distribution_name("My Trainer!") == "my_trainer"
    assert distribution_name("---") == "trainer"
    assert staging_prefix("gs://stage/") == "gs://stage"
    assert staging_prefix("stage/runs/a") == "gs://stage/runs/a"
    for bad in ("", "gs://UPPER", "gs://b/../x"):
        with pytest.raises(AutopackageError) as info:
            staging_prefix(bad)
        assert info.value.flag == "--staging-bucket"


def test_layout_and_generated_setup() -> None:
    files = [
        "task.py",
        "helper.py",
        "setup.py.orig",
        "trainer/models/net.py",
        "trainer/data/vocab.txt",
        "my-scripts/run.py",  # not importable: left out
        "README.md",
    ]
    packages, modules = package_layout(files)
    assert packages == ["trainer", "trainer.models"]
    assert modules == ["helper", "task"]
    text = setup_text("pkg", packages, modules, ["pyyaml>=6", "numpy"])
    call = ast.parse(text).body[-1].value  # type: ignore[attr-defined]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    assert kwargs["name"] == "pkg"
    assert kwargs["packages"] == ["trainer", "trainer.models"]
    assert kwargs["py_modules"] == ["helper", "task"]
    assert kwargs["install_requires"] == ["pyyaml>=6", "numpy"]
    assert kwargs["package_data"] == {"trainer": ["**/*"], "trainer.models": ["**/*"]}


def test_content_digest_covers_paths_modes_and_contents() -> None:
    base = content_digest([SourceFile("a.py", False, b"x")])
    assert base == content_digest([SourceFile("a.py", False, b"x")])
    assert (
        len(
            {
                base,
                content_digest([SourceFile("b.py", False, b"x")]),
                content_digest([SourceFile("a.py", True, b"x")]),
                content_digest([SourceFile("a.py", False, b"y")]),
                content_digest([SourceFile("a.py", False, b"x")], generated="setup"),
                content_digest([SourceFile("a.py", False, b""), SourceFile("x", False, b"")]),
            }
        )
        == 6
    )


def test_plan_hashes_the_code_not_the_caches(tmp_path: Path) -> None:
    root = write_package(tmp_path / "proj")
    first = plan_package(root, "gs://stage", script="trainer/task.py", requirements=["pyyaml"])
    assert first.module == "trainer.task"
    assert re.fullmatch(r"gs://stage/trainworks-packages/proj-[0-9a-f]{12}\.tar\.gz", first.uri)
    # Caches, VCS folders and build outputs change without the code changing.
    (root / "trainer" / "__pycache__").mkdir()
    (root / "trainer" / "__pycache__" / "task.cpython-311.pyc").write_bytes(b"\0")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref")
    (root / "dist").mkdir()
    (root / "dist" / "old.tar.gz").write_bytes(b"old")
    assert (
        plan_package(root, "gs://stage", script="trainer/task.py", requirements=["pyyaml"]).uri == first.uri
    )
    # The requirements are part of the generated setup, so of the hash.
    assert plan_package(root, "gs://stage", script="trainer/task.py").uri != first.uri
    (root / "trainer" / "helper.py").write_text(HELPER + "# changed\n")
    assert (
        plan_package(root, "gs://stage", script="trainer/task.py", requirements=["pyyaml"]).uri != first.uri
    )


def test_plan_errors_name_the_flag(tmp_path: Path) -> None:
    root = write_package(tmp_path / "proj")
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"script": "trainer/nope.py"}, "--script", "does not exist"),
        ({"script": "trainer/task.py", "python_module": "trainer.task"}, "--script", "not both"),
        ({"staging_bucket": None}, "--staging-bucket", "staging bucket is required"),
        ({"local_package_path": tmp_path / "missing"}, "--local-package-path", "is not a directory"),
    ]
    for overrides, flag, message in cases:
        kwargs: dict[str, Any] = {"local_package_path": root, "staging_bucket": "gs://stage"}
        kwargs.update(overrides)
        with pytest.raises(AutopackageError, match=message) as info:
            plan_package(**kwargs)
        assert info.value.flag == flag
    (root / "pyproject.toml").write_text("[project]\nname = 'own'\nversion = '1.0'\n")
    with pytest.raises(AutopackageError, match="declare the requirements there") as info:
        plan_package(root, "gs://stage", script="trainer/task.py", requirements=["numpy"])
    assert info.value.flag == "--requirements"
    empty = tmp_path / "data-only"
    empty.mkdir()
    (empty / "notes.txt").write_text("no code")
    with pytest.raises(AutopackageError, match="no importable Python code"):
        plan_package(empty, "gs://stage", python_module="notes")


def test_own_pyproject_is_built_with_its_backend(tmp_path: Path) -> None:
    root = write_package(tmp_path / "proj")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "own-trainer"\nversion = "2.5"\n\n'
        '[tool.setuptools.packages.find]\ninclude = ["trainer*"]\nnamespaces = true\n'
    )
    plan = plan_package(root, "gs://stage", script="trainer/task.py")
    assert plan.setup is None
    with tarfile.open(fileobj=io.BytesIO(build_sdist(plan))) as archive:
        names = archive.getnames()
    assert "own_trainer-2.5/pyproject.toml" in names
    assert "own_trainer-2.5/trainer/helper.py" in names
    assert not (root / "build").exists() and not list(root.glob("*.egg-info"))  # built in a copy


def test_pools_run_the_package() -> None:
    package = LocalPackage("gs://stage/trainworks-packages/p-0123456789ab.tar.gz", "trainer.task", "img:1")
    body = build_custom_job(
        display_name="auto",
        worker_pool_specs=[
            "machine-type=n1-standard-4",
            "machine-type=n1-standard-4,replica-count=2,executor-image-uri=img:2,python-module=trainer.eval",
            "machine-type=n1-standard-4,container-image-uri=reduction:1",
        ],
        args=["--epochs=3"],
        python_package_uris=["gs://stage/extra.whl"],
        local_package=package,
    )
    pools = body["jobSpec"]["workerPoolSpecs"]
    assert pools[0]["pythonPackageSpec"] == {
        "executorImageUri": "img:1",
        "packageUris": [package.package_uri, "gs://stage/extra.whl"],
        "pythonModule": "trainer.task",
        "args": ["--epochs=3"],
    }
    assert pools[1]["pythonPackageSpec"]["executorImageUri"] == "img:2"
    assert pools[1]["pythonPackageSpec"]["pythonModule"] == "trainer.eval"
    assert pools[2]["containerSpec"] == {"imageUri": "reduction:1", "args": ["--epochs=3"]}


@pytest.mark.parametrize(
    ("pools", "package", "flag", "message"),
    [
        (
            ["machine-type=n1-standard-4"],
            LocalPackage("gs://b/p.tar.gz", "t", None),
            "--executor-image-uri",
            "no default image",
        ),
        (
            ["machine-type=n1-standard-4"],
            LocalPackage("gs://b/p.tar.gz", None, "img"),
            "--script",
            "no module to run",
        ),
        (
            ["machine-type=n1-standard-4,container-image-uri=i"],
            LocalPackage("gs://b/p.tar.gz", "t", "img"),
            "--local-package-path",
            "no worker pool runs the package",
        ),
        (
            ["machine-type=n1-standard-4,executor-image-uri=e,script=task.py"],
            LocalPackage("gs://b/p.tar.gz", "t", "img"),
            "--worker-pool-spec",
            r"key \[script\] is not supported in --worker-pool-spec: use the --script flag",
        ),
    ],
)
def test_package_pool_errors_name_the_flag(
    pools: list[str], package: LocalPackage, flag: str, message: str
) -> None:
    with pytest.raises(FlagError, match=message) as info:
        build_custom_job(display_name="auto", worker_pool_specs=pools, local_package=package)
    assert info.value.flag == flag


def test_packaging_flags_need_a_local_package_path() -> None:
    for kwargs, flag in (
        ({"script": "task.py"}, "--script"),
        ({"python_module": "task"}, "--python-module"),
        ({"requirements": ["numpy"]}, "--requirements"),
        ({"executor_image_uri": "img"}, "--executor-image-uri"),
    ):
        args: dict[str, Any] = {
            "local_package_path": None,
            "script": None,
            "python_module": None,
            "requirements": None,
            "executor_image_uri": None,
            **kwargs,
        }
        with pytest.raises(FlagError, match="only applies with --local-package-path") as info:
            check_local_package_flags(**args)
        assert info.value.flag == flag
    check_local_package_flags(Path("."), "task.py", None, ["numpy"], "img")


# ====================================================================== the CLI
def run_cli(server: ServerProcess | None, *args: str) -> subprocess.CompletedProcess[str]:
    command = ["custom-jobs", "create", "--region", LOCATION]
    if server is not None:
        command += ["--endpoint", server.url, "--project", PROJECT]
    return command_forks.run_cli([*command, *args], env=cli_env(), timeout=180)


def test_cli_bad_script_is_a_flag_error(tmp_path: Path) -> None:
    root = write_package(tmp_path / "proj")
    result = run_cli(
        None,
        "--display-name=bad",
        "--worker-pool-spec=machine-type=n1-standard-4",
        f"--local-package-path={root}",
        "--script=trainer/missing.py",
        "--executor-image-uri=python:3.11",
        "--staging-bucket=gs://stage",
    )
    assert result.returncode == 2, result.stderr
    assert "Invalid value for [--script]: [trainer/missing.py] does not exist" in result.stderr
    result = run_cli(
        None,
        "--display-name=bad",
        "--worker-pool-spec=machine-type=n1-standard-4",
        f"--local-package-path={root}",
        "--script=trainer/task.py",
        "--staging-bucket=gs://stage",
    )
    assert result.returncode == 2, result.stderr
    assert "Invalid value for [--executor-image-uri]" in result.stderr


@pytest.fixture(scope="module")
def offline_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path_factory.mktemp("home"), env=OFFLINE_PIP).start()
    try:
        yield proc
    finally:
        proc.stop()


def object_metadata(server: ServerProcess, uri: str) -> dict[str, Any]:
    bucket, _, name = uri[len("gs://") :].partition("/")
    with server.client() as client:
        response = client.get(f"/storage/v1/b/{bucket}/o/{quote(name, safe='')}")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def submit(server: ServerProcess, root: Path, *extra: str) -> tuple[str, str]:
    """Create the job with the human output; (job name, stderr)."""
    result = run_cli(
        server,
        "--display-name=autopackaged",
        "--worker-pool-spec=machine-type=n1-standard-4",
        f"--local-package-path={root}",
        "--script=trainer/task.py",
        "--executor-image-uri=python:3.11",
        "--staging-bucket=gs://autostage",
        "--requirements=pyyaml",  # satisfied by the executor image (the server's environment)
        "--args=--epochs,3",
        *extra,
    )
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    match = re.search(r"CustomJob \[(projects/[^\]]+)\] is submitted successfully", result.stderr)
    assert match, result.stderr
    return match.group(1), result.stderr


def staged_uri(stderr: str) -> str:
    match = re.search(r"\[(gs://autostage/trainworks-packages/[^\]]+\.tar\.gz)\]", stderr)
    assert match, stderr
    return match.group(1)


def job_stdout(server: ServerProcess, name: str) -> str:
    with server.client() as client:
        done = wait_job(client, name, timeout=300)
    run_dir = server.home / "jobs" / name.rsplit("/", 1)[-1] / "workerpool0-0"
    stderr = replica_output(run_dir, "stderr")
    assert done["state"] == "JOB_STATE_SUCCEEDED", f"{done.get('error')}\n{stderr}"
    assert done["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["pythonModule"] == "trainer.task"
    return replica_output(run_dir)


def test_local_package_runs_and_is_staged_once_per_content(
    offline_server: ServerProcess, tmp_path: Path
) -> None:
    root = write_package(tmp_path / "proj")
    # The bucket is new: asked for (a missing bucket is an error without the flag).
    name, stderr = submit(offline_server, root, "--create-staging-bucket")
    assert "Uploaded the package to" in stderr
    assert "uploading proj-" in stderr  # the progress bar
    uri = staged_uri(stderr)
    first = object_metadata(offline_server, uri)
    assert "task args: --epochs 3 | hello from the helper" in job_stdout(offline_server, name)

    # Same code: nothing is built or uploaded, the job runs the same object.
    name, stderr = submit(offline_server, root)
    assert f"The package is already staged at [{uri}] (same content): not uploaded again." in stderr
    assert "Uploaded" not in stderr
    again = object_metadata(offline_server, uri)
    assert (again["generation"], again["updated"]) == (first["generation"], first["updated"])
    assert "task args: --epochs 3 | hello from the helper" in job_stdout(offline_server, name)

    # One line changed: a new object, and the job runs the new code.
    write_package(root, greeting="hello from the changed helper")
    name, stderr = submit(offline_server, root)
    assert "Uploaded the package to" in stderr
    assert staged_uri(stderr) != uri
    assert "task args: --epochs 3 | hello from the changed helper" in job_stdout(offline_server, name)
