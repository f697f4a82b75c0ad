"""`trainworks clusters` (v1beta1 modelDevelopmentClusters): config file and rendering units, then the CLI as
subprocesses against a real server that runs real Slurm clusters. Every test waits for operations, never for
time."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import command_forks
from tests.support.command_forks import cli_env
from tests.support.server import LOCATION, PROJECT, ServerProcess
from tests.support.slurm import require_slurm
from trainworks.kernel.cli import comma_separated
from trainworks.kernel.names import FlagError
from trainworks.kinds.clusters.cli import (
    NEVER_UPDATED_IMAGE,
    cluster_name,
    load_cluster_config,
    nodes_text,
    partitions_text,
    pools_without_image,
    print_cluster_summary,
    print_cluster_table,
)
from trainworks.kinds.clusters.wire import ModelDevelopmentCluster

# Starts Slurm daemons: one such module at a time across test workers (tests/conftest.py).
pytestmark = pytest.mark.slurm_daemons

PY = sys.executable
REGION = ("--region", LOCATION)
PARTITIONS_MASK = "orchestrator_spec.slurm_spec.partitions"

#: A CPU-only cluster as the documents write it (snake_case): 2 static compute nodes and a login node.
CLUSTER_YAML = """\
display_name: trainers
network:
  network: projects/test-project/global/networks/default
  subnetwork: projects/test-project/regions/us-central1/subnetworks/default
node_pools:
  - id: cpu
    machine_spec: {machine_type: n2-standard-8}
    scaling_spec: {min_node_count: 2, max_node_count: 2}
    zone: us-central1-a
    enable_public_ips: true
    boot_disk: {boot_disk_type: pd-standard, boot_disk_size_gb: 120}
  - id: login
    machine_spec: {machine_type: n2-standard-8}
    scaling_spec: {min_node_count: 1, max_node_count: 1}
    zone: us-central1-a
    enable_public_ips: true
    boot_disk: {boot_disk_type: pd-standard, boot_disk_size_gb: 120}
orchestrator_spec:
  slurm_spec:
    home_directory_storage: projects/test-project/locations/us-central1-a/instances/home
    login_node_pool_id: login
    partitions:
      - id: cpu
        node_pool_ids: [cpu]
"""

#: The same cluster with a second partition; its config values are unquoted YAML (a number, a yes/no).
PARTITIONS_YAML = (
    CLUSTER_YAML
    + """\
      - id: big
        node_pool_ids: [cpu]
        config:
          MaxTime: 30
          ExclusiveUser: NO
"""
)


# ====================================================================== config files (no server)
def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_config_keeps_spelling_and_string_map_values_as_written(tmp_path: Path) -> None:
    body, dropped = load_cluster_config(write(tmp_path, "c.yaml", PARTITIONS_YAML))
    assert dropped == []
    plain = yaml.safe_load(CLUSTER_YAML)
    assert body["display_name"] == plain["display_name"] and body["node_pools"] == plain["node_pools"]
    big = body["orchestrator_spec"]["slurm_spec"]["partitions"][1]
    # map<string, string>: YAML would make these 30 and False
    assert big["config"] == {"MaxTime": "30", "ExclusiveUser": "NO"}
    pool = body["node_pools"][0]
    assert pool["scaling_spec"] == {"min_node_count": 2, "max_node_count": 2}  # numbers stay numbers
    assert pool["enable_public_ips"] is True

    labelled = "labels: {team: ml, '1': yes}\nnodePools: [{id: a, labels: {gen: 2}}]\n"
    body, _ = load_cluster_config(write(tmp_path, "l.yaml", labelled))
    assert body == {"labels": {"team": "ml", "1": "yes"}, "nodePools": [{"id": "a", "labels": {"gen": "2"}}]}


def test_config_drops_output_only_fields_of_a_described_cluster(tmp_path: Path) -> None:
    described = {
        "name": "projects/1/locations/l/modelDevelopmentClusters/c",
        "displayName": "x",
        "nodePools": [{"id": "cpu", "effectiveFlexStartMaxDuration": "60s", "nodeImage": ""}],
        "clusterStatus": {"state": "RUNNING"},
        "clusterEvents": [],
        "createTime": "2026-01-01T00:00:00Z",
        "updateTime": "2026-01-01T00:00:00Z",
    }
    body, dropped = load_cluster_config(write(tmp_path, "d.json", json.dumps(described)))
    assert body == {"displayName": "x", "nodePools": [{"id": "cpu", "nodeImage": ""}]}
    assert dropped == [
        "name",
        "clusterStatus",
        "clusterEvents",
        "createTime",
        "updateTime",
        "nodePools[0].effectiveFlexStartMaxDuration",
    ]


def test_bad_config_files(tmp_path: Path) -> None:
    with pytest.raises(FlagError, match="cannot read"):
        load_cluster_config(tmp_path / "missing.yaml")
    with pytest.raises(FlagError, match="not valid YAML"):
        load_cluster_config(write(tmp_path, "bad.yaml", "a: [1,\n"))
    with pytest.raises(FlagError, match="must hold a mapping"):
        load_cluster_config(write(tmp_path, "list.yaml", "- a\n"))


def test_names_masks_and_unpinned_pools() -> None:
    assert cluster_name("c1", "p", "r") == "projects/p/locations/r/modelDevelopmentClusters/c1"
    full = "projects/p/locations/l/modelDevelopmentClusters/c1"
    assert cluster_name(full, "other", None) == full
    with pytest.raises(FlagError, match="--region"):
        cluster_name("c1", "p", None)
    with pytest.raises(FlagError, match="not a ModelDevelopmentCluster name"):
        cluster_name("projects/p/locations/l/persistentResources/c1", "p", "r")
    assert comma_separated(["node_pools, labels", "orchestratorSpec.slurmSpec.config", ""]) == [
        "node_pools",
        "labels",
        "orchestratorSpec.slurmSpec.config",
    ]
    assert comma_separated(None) == []
    body = {"node_pools": [{"id": "a"}, {"id": "b", "node_image": "projects/x/global/images/i"}]}
    assert pools_without_image(body) == ["a"]


# ====================================================================== human output (no server)
SAMPLE: dict[str, Any] = {
    "name": "projects/123/locations/us-central1/modelDevelopmentClusters/c1",
    "displayName": "trainers",
    "nodePools": [
        {
            "id": "gpu",
            "machineSpec": {
                "machineType": "a3-highgpu-8g",
                "acceleratorType": "NVIDIA_H100_80GB",
                "acceleratorCount": 8,
            },
            "scalingSpec": {"maxNodeCount": 4},
            "provisioningModel": "SPOT",
        },
        {
            "id": "cpu",
            "machineSpec": {"machineType": "n2-standard-8"},
            "scalingSpec": {"minNodeCount": 2, "maxNodeCount": 2},
        },
        {
            "id": "login",
            "machineSpec": {"machineType": "n2-standard-8"},
            "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 1},
            "nodeImage": "projects/i/global/images/slurm-v2",
        },
    ],
    "orchestratorSpec": {
        "slurmSpec": {
            "loginNodePoolId": "login",
            "partitions": [
                {"id": "cpu", "nodePoolIds": ["cpu"]},
                {"id": "gpu", "nodePoolIds": ["gpu"], "config": {"MaxTime": "30"}},
            ],
            "config": {"PriorityType": "priority/multifactor"},
        }
    },
    "clusterStatus": {
        "state": "RUNNING",
        "nodesStatus": [
            {
                "nodeState": "RUNNING",
                "nodePoolId": "cpu",
                "nodePoolType": "NODE_POOL_TYPE_COMPUTE",
                "instanceName": "c1-cpu-0",
                "instanceId": "42",
                "createTime": "2026-01-01T00:00:00Z",
            },
            {
                "nodeState": "ERROR",
                "nodePoolId": "cpu",
                "nodePoolType": "NODE_POOL_TYPE_COMPUTE",
                "instanceName": "c1-cpu-1",
                "instanceId": "43",
                "detail": "slurmd [not] responding",
            },
            {
                "nodeState": "RUNNING",
                "nodePoolId": "login",
                "nodePoolType": "NODE_POOL_TYPE_LOGIN",
                "instanceName": "c1-login-0",
                "instanceId": "44",
            },
        ],
    },
    "clusterEvents": [
        {"eventType": "VM_REBOOT", "eventMessage": f"reboot {i}", "eventTime": f"2026-01-01T00:00:{i:02d}Z"}
        for i in range(12)
    ],
    "createTime": "2026-01-01T00:00:00Z",
}


def test_summary_shows_pools_partitions_nodes_and_last_events(capsys: pytest.CaptureFixture[str]) -> None:
    print_cluster_summary(ModelDevelopmentCluster.from_server(SAMPLE), events=3)
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines()]
    assert ["State:", "RUNNING"] in lines
    assert ["Slurm", "config:", "PriorityType=priority/multifactor"] in lines
    gpu = "gpu: a3-highgpu-8g + 8 × NVIDIA_H100_80GB; scaling 0..4 (dynamic)"
    assert f"{gpu}; image {NEVER_UPDATED_IMAGE}; SPOT" in out
    assert f"cpu: n2-standard-8; scaling 2..2 (static); image {NEVER_UPDATED_IMAGE}" in out
    assert (
        "login [login]: n2-standard-8; scaling 1..1 (static); image projects/i/global/images/slurm-v2" in out
    )
    assert "cpu (default): node pools cpu\n" in out  # no defaultPartitionId: the first one
    assert "gpu: node pools gpu; MaxTime=30" in out
    assert "Nodes (3):" in out
    assert ["c1-cpu-1", "cpu", "COMPUTE", "ERROR", "43", "slurmd", "[not]", "responding"] in lines
    assert ["c1-login-0", "login", "LOGIN", "RUNNING", "44"] in lines
    assert "Events (last 3 of 12):" in out
    assert "reboot 11" in out and "reboot 9" in out and "reboot 8" not in out

    print_cluster_table([ModelDevelopmentCluster.from_server(SAMPLE)])
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["CLUSTER_ID", "DISPLAY_NAME", "STATE", "NODES", "PARTITIONS", "CREATE_TIME"]
    assert table[1].split() == ["c1", "trainers", "RUNNING", "2/3", "cpu*,", "gpu", "2026-01-01T00:00:00Z"]


def test_list_counts_static_nodes_not_yet_reported() -> None:
    provisioning = {k: v for k, v in SAMPLE.items() if k != "clusterStatus"}
    # 2 static compute nodes + the login node
    assert nodes_text(ModelDevelopmentCluster.from_server(provisioning)) == "0/3"
    slurm = SAMPLE["orchestratorSpec"]["slurmSpec"]
    other_default = {"orchestratorSpec": {"slurmSpec": {**slurm, "defaultPartitionId": "gpu"}}}
    assert partitions_text(ModelDevelopmentCluster.from_server(other_default)) == "cpu, gpu*"


# ====================================================================== the CLI as a subprocess
def stop_cluster_daemons(home: Path) -> None:
    """Clusters outlive the server by design (like VMs): stop what this module's server started, by PID."""
    from trainworks.slurm.daemons import LocalSlurm

    for base in (home / "clusters").glob("*"):
        LocalSlurm(base).down()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    require_slurm()
    proc = ServerProcess(home=tmp_path_factory.mktemp("home")).start()
    try:
        yield proc
    finally:
        proc.stop()
        stop_cluster_daemons(proc.home)


def run_cli(server: ServerProcess, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return command_forks.run_cli(["clusters", *args], env=cli_env(server.url, PROJECT), timeout=timeout)


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    assert "Traceback" not in result.stderr
    return result


def failed(result: subprocess.CompletedProcess[str], code: int = 1) -> subprocess.CompletedProcess[str]:
    assert result.returncode == code, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    assert "Traceback" not in result.stderr
    return result


def test_create_describe_list_update_delete(server: ServerProcess, tmp_path: Path) -> None:
    config = write(tmp_path, "cluster.yaml", CLUSTER_YAML)
    created = ok(run_cli(server, "create", "cli1", "--config", str(config), *REGION))
    assert "Waiting for operation [" in created.stderr
    assert "Created ModelDevelopmentCluster [projects/" in created.stderr
    assert "/modelDevelopmentClusters/cli1]." in created.stderr
    assert ["State:", "RUNNING"] in [line.split() for line in created.stdout.splitlines()]

    human = ok(run_cli(server, "describe", "cli1", *REGION)).stdout
    lines = [line.split() for line in human.splitlines()]
    assert ["State:", "RUNNING"] in lines and ["Display", "name:", "trainers"] in lines
    assert f"cpu: n2-standard-8; scaling 2..2 (static); image {NEVER_UPDATED_IMAGE}" in human
    assert "login [login]: n2-standard-8; scaling 1..1 (static)" in human
    assert "cpu (default): node pools cpu" in human
    nodes = {row[0]: row for row in lines if row and row[0].startswith("cli1-")}
    assert set(nodes) == {"cli1-cpu-0", "cli1-cpu-1", "cli1-login-0"}
    assert all(row[3] == "RUNNING" for row in nodes.values()), human
    assert nodes["cli1-login-0"][1:3] == ["login", "LOGIN"]
    assert nodes["cli1-cpu-0"][1:3] == ["cpu", "COMPUTE"]

    described = json.loads(ok(run_cli(server, "describe", "cli1", *REGION, "--format", "json")).stdout)
    name = described["name"]
    assert name.endswith(f"/locations/{LOCATION}/modelDevelopmentClusters/cli1")
    assert described["clusterStatus"]["state"] == "RUNNING"
    assert yaml.safe_load(ok(run_cli(server, "describe", name, "--format", "yaml")).stdout)["name"] == name

    table = ok(run_cli(server, "list", *REGION, "--page-size", "1")).stdout.splitlines()
    assert table[0].split() == ["CLUSTER_ID", "DISPLAY_NAME", "STATE", "NODES", "PARTITIONS", "CREATE_TIME"]
    row = next(r.split() for r in table[1:] if r.startswith("cli1 "))
    assert row[:5] == ["cli1", "trainers", "RUNNING", "3/3", "cpu*"]
    listed = json.loads(ok(run_cli(server, "list", *REGION, "--format", "json")).stdout)
    assert [c["name"] for c in listed] == [name]

    # a second partition, by mask; its unquoted YAML config values arrive as the strings Slurm wants
    partitions = write(tmp_path, "partitions.yaml", PARTITIONS_YAML)
    updated = ok(
        run_cli(
            server,
            "update",
            "cli1",
            *REGION,
            "--config",
            str(partitions),
            "--update-mask",
            PARTITIONS_MASK,
            "--update-mode",
            "user_only",
        )
    )
    assert f"Update mask: {PARTITIONS_MASK}\nUpdate mode: USER_ONLY\n" in updated.stderr
    assert "WARNING" not in updated.stderr and "NOTE" not in updated.stderr
    assert f"Updated ModelDevelopmentCluster [{name}]." in updated.stderr
    human = ok(run_cli(server, "describe", "cli1", *REGION)).stdout
    assert "cpu (default): node pools cpu" in human
    assert "big: node pools cpu; MaxTime=30, ExclusiveUser=NO" in human
    spec = json.loads(ok(run_cli(server, "describe", "cli1", *REGION, "--format", "json")).stdout)
    assert spec["orchestratorSpec"]["slurmSpec"]["partitions"][1] == {
        "id": "big",
        "nodePoolIds": ["cpu"],
        "config": {"MaxTime": "30", "ExclusiveUser": "NO"},
    }

    exists = failed(run_cli(server, "create", "cli1", "--config", str(config), *REGION))
    assert "ERROR: ALREADY_EXISTS" in exists.stderr and "cli1 already exists" in exists.stderr

    deleted = ok(run_cli(server, "delete", "cli1", *REGION))
    assert f"Deleted ModelDevelopmentCluster [{name}]." in deleted.stderr
    gone = failed(run_cli(server, "describe", "cli1", *REGION))
    assert "NOT_FOUND" in gone.stderr
    assert "Listed 0 items." in ok(run_cli(server, "list", *REGION)).stdout


def test_errors_name_the_field_and_exit_one(server: ServerProcess, tmp_path: Path) -> None:
    bad = yaml.safe_load(CLUSTER_YAML)
    bad["orchestrator_spec"]["slurm_spec"]["partitions"] = [{"id": "cpu", "node_pool_ids": ["nope"]}]
    config = write(tmp_path, "bad.json", json.dumps(bad))
    result = failed(run_cli(server, "create", "bad1", "--config", str(config), *REGION))
    assert "ERROR: INVALID_ARGUMENT" in result.stderr
    assert "  - orchestrator_spec.slurm_spec.partitions[0].node_pool_ids" in result.stderr
    assert result.stdout == ""
    failed(run_cli(server, "describe", "bad1", *REGION))  # nothing half-created

    # no mask: the warning comes first, then the server's 404
    good = write(tmp_path, "good.yaml", CLUSTER_YAML)
    result = failed(run_cli(server, "update", "none1", "--config", str(good), *REGION))
    assert "Update mask: (none)\nUpdate mode: USER_AND_SERVICE\n" in result.stderr
    assert "WARNING: no --update-mask" in result.stderr and "is cleared" in result.stderr
    assert "NOTE: USER_AND_SERVICE moves node pools without node_image (cpu, login)" in result.stderr
    assert "ERROR: NOT_FOUND" in result.stderr
    failed(run_cli(server, "delete", "none1", *REGION))

    # flag errors: no region, an unreadable file
    assert "--region" in failed(run_cli(server, "list"), 2).stderr
    missing = failed(run_cli(server, "create", "x1", "--config", str(tmp_path / "no.yaml"), *REGION), 2)
    assert "cannot read" in missing.stderr
