"""PersistentResource API (v1) against a real server: the official GAPIC client, strict wire checks,
validation, CustomJobs on a resource, warm starts from pre-started interpreters, and restart safety."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1
from google.longrunning import operations_pb2
from google.protobuf import empty_pb2, json_format

from tests.support.jobs import job, python_pool
from tests.support.logs import replica_output, service_text
from tests.support.server import ServerProcess, wait_for, wait_job
from trainworks.backends.base import LaunchRequest, Phase
from trainworks.backends.local import LocalBackend
from trainworks.backends.warm import WarmPool, WarmStartBackend, WarmTarget, python_invocation
from trainworks.kinds.custom_jobs.launcher import host_env

State = aiplatform_v1.PersistentResource.State
MACHINE = {"machineType": "n1-standard-4"}
GATE_WAIT = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.02)"


# ------------------------------------------------------------------------------ helpers
def strict(payload: dict[str, Any] | str, cls: Any) -> Any:
    """Parse with the official descriptors, rejecting unknown fields and enum names."""
    message = cls.pb()() if hasattr(cls, "pb") else cls()
    text = payload if isinstance(payload, str) else json.dumps(payload)
    json_format.Parse(text, message, ignore_unknown_fields=False)
    return message


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def kill_zygotes(home: Path) -> None:
    """Warm interpreters outlive the server by design: stop the ones this test's servers started."""
    for record in home.glob("persistent/*/*/*/zygotes/*.json"):
        try:
            pid = json.loads(record.read_text())["pid"]
            os.killpg(pid, signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass


def violations(response: httpx.Response) -> list[str]:
    details = response.json()["error"].get("details", [])
    return [v["field"] for d in details for v in d.get("fieldViolations", [])]


def api_violations(error: exceptions.GoogleAPICallError) -> list[str]:
    return [v["field"] for d in error.details for v in d.get("fieldViolations", [])]


def pool_body(replicas: int = 1, **extra: Any) -> dict[str, Any]:
    return {"machineSpec": MACHINE, "replicaCount": str(replicas), **extra}


def create_raw(
    http: httpx.Client, server: ServerProcess, resource_id: str, body: dict[str, Any]
) -> httpx.Response:
    return http.post(
        f"/v1/{server.parent}/persistentResources", params={"persistentResourceId": resource_id}, json=body
    )


def wait_op(http: httpx.Client, op: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        current = http.get(f"/ui/{op['name']}").json()
        return current if current.get("done") else None

    return wait_for(done, timeout=timeout, what=f"operation {op['name']}")  # type: ignore[no-any-return]


def make_resource(
    http: httpx.Client, server: ServerProcess, body: dict[str, Any], prefix: str = "pr"
) -> dict[str, Any]:
    resource_id = unique(prefix)
    response = create_raw(http, server, resource_id, body)
    assert response.status_code == 200, response.text
    done = wait_op(http, response.json())
    assert "error" not in done, done
    return done["response"]  # type: ignore[no-any-return]


def delete_resource(http: httpx.Client, name: str) -> None:
    response = http.delete(f"/v1/{name}")
    if response.status_code == 200:
        wait_op(http, response.json())


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path_factory.mktemp("home")).start()
    try:
        yield proc
    finally:
        proc.stop()
        kill_zygotes(proc.home)


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@pytest.fixture(scope="module")
def resources(server: ServerProcess) -> aiplatform_v1.PersistentResourceServiceClient:
    return aiplatform_v1.PersistentResourceServiceClient(
        transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": server.url}
    )


# ------------------------------------------------------------------------------ official client
def test_official_client_create_get_list_update_reboot_delete(
    resources: aiplatform_v1.PersistentResourceServiceClient, server: ServerProcess
) -> None:
    resource_id = unique("gapic")
    body = aiplatform_v1.PersistentResource(
        display_name="warm pool",
        labels={"team": "ml"},
        resource_pools=[
            aiplatform_v1.ResourcePool(
                machine_spec=aiplatform_v1.MachineSpec(machine_type="n1-standard-4"),
                replica_count=2,
                disk_spec=aiplatform_v1.DiskSpec(boot_disk_type="pd-ssd", boot_disk_size_gb=100),
            )
        ],
    )
    op = resources.create_persistent_resource(
        parent=server.parent, persistent_resource=body, persistent_resource_id=resource_id
    )
    assert isinstance(op.metadata, aiplatform_v1.CreatePersistentResourceOperationMetadata)
    assert f"/persistentResources/{resource_id}/operations/" in op.operation.name
    created = op.result(timeout=60)
    assert created.state == State.RUNNING
    assert created.name.endswith(f"/persistentResources/{resource_id}")
    assert created.display_name == "warm pool"
    pool = created.resource_pools[0]
    assert pool.id and pool.replica_count == 2 and pool.machine_spec.machine_type == "n1-standard-4"
    assert created.start_time and created.create_time <= created.start_time

    got = resources.get_persistent_resource(name=created.name)
    assert got.state == State.RUNNING and got.resource_pools == created.resource_pools

    second = resources.create_persistent_resource(
        parent=server.parent, persistent_resource=body, persistent_resource_id=resource_id + "-b"
    ).result(timeout=60)
    pages = list(resources.list_persistent_resources(request={"parent": server.parent, "page_size": 1}).pages)
    names = [r.name for page in pages for r in page.persistent_resources]
    assert created.name in names and second.name in names
    assert all(len(page.persistent_resources) == 1 for page in pages)
    assert not pages[-1].next_page_token

    # Update the replica count (the mask the SDK uses) and the display name.
    change = aiplatform_v1.PersistentResource(
        name=created.name,
        display_name="renamed",
        resource_pools=[aiplatform_v1.ResourcePool(id=pool.id, replica_count=3)],
    )
    update = resources.update_persistent_resource(
        persistent_resource=change, update_mask={"paths": ["resource_pools.replica_count", "display_name"]}
    )
    assert isinstance(update.metadata, aiplatform_v1.UpdatePersistentResourceOperationMetadata)
    updated = update.result(timeout=60)
    assert updated.state == State.RUNNING
    assert updated.display_name == "renamed" and updated.resource_pools[0].replica_count == 3
    assert updated.resource_pools[0].machine_spec.machine_type == "n1-standard-4"  # untouched

    reboot = resources.reboot_persistent_resource(name=created.name)
    assert isinstance(reboot.metadata, aiplatform_v1.RebootPersistentResourceOperationMetadata)
    assert reboot.result(timeout=60).state == State.RUNNING

    for name in (created.name, second.name):
        deletion = resources.delete_persistent_resource(name=name)
        assert isinstance(deletion.metadata, aiplatform_v1.DeleteOperationMetadata)
        assert isinstance(deletion.result(timeout=60), empty_pb2.Empty)
        with pytest.raises(exceptions.NotFound):
            resources.get_persistent_resource(name=name)


def test_duplicate_id_is_a_conflict(
    resources: aiplatform_v1.PersistentResourceServiceClient, server: ServerProcess
) -> None:
    resource_id = unique("dup")
    body = aiplatform_v1.PersistentResource(
        resource_pools=[
            aiplatform_v1.ResourcePool(
                machine_spec=aiplatform_v1.MachineSpec(machine_type="n1-standard-4"), replica_count=1
            )
        ]
    )
    first = resources.create_persistent_resource(
        parent=server.parent, persistent_resource=body, persistent_resource_id=resource_id
    )
    with pytest.raises(exceptions.Conflict) as info:
        resources.create_persistent_resource(
            parent=server.parent, persistent_resource=body, persistent_resource_id=resource_id
        )
    assert info.value.reason == "ALREADY_EXISTS"
    resources.delete_persistent_resource(name=first.result(timeout=60).name).result(timeout=60)


# ------------------------------------------------------------------------------ strict wire
def test_responses_parse_strictly(http: httpx.Client, server: ServerProcess) -> None:
    resource_id = unique("strict")
    body = {
        "displayName": "strict",
        "labels": {"a": "b"},
        "network": "projects/1/global/networks/default",
        "reservedIpRanges": ["range-a"],
        "encryptionSpec": {"kmsKeyName": "projects/p/locations/l/keyRings/r/cryptoKeys/k"},
        "resourceRuntimeSpec": {"serviceAccountSpec": {"enableCustomServiceAccount": True}},
        "resourcePools": [
            {
                "id": "gpu",
                "machineSpec": {"machineType": "n1-standard-4", "acceleratorType": 5, "acceleratorCount": 1},
                "replicaCount": "1",
                "autoscalingSpec": {"minReplicaCount": "1", "maxReplicaCount": "4"},
                "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 200},
            },
            {"machine_spec": {"machine_type": "n1-standard-8"}},  # snake_case and defaults
        ],
        "state": "ERROR",  # output only: ignored
        "createTime": "2000-01-01T00:00:00Z",
    }
    response = create_raw(http, server, resource_id, body)
    assert response.status_code == 200, response.text
    op = response.json()
    strict(op, operations_pb2.Operation)
    assert op["metadata"]["@type"].endswith("v1.CreatePersistentResourceOperationMetadata")
    assert "done" not in op or op["done"] is False or "response" in op

    done = wait_op(http, op)
    parsed = strict(done, operations_pb2.Operation)
    assert done["response"]["@type"] == "type.googleapis.com/google.cloud.aiplatform.v1.PersistentResource"
    assert parsed.done and parsed.response.type_url.endswith("PersistentResource")

    got = http.get(f"/v1/{done['response']['name']}").json()
    strict(got, aiplatform_v1.PersistentResource)
    assert got["state"] == "RUNNING"
    assert got["createTime"] != "2000-01-01T00:00:00Z"
    gpu, cpu = got["resourcePools"]
    assert gpu["machineSpec"]["acceleratorType"] == "NVIDIA_TESLA_T4"
    assert gpu["autoscalingSpec"] == {"minReplicaCount": "1", "maxReplicaCount": "4"}
    assert gpu["replicaCount"] == "1" and "usedReplicaCount" not in gpu
    assert cpu["id"] and cpu["replicaCount"] == "1"  # generated id, default count
    # Canonical: what the official descriptors print back is exactly what was sent.
    assert json_format.MessageToDict(strict(got, aiplatform_v1.PersistentResource)) == got

    listed = http.get(f"/v1/{server.parent}/persistentResources").json()
    strict(listed, aiplatform_v1.ListPersistentResourcesResponse)
    assert any(r["name"] == got["name"] for r in listed["persistentResources"])
    # The $alt query the official client adds is accepted.
    assert http.get(f"/v1/{got['name']}", params={"$alt": "json;enum-encoding=int"}).status_code == 200

    deletion = http.delete(f"/v1/{got['name']}").json()
    strict(deletion, operations_pb2.Operation)
    finished = wait_op(http, deletion)
    strict(finished, operations_pb2.Operation)
    assert finished["response"] == {"@type": "type.googleapis.com/google.protobuf.Empty"}
    assert http.get(f"/v1/{got['name']}").status_code == 404


# ------------------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("resource_id", "body", "fields"),
    [
        ("Bad_ID", {"resourcePools": [pool_body()]}, ["persistent_resource_id"]),
        ("", {"resourcePools": [pool_body()]}, ["persistent_resource_id"]),
        ("x" * 64, {"resourcePools": [pool_body()]}, ["persistent_resource_id"]),
        ("ok-id", {}, ["resource_pools"]),
        ("ok-id", {"resourcePools": [{"replicaCount": "1"}]}, ["resource_pools[0].machine_spec"]),
        (
            "ok-id",
            {"resourcePools": [{"machineSpec": {"machineType": "n9-huge"}}]},
            ["resource_pools[0].machine_spec.machine_type"],
        ),
        (
            "ok-id",
            {
                "resourcePools": [
                    {
                        "machineSpec": {
                            "machineType": "n1-standard-4",
                            "acceleratorType": "NVIDIA_H100_80GB",
                            "acceleratorCount": 1,
                        }
                    }
                ]
            },
            ["resource_pools[0].machine_spec.accelerator_type"],
        ),
        ("ok-id", {"resourcePools": [pool_body(0)]}, ["resource_pools[0].replica_count"]),
        (
            "ok-id",
            {
                "resourcePools": [
                    pool_body(2, autoscalingSpec={"minReplicaCount": "3", "maxReplicaCount": "2"})
                ]
            },
            [  # min must be below max, and must not exceed replicaCount
                "resource_pools[0].autoscaling_spec.min_replica_count",
                "resource_pools[0].autoscaling_spec.min_replica_count",
            ],
        ),
        (
            "ok-id",
            {"resourcePools": [pool_body(id="a"), pool_body(id="a")]},
            ["resource_pools[1].id"],
        ),
        ("ok-id", {"resourcePools": [pool_body()], "colour": "red"}, ["colour"]),
        (
            "ok-id",
            {"resourcePools": [pool_body()], "labels": {"trainworks-preload": "torch-Numpy"}},
            ["labels", 'labels["trainworks-preload"]'],
        ),
        (
            "ok-id",
            {"resourcePools": [pool_body()], "resourceRuntimeSpec": {"raySpec": {}}},
            ["resource_runtime_spec.ray_spec"],
        ),
    ],
)
def test_create_validation(
    http: httpx.Client, server: ServerProcess, resource_id: str, body: dict[str, Any], fields: list[str]
) -> None:
    response = create_raw(http, server, resource_id, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    got = violations(response)
    if fields[0] == "labels":  # label *values* may not contain upper case either: both rules report
        assert fields[1] in got
    else:
        assert got == fields, got


def test_update_mask_rules(http: httpx.Client, server: ServerProcess) -> None:
    created = make_resource(http, server, {"resourcePools": [pool_body(2, id="main")]})
    name = created["name"]

    def patch(mask: str | None, body: dict[str, Any]) -> httpx.Response:
        params = {"updateMask": mask} if mask is not None else {}
        return http.patch(f"/v1/{name}", params=params, json=body)

    assert violations(patch(None, {"displayName": "x"})) == ["update_mask"]
    unknown = patch("colour", {"displayName": "x"})
    assert unknown.status_code == 400 and "colour" in unknown.json()["error"]["message"]
    immutable = patch("network", {"network": "n"})
    assert immutable.status_code == 400 and "immutable" in immutable.json()["error"]["message"]
    assert patch("resourcePools.machineSpec", {}).status_code == 400
    # Changing the machine of a pool through the whole-pool mask names the field as immutable.
    changed = patch(
        "resource_pools",
        {
            "resourcePools": [
                {"id": "main", "machineSpec": {"machineType": "n1-standard-8"}, "replicaCount": "2"}
            ]
        },
    )
    assert changed.status_code == 400
    assert violations(changed) == ["resource_pools[0].machine_spec"]
    assert "immutable" in changed.json()["error"]["message"]
    assert violations(
        patch("resource_pools.replica_count", {"resourcePools": [{"id": "main", "replicaCount": "0"}]})
    ) == ["resource_pools[0].replica_count"]
    assert violations(patch("resource_pools", {"resourcePools": [{"id": "nope", "replicaCount": "1"}]})) == [
        "resource_pools[0].id"
    ]

    # camelCase paths work, and a valid change goes through UPDATING to RUNNING.
    ok = patch(
        "displayName,resourcePools.autoscalingSpec",
        {
            "displayName": "scaled",
            "resourcePools": [
                {"id": "main", "autoscalingSpec": {"minReplicaCount": "1", "maxReplicaCount": "5"}}
            ],
        },
    )
    assert ok.status_code == 200, ok.text
    done = wait_op(http, ok.json())
    assert done["metadata"]["@type"].endswith("UpdatePersistentResourceOperationMetadata")
    resource = done["response"]
    assert resource["displayName"] == "scaled" and resource["state"] == "RUNNING"
    assert resource["resourcePools"][0]["autoscalingSpec"] == {"minReplicaCount": "1", "maxReplicaCount": "5"}
    assert resource["resourcePools"][0]["replicaCount"] == "2"
    delete_resource(http, name)


# ------------------------------------------------------------------------------ jobs on a resource
def test_job_on_resource_runs_and_uses_replicas(
    http: httpx.Client, server: ServerProcess, tmp_path: Path
) -> None:
    resource = make_resource(http, server, {"resourcePools": [pool_body(2, id="cpu")]})
    resource_id = resource["name"].rsplit("/", 1)[-1]
    gate = tmp_path / "gate"
    body = job(
        python_pool(GATE_WAIT + "\nprint('primary done')"),
        python_pool(GATE_WAIT),
        persistentResourceId=resource_id,
    )
    for pool in body["jobSpec"]["workerPoolSpecs"]:
        pool["containerSpec"]["args"] = [str(gate)]
    response = http.post(f"/v1/{server.parent}/customJobs", json=body)
    assert response.status_code == 200, response.text
    created = response.json()
    assert created["jobSpec"]["persistentResourceId"] == resource_id
    wait_job(http, created["name"], {"JOB_STATE_RUNNING"})

    def used() -> str | None:
        pools = http.get(f"/v1/{resource['name']}").json()["resourcePools"]
        return pools[0].get("usedReplicaCount")

    assert used() == "2"
    # No replica is left: a second job is rejected at create, naming the field and the numbers.
    more = http.post(
        f"/v1/{server.parent}/customJobs", json=job(python_pool("pass"), persistentResourceId=resource_id)
    )
    assert more.status_code == 400
    assert violations(more) == ["job_spec.worker_pool_specs[0].replica_count"]
    assert "0 free" in more.json()["error"]["message"]

    gate.write_text("go")
    done = wait_job(http, created["name"])
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    wait_for(lambda: used() is None, what="usedReplicaCount to go back to 0")
    # Both replicas started from the resource's warm interpreter.
    job_dir = server.home / "jobs" / created["name"].rsplit("/", 1)[-1]
    for task in ("workerpool0-0", "workerpool1-0"):
        launch = json.loads((job_dir / task / "launch.json").read_text())
        assert launch["warm"]["persistentResource"] == resource_id
    assert "primary done" in replica_output(job_dir / "workerpool0-0")
    delete_resource(http, resource["name"])


def test_job_specs_must_match_a_pool_and_fit(http: httpx.Client, server: ServerProcess) -> None:
    resource = make_resource(
        http,
        server,
        {
            "resourcePools": [
                pool_body(1, id="small", diskSpec={"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100})
            ]
        },
    )
    resource_id = resource["name"].rsplit("/", 1)[-1]

    def submit(*pools: dict[str, Any], rid: str = resource_id) -> httpx.Response:
        return http.post(f"/v1/{server.parent}/customJobs", json=job(*pools, persistentResourceId=rid))

    other = python_pool("pass")
    other["machineSpec"] = {"machineType": "n1-standard-8"}
    mismatch = submit(other)
    assert mismatch.status_code == 400
    assert violations(mismatch) == ["job_spec.worker_pool_specs[0].machine_spec"]
    assert "must exactly match" in mismatch.json()["error"]["message"]

    disk = python_pool("pass")
    disk["diskSpec"] = {"bootDiskType": "pd-standard", "bootDiskSizeGb": 100}
    assert violations(submit(disk)) == ["job_spec.worker_pool_specs[0].disk_spec"]

    too_many = submit(python_pool("pass"), python_pool("pass", replicas=1))
    assert violations(too_many) == ["job_spec.worker_pool_specs[1].replica_count"]
    assert "1 free" in too_many.json()["error"]["message"]

    missing = submit(python_pool("pass"), rid="no-such-resource")
    assert violations(missing) == ["job_spec.persistent_resource_id"]
    assert "does not exist" in missing.json()["error"]["message"]

    # A default disk spec equals an explicit pd-ssd of 100 GB: this one fits and runs.
    fine = submit(python_pool("import sys; sys.exit(0)"))
    assert fine.status_code == 200, fine.text
    assert wait_job(http, fine.json()["name"])["state"] == "JOB_STATE_SUCCEEDED"
    delete_resource(http, resource["name"])


def test_warm_start_preloads_modules_and_keeps_the_contract(
    http: httpx.Client, server: ServerProcess
) -> None:
    resource = make_resource(
        http,
        server,
        {"resourcePools": [pool_body(1)], "labels": {"trainworks-preload": "json-decimal"}},
    )
    resource_id = resource["name"].rsplit("/", 1)[-1]
    code = (
        "import json, os, sys\n"
        "print(json.dumps({'preloaded': 'decimal' in sys.modules, 'argv': sys.argv, 'name': __name__,\n"
        "    'cluster': json.loads(os.environ['CLUSTER_SPEC'])['task'],\n"
        "    'greeting': os.environ.get('GREETING'), 'cwd': os.getcwd(), 'path0': sys.path[0]}))\n"
        "sys.exit(int(sys.argv[1]))"
    )
    outputs = {}
    for where in ("warm", "cold"):
        pool = python_pool(code, env={"GREETING": "hi"}, args=["3"])
        spec = {"persistentResourceId": resource_id} if where == "warm" else {}
        created = http.post(f"/v1/{server.parent}/customJobs", json=job(pool, **spec)).json()
        done = wait_job(http, created["name"])
        # Same exit semantics: the exit status reaches the job's error either way.
        assert done["state"] == "JOB_STATE_FAILED"
        assert "non-zero status of 3" in done["error"]["message"]
        run_dir = server.home / "jobs" / created["name"].rsplit("/", 1)[-1] / "workerpool0-0"
        outputs[where] = json.loads(replica_output(run_dir))
        outputs[where]["cwd"] = outputs[where]["cwd"] == str(run_dir)
        assert ("warm" in json.loads((run_dir / "launch.json").read_text())) == (where == "warm")
    warm, cold = outputs.pop("warm"), outputs.pop("cold")
    assert warm.pop("preloaded") is True and cold.pop("preloaded") is False
    assert warm == cold  # argv, __name__, CLUSTER_SPEC task, env, cwd, sys.path[0]
    delete_resource(http, resource["name"])


def test_queued_job_waits_for_free_replicas(
    http: httpx.Client, server: ServerProcess, tmp_path: Path
) -> None:
    # Jobs are accepted while the resource is PROVISIONING (here: importing torch into its warm interpreter)
    # and wait; once it is RUNNING the first takes the only replica and the second waits for it.
    resource_id = unique("queue")
    body = {"resourcePools": [pool_body(1, id="one")], "labels": {"trainworks-preload": "torch"}}
    op = create_raw(http, server, resource_id, body).json()
    gate = tmp_path / "gate"
    submitted = []
    for pool in (python_pool(GATE_WAIT, args=[str(gate)]), python_pool("pass")):
        response = http.post(
            f"/v1/{server.parent}/customJobs", json=job(pool, persistentResourceId=resource_id)
        )
        assert response.status_code == 200, response.text
        submitted.append(response.json()["name"])
    first, second = submitted
    assert http.get(f"/v1/{op['name'].split('/operations/')[0]}").json()["state"] == "PROVISIONING"
    wait_op(http, op)
    wait_job(http, first, {"JOB_STATE_RUNNING"})
    second_dir = server.home / "jobs" / second.rsplit("/", 1)[-1]
    wait_for(lambda: "free of 1" in service_text(second_dir), what="the waiting reason")
    assert "to be RUNNING (it is PROVISIONING)" in service_text(second_dir)
    assert http.get(f"/v1/{second}").json()["state"] == "JOB_STATE_QUEUED"
    status = http.get(f"/trainworks/v1/{second}/status").json()
    assert "free of 1" in json.dumps(status)
    gate.write_text("go")
    assert wait_job(http, first)["state"] == "JOB_STATE_SUCCEEDED"
    assert wait_job(http, second)["state"] == "JOB_STATE_SUCCEEDED"
    delete_resource(http, op["name"].split("/operations/")[0])


def test_python_package_job_is_warm_from_the_second_run(http: httpx.Client, server: ServerProcess) -> None:
    """The first job with a package environment on the resource starts cold and makes the resource keep a warm
    interpreter of that environment; the next one starts from it."""
    from tests.kinds.custom_jobs.test_python_package import _job, build_wheel

    build_wheel(server.home / "buckets" / "prpkgs" / "dist")
    resource = make_resource(http, server, {"resourcePools": [pool_body(1)]})
    resource_id = resource["name"].rsplit("/", 1)[-1]
    folder = next(server.home.glob(f"persistent/*/*/{resource_id}"))
    body = _job("gs://prpkgs/dist/trainer_pkg-0.1-py3-none-any.whl")
    body["jobSpec"]["persistentResourceId"] = resource_id
    warm = []
    for run in range(2):
        created = http.post(f"/v1/{server.parent}/customJobs", json=body).json()
        done = wait_job(http, created["name"], timeout=300)
        run_dir = server.home / "jobs" / created["name"].rsplit("/", 1)[-1] / "workerpool0-0"
        assert done["state"] == "JOB_STATE_SUCCEEDED", replica_output(run_dir, "stderr")
        job_id = created["name"].rsplit("/", 1)[-1]
        stdout = replica_output(run_dir)
        assert f'"argv": ["--lr", "0.1"], "job": "{job_id}", "greeting": "hi {job_id}"' in stdout
        warm.append("warm" in json.loads((run_dir / "launch.json").read_text()))
        if run == 0:

            def both_ready() -> bool:
                records = [json.loads(p.read_text()) for p in (folder / "zygotes").glob("*.json")]
                return len(records) == 2 and all(r.get("ready") for r in records)

            wait_for(both_ready, timeout=60, what="a warm interpreter of the package environment")
    assert warm == [False, True]
    delete_resource(http, resource["name"])


def test_resources_are_billed_while_they_run(http: httpx.Client, server: ServerProcess) -> None:
    resource = make_resource(http, server, {"displayName": "billed", "resourcePools": [pool_body(3, id="p")]})
    costs_url = f"/trainworks/v1/{server.parent}/costs"

    def row() -> dict[str, Any]:
        rows = http.get(costs_url, params={"by": "resource"}).json()["rows"]
        return next(r for r in rows if r["name"] == resource["name"])

    running = row()
    assert running["kind"] == "persistentResource" and running["state"] == "RUNNING" and running["running"]
    assert running["groups"][0]["intervals"] == 3 and running["groups"][0]["resourcePool"] == "p"
    delete_resource(http, resource["name"])
    deleted = row()
    assert deleted["state"] == "DELETED" and not deleted["running"]
    assert deleted["machineHours"] >= running["machineHours"]


def test_deleting_a_resource_fails_its_jobs(http: httpx.Client, server: ServerProcess) -> None:
    resource = make_resource(http, server, {"resourcePools": [pool_body(1)]})
    resource_id = resource["name"].rsplit("/", 1)[-1]
    created = http.post(
        f"/v1/{server.parent}/customJobs",
        json=job(python_pool("import time; time.sleep(600)"), persistentResourceId=resource_id),
    ).json()
    wait_job(http, created["name"], {"JOB_STATE_RUNNING"})
    deletion = http.delete(f"/v1/{resource['name']}")
    assert deletion.status_code == 200
    assert http.get(f"/v1/{resource['name']}").json()["state"] in ("STOPPING", "RUNNING")
    # Deleting again answers with the same operation.
    assert http.delete(f"/v1/{resource['name']}").json()["name"] == deletion.json()["name"]
    wait_op(http, deletion.json())
    done = wait_job(http, created["name"])
    assert done["state"] == "JOB_STATE_FAILED"
    assert "was deleted" in done["error"]["message"]
    assert http.get(f"/v1/{resource['name']}").status_code == 404


def test_reboot_recreates_warm_state(http: httpx.Client, server: ServerProcess) -> None:
    resource = make_resource(http, server, {"resourcePools": [pool_body(1)]})
    folder = (
        server.home
        / "persistent"
        / resource["name"].split("/")[1]
        / "us-central1"
        / resource["name"].rsplit("/", 1)[-1]
    )

    def zygote() -> dict[str, Any]:
        records = [json.loads(p.read_text()) for p in (folder / "zygotes").glob("*.json")]
        assert len(records) == 1
        return records[0]

    before = zygote()
    assert before["ready"] and before["generation"] == 0
    op = http.post(f"/v1/{resource['name']}:reboot", json={}).json()
    done = wait_op(http, op)
    assert done["response"]["state"] == "RUNNING"
    after = zygote()
    assert after["generation"] == 1 and after["pid"] != before["pid"]
    wait_for(
        lambda: not Path(f"/proc/{before['pid']}").exists() or _zombie(before["pid"]),
        what="old zygote to exit",
    )
    delete_resource(http, resource["name"])
    assert not folder.exists()


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] in "ZX"


# ------------------------------------------------------------------------------ restart safety
def test_server_restart_keeps_a_running_resource(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = ServerProcess(home=home).start()
    try:
        with proc.client() as http:
            resource = make_resource(http, proc, {"resourcePools": [pool_body(1)]})
        records = list(home.glob("persistent/*/*/*/zygotes/*.json"))
        zygote_pid = json.loads(records[0].read_text())["pid"]
        proc.stop(signal.SIGKILL)  # no clean shutdown at all
        proc.start()
        with proc.client() as http:
            got = http.get(f"/v1/{resource['name']}").json()
            assert got["state"] == "RUNNING" and got["startTime"] == resource["startTime"]
            resource_id = resource["name"].rsplit("/", 1)[-1]
            created = http.post(
                f"/v1/{proc.parent}/customJobs",
                json=job(python_pool("pass"), persistentResourceId=resource_id),
            ).json()
            assert wait_job(http, created["name"])["state"] == "JOB_STATE_SUCCEEDED"
            # The warm interpreter was adopted, not started again, and served the job.
            assert json.loads(records[0].read_text())["pid"] == zygote_pid
            run_dir = home / "jobs" / created["name"].rsplit("/", 1)[-1] / "workerpool0-0"
            assert "warm" in json.loads((run_dir / "launch.json").read_text())
            delete_resource(http, resource["name"])
    finally:
        proc.stop()
        kill_zygotes(home)


# ------------------------------------------------------------------------------ zygote unit
@pytest.fixture(scope="module")
def warm_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WarmPool, WarmTarget]]:
    root = tmp_path_factory.mktemp("warm")
    pool = WarmPool(root, host_env)
    target = WarmTarget(("1", "us-central1", "unit"), 0, ("decimal",))
    wait_for(lambda: pool.ensure(target)[0], what="the zygote to be ready")
    yield pool, target
    pool.drop(target.key, forget=True)


def _run(
    pool: WarmPool, target: WarmTarget, tmp: Path, argv: list[str], **env: str
) -> tuple[int, str, str, bool]:
    backend = WarmStartBackend(LocalBackend(), pool, lambda _job: target)
    run_dir = tmp / uuid.uuid4().hex[:6]
    request = LaunchRequest(
        "1", "workerpool0-0", argv, {**host_env(), **env}, run_dir, run_dir, persistent_resource=target.key
    )
    handle = backend.launch(request)

    def ended() -> Any:
        status = backend.poll(handle, run_dir)
        return status if status.phase != Phase.RUNNING else None

    status = wait_for(ended, timeout=30, what="the replica to end")
    warm = "warm" in json.loads((run_dir / "launch.json").read_text())
    return status.exit_code, replica_output(run_dir), replica_output(run_dir, "stderr"), warm


@pytest.mark.parametrize(
    ("argv_tail", "code", "stdout", "stderr"),
    [
        (["-c", "import sys; print(sys.argv); sys.exit(7)", "x"], 7, "['-c', 'x']", ""),
        (["-c", "raise ValueError('boom')"], 1, "", "ValueError: boom"),
        (["-c", "import sys; sys.exit('bye')"], 1, "", "bye"),
        (["-u", "-c", "import atexit; atexit.register(lambda: print('atexit ran'))"], 0, "atexit ran", ""),
        (
            [
                "-c",
                "import threading, time; "
                "threading.Thread(target=lambda: (time.sleep(0.2), print('t'))).start()",
            ],
            0,
            "t",
            "",
        ),
        (["-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"], 143, "", ""),
        (["-m", "json.tool", "--help"], 0, "usage:", ""),
    ],
)
def test_forked_replica_behaves_like_the_interpreter(
    warm_pool: tuple[WarmPool, WarmTarget],
    tmp_path: Path,
    argv_tail: list[str],
    code: int,
    stdout: str,
    stderr: str,
) -> None:
    pool, target = warm_pool
    for argv0 in ("warm", "cold"):
        backend_target = target if argv0 == "warm" else WarmTarget(("1", "us-central1", "none"), 0, ())
        got_code, out, err, warm = _run(pool, backend_target, tmp_path, [sys.executable, *argv_tail])
        assert warm == (argv0 == "warm")
        assert got_code == code, (argv0, out, err)
        assert stdout in out and stderr in err, (argv0, out, err)


def test_script_mode_and_unsupported_flags(warm_pool: tuple[WarmPool, WarmTarget], tmp_path: Path) -> None:
    pool, target = warm_pool
    script = tmp_path / "train.py"
    script.write_text("import sys, os\nprint(sys.argv, sys.path[0] == os.path.dirname(__file__), __name__)\n")
    code, out, _err, warm = _run(pool, target, tmp_path, [sys.executable, str(script), "--lr", "1"])
    assert warm and code == 0
    assert out.strip() == f"{[str(script), '--lr', '1']} True __main__"
    # -O changes how the interpreter compiles: only a fresh interpreter gets it right, so it starts cold.
    code, out, _err, warm = _run(pool, target, tmp_path, [sys.executable, "-O", "-c", "print(__debug__)"])
    assert not warm and code == 0 and "False" in out
    # A start-up variable the zygote did not start with also means a cold start.
    _code, _out, _err, warm = _run(pool, target, tmp_path, [sys.executable, "-c", "pass"], PYTHONHASHSEED="1")
    assert not warm


def test_python_invocation_parsing() -> None:
    env = {"PATH": os.path.dirname(sys.executable)}
    assert python_invocation(["sh", "-c", "true"], env) is None
    inv = python_invocation(["python3", "-u", "-m", "pkg.mod", "a"], env)
    assert inv is not None and inv.mode == "module" and inv.unbuffered and inv.args == ("a",)
    assert inv.python == os.path.join(os.path.dirname(sys.executable), "python3")
    assert python_invocation([sys.executable], env) is None
    assert python_invocation([sys.executable, "-X", "dev", "-c", "1"], env) is None
    assert python_invocation([sys.executable, "-"], env) is None


def test_warm_start_is_measurably_faster(warm_pool: tuple[WarmPool, WarmTarget], tmp_path: Path) -> None:
    """The same program importing torch reaches its first line after the import much sooner warm than cold
    (benchmarks/persistent_warm_start.py measures it end to end through the API)."""
    pool, _ = warm_pool
    heavy = WarmTarget(("1", "us-central1", "heavy"), 0, ("torch",))
    wait_for(lambda: pool.ensure(heavy)[0], timeout=120, what="the torch zygote")
    code = "import time, torch; print(time.time())"
    try:
        timings = {}
        for where, target in (("warm", heavy), ("cold", WarmTarget(("1", "us-central1", "none"), 0, ()))):
            started = time.time()
            _c, out, err, warm = _run(pool, target, tmp_path, [sys.executable, "-c", code])
            assert warm == (where == "warm"), err
            timings[where] = float(out.strip()) - started
        assert timings["cold"] > 5 * timings["warm"], timings
    finally:
        pool.drop(heavy.key, forget=True)
