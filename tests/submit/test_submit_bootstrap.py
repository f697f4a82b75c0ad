"""The in-job bootstrap, run as `python -c BOOTSTRAP_CODE ...` in real subprocesses.

The code zip comes from a /gcs view (TRAINWORKS_GCS_ROOT) or from a real Trainworks server's GCS JSON API
(STORAGE_EMULATOR_HOST). The interpreter runs with -I -S, so nothing but the standard library is importable,
as in a bare training image.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.support.server import ServerProcess, wait_for
from trainworks.submit import _bootstrap_main
from trainworks.submit.bootstrap import BOOTSTRAP_CODE

BUCKET = "code-bucket"
KEY = "runs/demo-0123456789ab.zip"
PACKAGE_URI = f"gs://{BUCKET}/{KEY}"

# The staged package: `demo.report` prints what the job sees; `demo.fail` exits or raises on request.
DEMO_FILES = {
    "demo/__init__.py": "",
    "demo/report.py": (
        "import json, os, sys\n"
        "import demo\n"
        "print(json.dumps({'argv': sys.argv, 'name': __name__, 'package_file': demo.__file__,\n"
        "                  'path0': sys.path[0], 'seed': os.environ.get('SEED')}))\n"
    ),
    "demo/fail.py": (
        "import sys\n"
        "if sys.argv[1] == 'exit':\n"
        "    sys.exit(int(sys.argv[2]))\n"
        "raise RuntimeError('boom from the job')\n"
    ),
    "demo/__main__.py": "print('package main', __name__)\n",
}


def make_zip(path: Path, files: Mapping[str, str] = DEMO_FILES) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def bootstrap(
    args: list[str], tmp_path: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the bootstrap the way a CustomJob's container command does."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    base = {"PATH": os.environ.get("PATH", ""), "TMPDIR": str(tmpdir), "SEED": "7"}
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", BOOTSTRAP_CODE, *args],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def gcs_root(tmp_path: Path) -> Path:
    """A /gcs view holding the package at <root>/<bucket>/<key>."""
    root = tmp_path / "gcs"
    make_zip(root / BUCKET / KEY)
    return root


def run_mounted(
    gcs_root: Path, tmp_path: Path, module: str, *module_args: str
) -> subprocess.CompletedProcess[str]:
    return bootstrap(
        ["--package-uri", PACKAGE_URI, "--module", module, "--", *module_args],
        tmp_path,
        {"TRAINWORKS_GCS_ROOT": str(gcs_root)},
    )


# ----------------------------------------------------------------------------------------- the program
def test_bootstrap_code_is_the_module_source() -> None:
    assert Path(_bootstrap_main.__file__).read_text(encoding="utf-8") == BOOTSTRAP_CODE
    compile(BOOTSTRAP_CODE, "<bootstrap>", "exec")


def test_bootstrap_imports_only_the_standard_library() -> None:
    imported: set[str] = set()
    for node in ast.walk(ast.parse(BOOTSTRAP_CODE)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported - {"__future__"} <= set(sys.stdlib_module_names)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--package-uri", PACKAGE_URI, "--module", "demo.report"], (BUCKET, KEY, "demo.report", [])),
        (
            [f"--package-uri={PACKAGE_URI}", "--module=demo", "--", "--x", "--"],
            (BUCKET, KEY, "demo", ["--x", "--"]),
        ),
        (["--module", "m", "--package-uri", "gs://b/a/b c.zip", "--"], ("b", "a/b c.zip", "m", [])),
    ],
)
def test_parse_args(argv: list[str], expected: tuple[str, str, str, list[str]]) -> None:
    assert _bootstrap_main.parse_args(argv) == expected


# --------------------------------------------------------------------------------- (a) the /gcs view
def test_runs_the_module_from_the_gcs_view_with_its_args(gcs_root: Path, tmp_path: Path) -> None:
    result = run_mounted(gcs_root, tmp_path, "demo.report", "--epochs", "3", "--", "-x")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    seen = json.loads(result.stdout)
    assert seen["argv"][1:] == ["--epochs", "3", "--", "-x"]
    assert seen["name"] == "__main__"
    assert seen["seed"] == "7"
    # Imported from a local copy in the temp folder, never from the /gcs view itself.
    local_zip = seen["path0"]
    assert local_zip.startswith(str(tmp_path / "tmp")) and local_zip.endswith(".zip")
    assert seen["package_file"].startswith(local_zip + os.sep)
    assert not Path(local_zip).exists()  # removed when the bootstrap exits


def test_runs_a_package_through_its_main(gcs_root: Path, tmp_path: Path) -> None:
    result = run_mounted(gcs_root, tmp_path, "demo")
    assert (result.returncode, result.stdout) == (0, "package main __main__\n"), result.stderr


# --------------------------------------------------------------------------------- (c) exits
@pytest.mark.parametrize("code", [0, 3, 42])
def test_the_module_exit_code_propagates(gcs_root: Path, tmp_path: Path, code: int) -> None:
    result = run_mounted(gcs_root, tmp_path, "demo.fail", "exit", str(code))
    assert result.returncode == code
    assert "trainworks-bootstrap" not in result.stderr


def test_the_module_exception_propagates(gcs_root: Path, tmp_path: Path) -> None:
    result = run_mounted(gcs_root, tmp_path, "demo.fail", "raise")
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert result.stderr.rstrip().endswith("RuntimeError: boom from the job")
    assert "trainworks-bootstrap" not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "--package-uri is required"),
        (["--package-uri", PACKAGE_URI], "--module is required"),
        (["--package-uri", PACKAGE_URI, "--module"], "--module needs a value"),
        (
            ["--package-uri", "/local/demo.zip", "--module", "demo"],
            "'/local/demo.zip' is not a gs://BUCKET/OBJECT URI",
        ),
        (["--package-uri", f"gs://{BUCKET}/", "--module", "demo"], "is not a gs://BUCKET/OBJECT URI"),
        (
            ["--package-uri", PACKAGE_URI, "--module", "demo-report"],
            "--module 'demo-report' is not a Python module",
        ),
        (["--package-uri", PACKAGE_URI, "--module", "demo", "--verbose"], "unknown argument '--verbose'"),
    ],
)
def test_bad_arguments_exit_2(gcs_root: Path, tmp_path: Path, args: list[str], message: str) -> None:
    result = bootstrap(args, tmp_path, {"TRAINWORKS_GCS_ROOT": str(gcs_root)})
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainworks-bootstrap: "), result.stderr
    assert message in lines[0]


def test_a_module_missing_from_the_package_exits_1(gcs_root: Path, tmp_path: Path) -> None:
    result = run_mounted(gcs_root, tmp_path, "demo.nothing")
    assert result.returncode == 1
    assert result.stderr == f"trainworks-bootstrap: module demo.nothing is not in {PACKAGE_URI}\n"


def test_an_object_that_is_not_a_zip_exits_1(tmp_path: Path) -> None:
    root = tmp_path / "gcs"
    (root / BUCKET / "runs").mkdir(parents=True)
    (root / BUCKET / KEY).write_text("not a zip")
    result = bootstrap(
        ["--package-uri", PACKAGE_URI, "--module", "demo"], tmp_path, {"TRAINWORKS_GCS_ROOT": str(root)}
    )
    assert result.returncode == 1
    assert result.stderr == f"trainworks-bootstrap: {root / BUCKET / KEY} is not a zip archive\n"


# --------------------------------------------------------------------------------- (b) the GCS JSON API
def put_object(server: ServerProcess, key: str, source: Path) -> None:
    """Place an object in the server's local bucket root, where its ObjectStore keeps it."""
    target = server.home / "buckets" / BUCKET / key
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(source.read_bytes())


def test_downloads_through_the_storage_emulator_host(server: ServerProcess, tmp_path: Path) -> None:
    key = "runs/emulated-0123456789ab.zip"
    put_object(server, key, make_zip(tmp_path / "staged.zip"))
    url = f"{server.url}/download/storage/v1/b/{BUCKET}/o/{quote(key, safe='')}?alt=media"
    wait_for(lambda: httpx.get(url, timeout=5).status_code == 200, timeout=10, what="the object to be served")

    empty_gcs = tmp_path / "no-gcs"
    empty_gcs.mkdir()
    result = bootstrap(
        ["--package-uri", f"gs://{BUCKET}/{key}", "--module", "demo.report", "--", "--lr", "0.1"],
        tmp_path,
        {"TRAINWORKS_GCS_ROOT": str(empty_gcs), "STORAGE_EMULATOR_HOST": server.url},
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["argv"][1:] == ["--lr", "0.1"]
    assert seen["path0"].startswith(str(tmp_path / "tmp"))


def test_a_missing_object_exits_1_without_retrying(server: ServerProcess, tmp_path: Path) -> None:
    empty_gcs = tmp_path / "no-gcs"
    empty_gcs.mkdir()
    uri = f"gs://{BUCKET}/runs/never-staged.zip"
    result = bootstrap(
        ["--package-uri", uri, "--module", "demo.report"],
        tmp_path,
        {"TRAINWORKS_GCS_ROOT": str(empty_gcs), "STORAGE_EMULATOR_HOST": server.url.removeprefix("http://")},
    )
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr  # a 404 is final: no "trying again" lines
    assert lines[0].startswith(f"trainworks-bootstrap: downloading {uri}: not found (HTTP 404)")


def test_without_an_emulator_it_asks_the_metadata_server_for_a_token(
    server: ServerProcess, tmp_path: Path
) -> None:
    # GCE_METADATA_HOST points at a server with no metadata endpoint: the token request gets a final 404, so
    # the bootstrap stops at once with a hint, before any request to storage.googleapis.com.
    empty_gcs = tmp_path / "no-gcs"
    empty_gcs.mkdir()
    result = bootstrap(
        ["--package-uri", PACKAGE_URI, "--module", "demo.report"],
        tmp_path,
        {"TRAINWORKS_GCS_ROOT": str(empty_gcs), "GCE_METADATA_HOST": server.url.removeprefix("http://")},
    )
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("trainworks-bootstrap: metadata server token: not found (HTTP 404)")
    assert lines[0].endswith(
        "(outside Google Cloud, set STORAGE_EMULATOR_HOST or mount the bucket under /gcs)"
    )
