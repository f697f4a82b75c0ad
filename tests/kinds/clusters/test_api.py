"""Training clusters (v1beta1 modelDevelopmentClusters) against a real server process and real Slurm daemons:
LROs pollable under /v1, /v1beta1 and /ui; paging; validation; updates applied to a live slurmctld while a
job runs; node image moves that recreate nodes; delete stopping every daemon."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.jobs import END_TOGETHER
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_for, wait_job
from tests.support.slurm import require_slurm
from trainworks.config import Settings
from trainworks.slurm.daemons import LocalSlurm

# Starts Slurm daemons: one such module at a time across test workers (tests/conftest.py).
pytestmark = pytest.mark.slurm_daemons

BASE = f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/modelDevelopmentClusters"
CPU = "n2-standard-8"


def payload(**slurm_extra: Any) -> dict[str, Any]:
    """A CPU-only cluster in the documents' own (snake_case) shape: 2 static nodes and a login node."""
    slurm: dict[str, Any] = {
        "home_directory_storage": "projects/test-project/locations/us-central1-a/instances/home",
        "partitions": [{"id": "cpu", "node_pool_ids": ["cpu"]}],
        "login_node_pool_id": "login",
    }
    slurm.update(slurm_extra)
    return {
        "display_name": "trainers",
        "network": {
            "network": "projects/test-project/global/networks/default",
            "subnetwork": "projects/test-project/regions/us-central1/subnetworks/default",
        },
        "node_pools": [
            {
                "id": "cpu",
                "machine_spec": {"machine_type": CPU},
                "scaling_spec": {"min_node_count": 2, "max_node_count": 2},
                "zone": "us-central1-a",
                "enable_public_ips": True,
                "boot_disk": {"boot_disk_type": "pd-standard", "boot_disk_size_gb": 120},
            },
            {
                "id": "login",
                "machine_spec": {"machine_type": CPU},
                "scaling_spec": {"min_node_count": 1, "max_node_count": 1},
                "zone": "us-central1-a",
                "enable_public_ips": True,
                "boot_disk": {"boot_disk_type": "pd-standard", "boot_disk_size_gb": 120},
            },
        ],
        "orchestrator_spec": {"slurm_spec": slurm},
    }


def stop_cluster_daemons(home: Path) -> None:
    """Clusters outlive the server by design (like VMs): stop what this test's servers started, by PID."""
    for base in Settings(home=home).clusters_dir.glob("*"):
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


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def wait_operation(client: httpx.Client, op: dict[str, Any], prefix: str = "/v1", timeout: float = 90) -> Any:
    assert op["name"].split("/")[4] == "operations", op  # location-level names, as the documents poll them

    def done() -> dict[str, Any] | None:
        got = client.get(f"{prefix}/{op['name']}")
        assert got.status_code == 200, got.text
        body: dict[str, Any] = got.json()
        return body if body.get("done") else None

    return wait_for(done, timeout=timeout, interval=0.1, what=f"operation {op['name']}")


def create(client: httpx.Client, cluster_id: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    response = client.post(BASE, params={"modelDevelopmentClusterId": cluster_id}, json=body or payload())
    assert response.status_code == 200, response.text
    op = response.json()
    assert op["metadata"]["@type"].endswith("v1beta1.CreateModelDevelopmentClusterOperationMetadata")
    done = wait_operation(client, op)
    assert "error" not in done, done
    assert (
        done["response"]["@type"]
        == "type.googleapis.com/google.cloud.aiplatform.v1beta1.ModelDevelopmentCluster"
    )
    return done["response"]  # type: ignore[no-any-return]


def patch(
    client: httpx.Client, cluster_id: str, body: dict[str, Any], mask: str | None, mode: str | None = None
) -> httpx.Response:
    params = {}
    if mask is not None:
        params["updateMask"] = mask
    if mode is not None:
        params["updateMode"] = mode
    return client.patch(f"{BASE}/{cluster_id}", params=params, json=body)


def update(
    client: httpx.Client, cluster_id: str, body: dict[str, Any], mask: str | None, mode: str | None = None
):
    response = patch(client, cluster_id, body, mask, mode)
    assert response.status_code == 200, response.text
    done = wait_operation(client, response.json(), timeout=120)
    assert "error" not in done, done
    return done["response"]


def cluster_slurm(server: ServerProcess, cluster_id: str) -> LocalSlurm:
    """The Slurm cluster behind a training cluster (found by its ClusterName)."""
    for conf in Settings(home=server.home).clusters_dir.glob("*/etc/slurm.conf"):
        if f"ClusterName={cluster_id}\n" in conf.read_text():
            return LocalSlurm(conf.parent.parent)
    raise AssertionError(f"no Slurm cluster for {cluster_id}")


def squeue_state(slurm: LocalSlurm, job_id: str) -> str:
    out = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-t", "all", "-o", "%T"],
        env=slurm.env(),
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def pids(base: Path) -> list[int]:
    return [int(p.read_text()) for p in base.glob("run/*.pid") if p.read_text().strip()]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# ------------------------------------------------------------------------------ lifecycle
def test_create_get_list_delete(server: ServerProcess, client: httpx.Client) -> None:
    created = create(client, "life1")
    assert created["name"].endswith("/modelDevelopmentClusters/life1")
    assert created["clusterStatus"]["state"] == "RUNNING"
    assert all(p.get("nodeImage", "") == "" for p in created["nodePools"])  # never updated: empty
    nodes = {n["instanceName"]: n for n in created["clusterStatus"]["nodesStatus"]}
    assert set(nodes) == {"life1-cpu-0", "life1-cpu-1", "life1-login-0"}
    assert {n["nodeState"] for n in nodes.values()} == {"RUNNING"}
    assert nodes["life1-login-0"]["nodePoolType"] == "NODE_POOL_TYPE_LOGIN"
    assert nodes["life1-cpu-0"]["nodePoolType"] == "NODE_POOL_TYPE_COMPUTE"

    got = client.get(f"{BASE}/life1").json()
    assert got["displayName"] == "trainers"
    assert got["orchestratorSpec"]["slurmSpec"]["partitions"] == [{"id": "cpu", "nodePoolIds": ["cpu"]}]
    slurm = cluster_slurm(server, "life1")
    info = {n.name: n for n in slurm.nodes()}
    assert set(info) == {"life1-cpu-0", "life1-cpu-1"}
    ran = subprocess.run(
        ["srun", "-N2", "-p", "cpu", "printenv", "SLURMD_NODENAME"],
        env=slurm.env(),
        capture_output=True,
        text=True,
    )
    assert sorted(ran.stdout.split()) == ["life1-cpu-0", "life1-cpu-1"], ran.stderr

    create(client, "life2")
    first = client.get(BASE, params={"pageSize": 1}).json()
    assert [c["name"].rsplit("/", 1)[1] for c in first["modelDevelopmentClusters"]] == ["life1"]
    second = client.get(BASE, params={"pageSize": 1, "pageToken": first["nextPageToken"]}).json()
    assert [c["name"].rsplit("/", 1)[1] for c in second["modelDevelopmentClusters"]] == ["life2"]
    assert "nextPageToken" not in second

    base = slurm.conf_path.parent.parent
    started = pids(base)
    assert started and all(alive(p) for p in started)
    for cluster_id in ("life1", "life2"):
        op = client.delete(f"{BASE}/{cluster_id}").json()
        assert op["metadata"]["@type"].endswith("v1beta1.DeleteOperationMetadata")
        for prefix in ("/v1beta1", "/ui"):  # pollable under every prefix
            assert client.get(f"{prefix}/{op['name']}").status_code == 200
        done = wait_operation(client, op)
        assert done["response"] == {"@type": "type.googleapis.com/google.protobuf.Empty"}
        assert client.get(f"{BASE}/{cluster_id}").status_code == 404
    assert not any(alive(p) for p in started)
    assert not base.exists()


def test_validation_names_fields(client: httpx.Client) -> None:
    def bad(cluster_id: str, body: dict[str, Any]) -> list[str]:
        response = client.post(BASE, params={"model_development_cluster_id": cluster_id}, json=body)
        assert response.status_code == 400, response.text
        details = response.json()["error"]["details"]
        return [v["field"] for d in details for v in d.get("fieldViolations", [])]

    assert any("model_development_cluster_id" in f for f in bad("bad-id", payload()))
    reserved = payload(config={"HealthCheckProgram": "/bin/true"})
    assert "orchestrator_spec.slurm_spec.config.HealthCheckProgram" in bad("c1", reserved)
    body = payload(partitions=[{"id": "cpu", "node_pool_ids": ["cpu"], "config": {"Default": "YES"}}])
    assert "orchestrator_spec.slurm_spec.partitions[0].config.Default" in bad("c1", body)
    body = payload(partitions=[{"id": "cpu", "node_pool_ids": ["nope"]}])
    assert any(
        f.startswith("orchestrator_spec.slurm_spec.partitions[0].node_pool_ids") for f in bad("c1", body)
    )
    body = payload()
    body["node_pools"][1]["scaling_spec"] = {"min_node_count": 1, "max_node_count": 2}
    assert any(f.startswith("node_pools[1].scaling_spec") for f in bad("c1", body))
    body = payload()
    body["node_pools"][0]["machine_spec"] = {
        "machine_type": "a3-highgpu-8g",
        "accelerator_type": "NVIDIA_H100_80GB",
        "accelerator_count": 8,
    }
    assert any(f.startswith("node_pools[0]") for f in bad("c1", body))  # a GPU pool needs a reservation
    assert client.get(f"{BASE}/c1").status_code == 404  # nothing half-created


# ------------------------------------------------------------------------------ updates on a live Slurm
def test_update_applies_to_live_slurm_while_a_job_runs(server: ServerProcess, client: httpx.Client) -> None:
    create(client, "live1")
    slurm = cluster_slurm(server, "live1")
    ctld = int((slurm.conf_path.parent.parent / "run" / "slurmctld.pid").read_text())
    job = subprocess.run(
        ["sbatch", "--parsable", "-p", "cpu", "-o", "/dev/null", "--wrap", "sleep 120"],
        env=slurm.env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    wait_for(lambda: squeue_state(slurm, job) == "RUNNING", timeout=30, what="the long job to run")

    body = payload(
        partitions=[
            {"id": "cpu", "node_pool_ids": ["cpu"]},
            {"id": "big", "node_pool_ids": ["cpu"], "config": {"MaxTime": "30", "PriorityTier": "5"}},
        ],
        config={"PriorityType": "priority/multifactor", "priority_weight_age": "1000"},
    )
    mask = "orchestrator_spec.slurm_spec.partitions,orchestrator_spec.slurm_spec.config"
    updated = update(client, "live1", body, mask, "USER_ONLY")
    assert updated["orchestratorSpec"]["slurmSpec"]["config"] == {
        "PriorityType": "priority/multifactor",
        "priority_weight_age": "1000",
    }
    assert squeue_state(slurm, job) == "RUNNING"  # the running job was not touched
    assert alive(ctld)  # reconfigured in place, not restarted
    config = slurm.show_config()
    assert config["PriorityType"] == "priority/multifactor"
    assert config["PriorityWeightAge"] == "1000"
    partitions = slurm.show_partitions()
    assert partitions["big"]["MaxTime"] == "00:30:00"
    assert partitions["big"]["PriorityTier"] == "5"
    assert partitions["cpu"]["Default"] == "YES"  # no default set: the first partition

    # default_partition_id alone
    body["orchestrator_spec"]["slurm_spec"]["default_partition_id"] = "big"
    update(client, "live1", body, "orchestrator_spec.slurm_spec.default_partition_id")
    assert slurm.show_partitions()["big"]["Default"] == "YES"
    # removing the default partition is rejected and changes nothing
    only_cpu = payload(default_partition_id="big")
    rejected = patch(client, "live1", only_cpu, "orchestrator_spec.slurm_spec.partitions")
    assert rejected.status_code == 400, rejected.text
    assert "big" in slurm.show_partitions()

    # the map is replaced wholesale: a key left out is removed; naming the path with an empty map clears it
    body["orchestrator_spec"]["slurm_spec"]["config"] = {"PriorityType": "priority/multifactor"}
    update(client, "live1", body, "orchestrator_spec.slurm_spec.config")
    assert slurm.show_config()["PriorityWeightAge"] == "0"
    del body["orchestrator_spec"]["slurm_spec"]["config"]
    cleared = update(client, "live1", body, "orchestrator_spec.slurm_spec.config")
    assert "config" not in cleared["orchestratorSpec"]["slurmSpec"]
    assert slurm.show_config()["PriorityType"] == "priority/basic"

    # a value Slurm refuses fails the LRO and leaves the cluster as it was
    body["orchestrator_spec"]["slurm_spec"]["config"] = {"SelectType": "select/nonexistent"}
    response = patch(client, "live1", body, "orchestrator_spec.slurm_spec.config")
    assert response.status_code == 200, response.text
    done = wait_operation(client, response.json())
    assert "Slurm refused" in done["error"]["message"], done
    after = client.get(f"{BASE}/live1").json()
    assert after["clusterStatus"]["state"] == "RUNNING"
    assert after["orchestratorSpec"]["slurmSpec"].get("config") is None
    assert slurm.show_config()["SelectType"] == "select/cons_tres"
    assert squeue_state(slurm, job) == "RUNNING"
    subprocess.run(["scancel", job], env=slurm.env(), check=True)
    client.delete(f"{BASE}/live1")


def test_node_image_moves_recreate_nodes(server: ServerProcess, client: httpx.Client) -> None:
    created = create(client, "img1")
    before = {n["instanceName"]: n for n in created["clusterStatus"]["nodesStatus"]}
    slurm = cluster_slurm(server, "img1")
    login_disk = slurm.conf_path.parent.parent / "nodes" / "img1-login-0" / "disk"
    (login_disk / "notes.txt").write_text("kept on the boot disk")

    # USER_ONLY never moves an image: nothing is recreated, nodeImage stays empty
    body = payload()
    body["labels"] = {"team": "a"}
    after_user_only = update(client, "img1", body, "labels", "USER_ONLY")
    assert after_user_only["labels"] == {"team": "a"}
    assert all(p.get("nodeImage", "") == "" for p in after_user_only["nodePools"])
    ids = {n["instanceName"]: n["instanceId"] for n in after_user_only["clusterStatus"]["nodesStatus"]}
    assert ids == {k: v["instanceId"] for k, v in before.items()}

    # a newer default image for the machine type is published; USER_AND_SERVICE moves every pool to it
    newer = "projects/trainworks-images/global/images/slurm-cpu-v29990101"
    publish_image(server.home, CPU, newer)
    body["labels"] = {"team": "b"}
    moved = update(client, "img1", body, "labels")
    assert {p["id"]: p["nodeImage"] for p in moved["nodePools"]} == {"cpu": newer, "login": newer}
    after = {n["instanceName"]: n for n in moved["clusterStatus"]["nodesStatus"]}
    assert set(after) == set(before)
    for name in after:
        assert after[name]["instanceId"] != before[name]["instanceId"], name  # recreated
        assert newer in after[name]["detail"]
    kinds = [e["eventType"] for e in moved["clusterEvents"]]
    assert kinds.count("VM_SLURM_DRAIN") == 2 and kinds.count("VM_REPORT_AND_REPLACEMENT") == 2
    assert kinds.count("VM_DELETION") == 1  # the login node
    assert not (login_disk / "notes.txt").exists()  # boot disk data gone
    features = subprocess.run(
        ["scontrol", "show", "node", "img1-cpu-0", "-o"], env=slurm.env(), capture_output=True, text=True
    ).stdout
    assert "image_slurm_cpu_v29990101" in features
    assert "IDLE" in features and "DRAIN" not in features  # back in service

    # once resolved, the same update changes nothing more
    again = update(client, "img1", body, "labels")
    assert {n["instanceName"]: n["instanceId"] for n in again["clusterStatus"]["nodesStatus"]} == {
        k: v["instanceId"] for k, v in after.items()
    }
    client.delete(f"{BASE}/img1")


def publish_image(home: Path, machine_type: str, image: str) -> None:
    """An operator publishes a node image release, effective now (the override catalog in the server home)."""
    path = home / "node-images.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    release = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    data.setdefault("images", []).append(
        {"image": image, "machineTypes": [machine_type], "released": release}
    )
    path.write_text(json.dumps(data))
    os.utime(path)
    assert copy.deepcopy(data)


def test_scaling_spec_gives_static_and_dynamic_nodes(server: ServerProcess, client: httpx.Client) -> None:
    create(client, "scale1")
    slurm = cluster_slurm(server, "scale1")
    body = payload()
    body["node_pools"][0]["scaling_spec"] = {"min_node_count": 1, "max_node_count": 3}
    scaled = update(client, "scale1", body, "node_pools", "USER_ONLY")
    assert scaled["nodePools"][0]["scalingSpec"] == {"minNodeCount": "1", "maxNodeCount": "3"}
    states = {n.name: n for n in slurm.nodes()}
    assert set(states) == {"scale1-cpu-0", "scale1-cpu-1", "scale1-cpu-2"}
    assert not states["scale1-cpu-0"].powered_down  # static: its slurmd runs
    # cpu-1 was static and is now dynamic: it keeps running until Slurm powers it down when idle
    assert slurm.slurmd_pid("scale1-cpu-1") is not None
    assert states["scale1-cpu-2"].powered_down and slurm.slurmd_pid("scale1-cpu-2") is None  # dynamic
    running = {n["instanceName"] for n in scaled["clusterStatus"]["nodesStatus"]}
    assert "scale1-cpu-2" not in running and "scale1-cpu-0" in running  # a powered-down node is no VM
    # a job that needs three nodes makes Slurm power the dynamic ones up (ResumeProgram starts their slurmd)
    ran = subprocess.run(
        ["srun", "-N3", "-p", "cpu", "printenv", "SLURMD_NODENAME"],
        env=slurm.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert sorted(ran.stdout.split()) == ["scale1-cpu-0", "scale1-cpu-1", "scale1-cpu-2"], ran.stderr
    assert slurm.slurmd_pid("scale1-cpu-2") is not None

    def shown() -> bool:
        got = client.get(f"{BASE}/scale1").json()
        return {n["instanceName"] for n in got["clusterStatus"]["nodesStatus"]} >= {"scale1-cpu-2"}

    wait_for(shown, timeout=30, interval=0.2, what="the powered-up node in nodesStatus")
    client.delete(f"{BASE}/scale1")


def test_custom_job_labelled_for_a_cluster_runs_on_its_slurm(
    server: ServerProcess, client: httpx.Client
) -> None:
    create(client, "jobs1")
    # The replicas end together: the worker is not stopped before its line.
    show = "import os; print('NODE', os.environ['SLURMD_NODENAME'], os.environ['RANK'], flush=True)"
    show += END_TOGETHER
    body = {
        "displayName": "on-cluster",
        "labels": {"trainworks-cluster": "jobs1", "trainworks-partition": "cpu"},
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": {
                        "imageUri": "python:3.11",
                        "command": [sys.executable, "-c", show],
                    },
                },
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": "python:3.11", "command": [sys.executable, "-c", show]},
                },
            ]
        },
    }
    response = client.post(f"/v1/{server.parent}/customJobs", json=body)
    assert response.status_code == 200, response.text
    name = response.json()["name"]
    done = wait_job(client, name, timeout=90)
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    text = client.get(f"/trainworks/v1/{name}/logs").text
    nodes = sorted(line.split("NODE ")[1].split()[0] for line in text.splitlines() if "NODE " in line)
    assert nodes == ["jobs1-cpu-0", "jobs1-cpu-1"], text

    # a job naming a cluster that does not exist fails clearly
    body["labels"] = {"trainworks-cluster": "nosuch"}
    name = client.post(f"/v1/{server.parent}/customJobs", json=body).json()["name"]
    failed = wait_job(client, name, timeout=60)
    assert failed["state"] == "JOB_STATE_FAILED" and "nosuch" in failed["error"]["message"], failed
    client.delete(f"{BASE}/jobs1")


def test_update_resumes_after_a_server_crash(tmp_path: Path) -> None:
    """kill -9 of the server while an image move waits for a drained node's job: the restarted server goes on
    where it stopped, and no node is recreated twice."""
    require_slurm()
    home = tmp_path / "home"
    first = ServerProcess(home=home).start()
    try:
        with first.client() as client:
            created = create(client, "dur1")
            before = {n["instanceName"]: n["instanceId"] for n in created["clusterStatus"]["nodesStatus"]}
            slurm = cluster_slurm(first, "dur1")
            job = subprocess.run(
                ["sbatch", "--parsable", "-w", "dur1-cpu-0", "-o", "/dev/null", "--wrap", "sleep 300"],
                env=slurm.env(),
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            wait_for(lambda: squeue_state(slurm, job) == "RUNNING", timeout=30, what="the job to run")
            publish_image(home, CPU, "projects/trainworks-images/global/images/slurm-cpu-v29990202")
            body = payload()
            body["labels"] = {"move": "now"}
            response = patch(client, "dur1", body, "labels")
            assert response.status_code == 200, response.text
            op = response.json()

            def cpu1_replaced() -> bool:
                got = client.get(f"{BASE}/dur1").json()
                states = {n["instanceName"]: n["nodeState"] for n in got["clusterStatus"]["nodesStatus"]}
                return states.get("dur1-cpu-1") == "RUNNING" and any(
                    e["eventType"] == "VM_REPORT_AND_REPLACEMENT" and "dur1-cpu-1" in e["eventMessage"]
                    for e in got.get("clusterEvents", [])
                )

            wait_for(cpu1_replaced, timeout=60, interval=0.1, what="the idle node to be replaced")
            got = client.get(f"{BASE}/dur1").json()
            assert got["clusterStatus"]["state"] == "UPDATING"
            states = {n["instanceName"]: n["nodeState"] for n in got["clusterStatus"]["nodesStatus"]}
            assert states["dur1-cpu-0"] == "UPDATING"  # drained, waiting for its job
        first.stop(signal.SIGKILL)
        assert squeue_state(slurm, job) == "RUNNING"  # the cluster outlives the server

        second = ServerProcess(home=home).start()
        try:
            with second.client() as client:
                assert not client.get(f"/v1/{op['name']}").json().get("done")
                subprocess.run(["scancel", job], env=slurm.env(), check=True)
                done = wait_operation(client, op, timeout=120)
                assert "error" not in done, done
                after = done["response"]
                kinds = [e["eventType"] for e in after["clusterEvents"]]
                assert kinds.count("VM_REPORT_AND_REPLACEMENT") == 2  # each compute node once
                ids = {n["instanceName"]: n["instanceId"] for n in after["clusterStatus"]["nodesStatus"]}
                assert all(ids[name] != before[name] for name in before)
                assert after["clusterStatus"]["state"] == "RUNNING"
        finally:
            second.stop()
    finally:
        first.stop()
        stop_cluster_daemons(home)
