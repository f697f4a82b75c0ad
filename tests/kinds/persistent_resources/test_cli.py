"""`trainworks persistent-resources` and its REST client methods: flag parsing units, then the CLI as
subprocesses against a real server. Every test waits for states (operations, job states), never for time."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import command_forks
from tests.support.command_forks import cli_env
from tests.support.jobs import job, python_pool
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_for, wait_job
from trainworks.kernel.names import FlagError
from trainworks.kinds.persistent_resources.cli import (
    build_update,
    parse_replica_counts,
    parse_resource_pool_spec,
    resource_name,
)

PY = sys.executable
REGION = ("--region", LOCATION)
POOL = "--resource-pool-spec=replica-count=2,machine-type=n1-standard-4"
GATE_WAIT = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.02)"


# ====================================================================== flag parsing
def test_resource_pool_spec_maps_every_key() -> None:
    pool = parse_resource_pool_spec(
        "replica-count=2,machine-type=n1-standard-8,accelerator-type=NVIDIA_TESLA_T4,accelerator-count=2,"
        "disk-type=pd-standard,disk-size=200,min-replica-count=1,max-replica-count=4"
    )
    assert pool == {
        "machineSpec": {
            "machineType": "n1-standard-8",
            "acceleratorType": "NVIDIA_TESLA_T4",
            "acceleratorCount": 2,
        },
        "replicaCount": "2",
        "diskSpec": {"bootDiskType": "pd-standard", "bootDiskSizeGb": 200},
        "autoscalingSpec": {"minReplicaCount": "1", "maxReplicaCount": "4"},
    }
    # replica-count is left to the server (it defaults to the autoscaling minimum, else 1)
    assert parse_resource_pool_spec("machine-type=n1-standard-4") == {
        "machineSpec": {"machineType": "n1-standard-4"}
    }


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("machine-type=n1-standard-4,replicas=2", r"unknown key \[replicas\]"),
        ("replica-count=2", r"key \[machine-type\] required"),
        ("machine-type=n1-standard-4,replica-count=two", r"key \[replica-count\] needs an integer"),
        ("machine-type=n1-standard-4,accelerator-count=1", r"key \[accelerator-type\] required"),
    ],
)
def test_bad_resource_pool_specs(spec: str, expected: str) -> None:
    with pytest.raises(FlagError, match=expected) as info:
        parse_resource_pool_spec(spec)
    assert info.value.flag == "--resource-pool-spec"


def test_update_mask_follows_the_flags() -> None:
    assert build_update("new", None, None) == ({"displayName": "new"}, ["display_name"])
    assert build_update(None, [""], None) == ({"labels": {}}, ["labels"])  # --labels= clears them
    body, mask = build_update(None, ["a=1,b=2"], ["pool-a=3", "pool-b=1,pool-c=2"])
    assert mask == ["labels", "resource_pools.replica_count"]
    assert body == {
        "labels": {"a": "1", "b": "2"},
        "resourcePools": [
            {"id": "pool-a", "replicaCount": "3"},
            {"id": "pool-b", "replicaCount": "1"},
            {"id": "pool-c", "replicaCount": "2"},
        ],
    }
    with pytest.raises(FlagError, match="nothing to update"):
        build_update(None, None, None)
    with pytest.raises(FlagError, match="integer"):
        parse_replica_counts(["pool-a=x"])
    with pytest.raises(FlagError, match="more than once"):
        parse_replica_counts(["pool-a=1", "pool-a=2"])


def test_resource_name_expansion() -> None:
    assert resource_name("abc", "p", "r") == "projects/p/locations/r/persistentResources/abc"
    full = "projects/p/locations/l/persistentResources/abc"
    assert resource_name(full, "other", None) == full
    with pytest.raises(FlagError, match="--region"):
        resource_name("abc", "p", None)
    with pytest.raises(FlagError, match="not a PersistentResource name"):
        resource_name("projects/p/locations/l/customJobs/1", "p", "r")


# ====================================================================== the CLI as a subprocess
def kill_zygotes(home: Path) -> None:
    """Warm interpreters outlive the server by design: stop the ones this module's server started."""
    for record in home.glob("persistent/*/*/*/zygotes/*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            os.killpg(json.loads(record.read_text())["pid"], signal.SIGKILL)


@pytest.fixture(scope="module")
def server(server: ServerProcess) -> Iterator[ServerProcess]:
    """conftest's server, stopped here first so that the warm interpreters it left can be stopped too."""
    yield server
    server.stop()
    kill_zygotes(server.home)


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def run_cli(server: ServerProcess, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return command_forks.run_cli(
        ["persistent-resources", *args], env=cli_env(server.url, PROJECT), timeout=timeout
    )


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    assert "Traceback" not in result.stderr
    return result


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_json(server: ServerProcess, resource_id: str, *args: str) -> dict[str, Any]:
    result = ok(
        run_cli(server, "create", *REGION, "--persistent-resource-id", resource_id, "--format", "json", *args)
    )
    resource: dict[str, Any] = json.loads(result.stdout)
    return resource


def describe_json(server: ServerProcess, resource_id: str) -> dict[str, Any]:
    resource: dict[str, Any] = json.loads(
        ok(run_cli(server, "describe", resource_id, *REGION, "--format", "json")).stdout
    )
    return resource


@pytest.fixture(scope="module")
def shared(server: ServerProcess) -> Iterator[dict[str, Any]]:
    """One resource created with the human output, for list and describe."""
    resource_id = unique("cli-shared")
    result = ok(
        run_cli(
            server,
            "create",
            *REGION,
            "--persistent-resource-id",
            resource_id,
            "--display-name",
            "Shared pool",
            POOL,
            "--labels=team=ml,suite=cli",
        )
    )
    assert "Created PersistentResource [projects/" in result.stderr
    assert f"/persistentResources/{resource_id}]" in result.stderr
    assert "RUNNING" in result.stdout and "2 × n1-standard-4 (0 used)" in result.stdout
    resource = describe_json(server, resource_id)
    yield resource
    run_cli(server, "delete", resource_id, *REGION)


def test_create_waits_until_running(server: ServerProcess, http: httpx.Client) -> None:
    resource_id = unique("cli-create")
    resource = create_json(
        server,
        resource_id,
        "--display-name",
        "two pools",
        POOL,
        "--resource-pool-spec=machine-type=n1-standard-8,accelerator-type=NVIDIA_TESLA_T4,"
        "min-replica-count=1,max-replica-count=3,disk-type=pd-ssd,disk-size=200",
        "--labels",
        "team=ml",
    )
    assert resource["name"].endswith(f"/locations/{LOCATION}/persistentResources/{resource_id}")
    assert "@type" not in resource
    assert resource["state"] == "RUNNING" and resource["startTime"]
    assert resource["displayName"] == "two pools"
    assert resource["labels"] == {"team": "ml"}
    first, second = resource["resourcePools"]
    assert first["machineSpec"] == {"machineType": "n1-standard-4"} and first["replicaCount"] == "2"
    assert second["machineSpec"]["acceleratorType"] == "NVIDIA_TESLA_T4"
    assert second["replicaCount"] == "1"  # the autoscaling minimum
    assert second["autoscalingSpec"] == {"minReplicaCount": "1", "maxReplicaCount": "3"}
    assert second["diskSpec"] == {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 200}
    assert http.get(f"/v1/{resource['name']}").json()["state"] == "RUNNING"
    ok(run_cli(server, "delete", resource_id, *REGION))


def test_create_async_returns_the_operation(server: ServerProcess) -> None:
    resource_id = unique("cli-async")
    result = ok(
        run_cli(
            server,
            "create",
            *REGION,
            "--persistent-resource-id",
            resource_id,
            POOL,
            "--async",
            "--format",
            "json",
        )
    )
    op = json.loads(result.stdout)
    assert f"/persistentResources/{resource_id}/operations/" in op["name"]
    assert op["metadata"]["@type"].endswith("CreatePersistentResourceOperationMetadata")
    wait_for(lambda: describe_json(server, resource_id)["state"] == "RUNNING", timeout=60, what="RUNNING")
    result = ok(run_cli(server, "delete", resource_id, *REGION, "--async"))
    assert "to delete PersistentResource" in result.stderr and "is submitted" in result.stderr
    wait_for(
        lambda: run_cli(server, "describe", resource_id, *REGION).returncode == 1,
        timeout=60,
        what="the resource to be deleted",
    )


def test_describe_json_and_human(server: ServerProcess, shared: dict[str, Any]) -> None:
    resource_id = shared["name"].rsplit("/", 1)[-1]
    assert shared["state"] == "RUNNING"
    assert shared["displayName"] == "Shared pool"
    assert shared["labels"] == {"team": "ml", "suite": "cli"}
    by_name = json.loads(ok(run_cli(server, "describe", shared["name"], "--format", "json")).stdout)
    assert by_name["name"] == shared["name"]
    yaml_out = ok(run_cli(server, "describe", resource_id, *REGION, "--format", "yaml")).stdout
    assert f"name: {shared['name']}" in yaml_out
    human = ok(run_cli(server, "describe", resource_id, *REGION)).stdout
    lines = [line.split() for line in human.splitlines()]
    assert ["Name:", shared["name"]] in lines
    assert ["Display", "name:", "Shared", "pool"] in lines
    assert ["State:", "RUNNING"] in lines
    assert ["Labels:", "suite=cli,", "team=ml"] in lines
    assert "Resource pools:" in human
    assert "n1-standard-4-0: 2 × n1-standard-4 (0 used)" in human


def test_list_json_and_human_with_used_replicas(
    server: ServerProcess, http: httpx.Client, shared: dict[str, Any], tmp_path: Path
) -> None:
    resource_id = shared["name"].rsplit("/", 1)[-1]
    listed = json.loads(ok(run_cli(server, "list", *REGION, "--format", "json")).stdout)
    assert resource_id in [r["name"].rsplit("/", 1)[-1] for r in listed]
    limited = json.loads(ok(run_cli(server, "list", *REGION, "--format", "json", "--limit", "1")).stdout)
    assert len(limited) == 1

    # A job on the resource holds one of its two machines until its gate file exists.
    gate = tmp_path / "gate"
    body = job(python_pool(GATE_WAIT, args=[str(gate)]), name="cli-on-resource")
    body["jobSpec"]["persistentResourceId"] = resource_id
    response = http.post(f"/v1/{server.parent}/customJobs", json=body)
    assert response.status_code == 200, response.text
    name = response.json()["name"]
    try:
        wait_job(http, name, {"JOB_STATE_RUNNING"})
        table = ok(run_cli(server, "list", *REGION)).stdout
        header, *rows = table.splitlines()
        assert header.split() == ["PERSISTENT_RESOURCE_ID", "DISPLAY_NAME", "STATE", "RESOURCE_POOLS"]
        row = next(r for r in rows if r.startswith(resource_id))
        assert "Shared pool" in row and "RUNNING" in row
        assert "2 × n1-standard-4 (1 used)" in row
    finally:
        gate.touch()
    assert wait_job(http, name)["state"] == "JOB_STATE_SUCCEEDED"
    row = next(r for r in ok(run_cli(server, "list", *REGION)).stdout.splitlines() if resource_id in r)
    assert "2 × n1-standard-4 (0 used)" in row


def test_update_replica_count_display_name_and_labels(server: ServerProcess) -> None:
    resource_id = unique("cli-update")
    created = create_json(server, resource_id, POOL, "--labels=team=ml")
    pool_id = created["resourcePools"][0]["id"]
    updated = json.loads(
        ok(
            run_cli(
                server,
                "update",
                resource_id,
                *REGION,
                "--replica-count",
                f"{pool_id}=3",
                "--display-name",
                "bigger",
                "--format",
                "json",
            )
        ).stdout
    )
    assert updated["state"] == "RUNNING"
    assert updated["resourcePools"][0]["replicaCount"] == "3"
    assert updated["displayName"] == "bigger"
    assert updated["labels"] == {"team": "ml"}  # not in the mask: unchanged
    result = ok(run_cli(server, "update", resource_id, *REGION, "--labels="))
    assert "Updated PersistentResource [" in result.stderr
    assert "3 × n1-standard-4 (0 used)" in result.stdout
    described = describe_json(server, resource_id)
    assert "labels" not in described and described["resourcePools"][0]["replicaCount"] == "3"

    # the server's violation names the pool; no flags at all is a usage error
    bad = run_cli(server, "update", resource_id, *REGION, "--replica-count", "no-such-pool=2")
    assert bad.returncode == 1
    assert "resource_pools[0].id" in bad.stderr and "no-such-pool" in bad.stderr
    assert "Traceback" not in bad.stderr
    nothing = run_cli(server, "update", resource_id, *REGION)
    assert nothing.returncode == 2 and "nothing to update" in nothing.stderr
    ok(run_cli(server, "delete", resource_id, *REGION))


def test_reboot_waits_until_running_again(server: ServerProcess) -> None:
    resource_id = unique("cli-reboot")
    create_json(server, resource_id, POOL)
    result = ok(run_cli(server, "reboot", resource_id, *REGION))
    assert "Waiting for operation [" in result.stderr
    assert "Rebooted PersistentResource [" in result.stderr
    states = [line.split() for line in result.stdout.splitlines() if line.startswith("State:")]
    assert states == [["State:", "RUNNING"]]
    assert describe_json(server, resource_id)["state"] == "RUNNING"
    ok(run_cli(server, "delete", resource_id, *REGION))


def test_delete_waits_until_the_resource_is_gone(server: ServerProcess) -> None:
    resource_id = unique("cli-delete")
    created = create_json(server, resource_id, POOL)
    result = ok(run_cli(server, "delete", resource_id, *REGION))
    assert f"Deleted PersistentResource [{created['name']}]." in result.stderr
    gone = run_cli(server, "describe", resource_id, *REGION)
    assert gone.returncode == 1
    assert "NOT_FOUND" in gone.stderr and "Traceback" not in gone.stderr
    listed = json.loads(ok(run_cli(server, "list", *REGION, "--format", "json")).stdout)
    assert created["name"] not in [r["name"] for r in listed]


def test_server_validation_error_exits_one_and_names_the_fields(server: ServerProcess) -> None:
    result = run_cli(
        server,
        "create",
        *REGION,
        "--persistent-resource-id",
        "Bad_ID",
        "--resource-pool-spec=machine-type=n1-standard-4,min-replica-count=0,max-replica-count=2,disk-size=5",
    )
    assert result.returncode == 1
    assert "INVALID_ARGUMENT" in result.stderr
    assert "  - persistent_resource_id: 'Bad_ID' is not a valid ID" in result.stderr
    assert "  - resource_pools[0].autoscaling_spec.min_replica_count:" in result.stderr
    assert "  - resource_pools[0].disk_spec.boot_disk_size_gb:" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_bad_resource_pool_spec_key_exits_two(server: ServerProcess) -> None:
    resource_id = unique("cli-typo")
    result = run_cli(
        server,
        "create",
        *REGION,
        "--persistent-resource-id",
        resource_id,
        "--resource-pool-spec=machine-type=n1-standard-4,replicas=2",
    )
    assert result.returncode == 2
    assert "--resource-pool-spec" in result.stderr
    assert "unknown key [replicas]" in result.stderr
    assert "replica-count" in result.stderr  # the valid keys are listed
    assert "Traceback" not in result.stderr
    missing = run_cli(server, "create", *REGION, "--persistent-resource-id", resource_id)
    assert missing.returncode == 2 and "at least one --resource-pool-spec" in missing.stderr
    assert run_cli(server, "describe", resource_id, *REGION).returncode == 1  # nothing was created


def test_missing_region_and_bad_names(server: ServerProcess) -> None:
    result = run_cli(server, "describe", "abc")
    assert result.returncode == 2 and "--region" in result.stderr
    result = run_cli(server, "list")
    assert result.returncode == 2 and "--region" in result.stderr
    result = run_cli(server, "describe", "projects/p/locations/l/customJobs/1")
    assert result.returncode == 2 and "not a PersistentResource name" in result.stderr
