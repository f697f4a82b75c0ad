"""`trainworks models`: flag parsing units, then the CLI as subprocesses against a real server (upload,
list, describe, list-versions, delete-version, delete), in human and json output."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.support import command_forks
from tests.support.server import LOCATION, ServerProcess
from trainworks.kernel.names import FlagError
from trainworks.kinds.models.cli import build_upload, model_name

REGION = ("--region", LOCATION)
BUCKET = "cli-models"


def cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRAINWORKS_ENDPOINT": server.url, "COLUMNS": "200"}
    env.pop("TRAINWORKS_REGION", None)
    return command_forks.run_cli(["models", *args], env=env, timeout=120)


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result


# ====================================================================== units
def test_model_names_and_upload_body() -> None:
    assert model_name("42@prod", "p", "us-east1") == "projects/p/locations/us-east1/models/42@prod"
    full = "projects/p/locations/l/models/m@2"
    assert model_name(full, "other", None) == full
    with pytest.raises(FlagError):
        model_name("42", "p", None)  # no region to expand a bare ID
    with pytest.raises(FlagError):
        model_name("projects/p/locations/l/customJobs/1", "p", "l")
    body = build_upload(
        display_name="m",
        artifact_uri="gs://b/m/",
        container_image_uri="img",
        version_aliases="default,prod",
        labels=["team=ml,env=dev"],
        parent_model="projects/p/locations/l/models/7",
    )
    assert body == {
        "model": {
            "displayName": "m",
            "artifactUri": "gs://b/m/",
            "containerSpec": {"imageUri": "img"},
            "versionAliases": ["default", "prod"],
            "labels": {"team": "ml", "env": "dev"},
        },
        "parentModel": "projects/p/locations/l/models/7",
    }
    with pytest.raises(FlagError):
        build_upload(display_name="m")


# ====================================================================== against a server
def test_cli_upload_list_describe_and_delete(server: ServerProcess) -> None:
    source = server.home / "buckets" / BUCKET / "m1"
    source.mkdir(parents=True)
    (source / "model.joblib").write_bytes(b"not really joblib, but named so")
    uri = f"gs://{BUCKET}/m1/"

    first = ok(
        cli(
            server,
            "upload",
            *REGION,
            "--display-name",
            "cli-model",
            "--artifact-uri",
            uri,
            "--model-id",
            "cli-model",
            "--labels",
            "team=ml",
            "--format",
            "json",
        )
    )
    op = json.loads(first.stdout)
    assert op["done"] and op["response"]["modelVersionId"] == "1"
    name = op["response"]["model"]
    assert name.endswith("/models/cli-model")

    second = ok(
        cli(
            server,
            "upload",
            *REGION,
            "--display-name",
            "cli-model-v2",
            "--artifact-uri",
            uri,
            "--parent-model",
            "cli-model",
            "--version-aliases",
            "default,fresh",
        )
    )
    assert "as version [2]" in second.stderr

    # Labels are per version: the default (version 2) has none, so the filter is on the display name.
    listed = ok(cli(server, "list", *REGION, "--filter", 'display_name:"cli-model*" AND NOT labels.team:*'))
    assert "cli-model-v2" in listed.stdout and "default,fresh" in listed.stdout  # the default version
    as_json = json.loads(ok(cli(server, "list", *REGION, "--format", "json")).stdout)
    assert [m["name"] for m in as_json] == [name]

    described = ok(cli(server, "describe", *REGION, "cli-model@1", "--format", "json"))
    assert json.loads(described.stdout)["versionId"] == "1"
    assert "versionId: '2'" in ok(cli(server, "describe", *REGION, "cli-model@fresh")).stdout

    versions = ok(cli(server, "list-versions", *REGION, "cli-model"))
    assert "cli-model@1" in versions.stdout and "cli-model@2" in versions.stdout

    refused = cli(server, "delete-version", *REGION, "cli-model@2")  # the default, while 1 exists
    assert refused.returncode == 1 and "default" in refused.stderr
    ok(cli(server, "delete-version", *REGION, "cli-model@1"))
    remaining = json.loads(ok(cli(server, "list-versions", *REGION, "cli-model", "--format", "json")).stdout)
    assert [v["versionId"] for v in remaining] == ["2"]

    bad = cli(server, "delete", *REGION, "cli-model@2")
    assert bad.returncode == 2 and "delete-version" in bad.stderr
    assert "Deleted model" in ok(cli(server, "delete", *REGION, "cli-model")).stderr
    gone = cli(server, "describe", *REGION, "cli-model")
    assert gone.returncode == 1 and "NOT_FOUND" in gone.stderr


def test_cli_upload_errors_name_the_field(server: ServerProcess) -> None:
    missing = cli(
        server, "upload", *REGION, "--display-name", "x", "--artifact-uri", f"gs://{BUCKET}/absent/"
    )
    assert missing.returncode == 1
    assert "INVALID_ARGUMENT" in missing.stderr and "model.artifact_uri" in missing.stderr
    no_source = cli(server, "upload", *REGION, "--display-name", "x")
    assert no_source.returncode == 2 and "--artifact-uri" in no_source.stderr
