"""persistentResources over gRPC: the official PersistentResourceServiceClient on its gRPC transport (an
insecure loopback channel) against a real server: create, update, reboot and delete as LROs, get, list with
paging, v1beta1, NOT_FOUND, ALREADY_EXISTS and INVALID_ARGUMENT with field violations; the same resource and
the same error as REST."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest
from google.api_core import exceptions
from google.cloud import aiplatform_v1, aiplatform_v1beta1
from google.protobuf import empty_pb2, json_format

from tests.kinds.persistent_resources.test_api import kill_zygotes
from tests.support.rpc import assert_as_rest, fields, gapic, grpc_fixtures, judged_paths, not_found
from tests.support.server import ServerProcess
from trainworks.kinds.persistent_resources import rpc

State = aiplatform_v1.PersistentResource.State


served, server, resources = grpc_fixtures(
    "persistent-grpc", aiplatform_v1.PersistentResourceServiceClient, cleanup=kill_zygotes
)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def pool(package: Any = aiplatform_v1, replicas: int = 1) -> Any:
    return package.ResourcePool(
        machine_spec=package.MachineSpec(machine_type="n1-standard-4"), replica_count=replicas
    )


def test_create_get_list_update_reboot_delete(
    resources: aiplatform_v1.PersistentResourceServiceClient, server: ServerProcess
) -> None:
    resource_id = unique("grpc")
    body = aiplatform_v1.PersistentResource(
        display_name="warm", labels={"team": "ml"}, resource_pools=[pool()]
    )
    operation = resources.create_persistent_resource(
        parent=server.parent, persistent_resource=body, persistent_resource_id=resource_id
    )
    assert isinstance(operation.metadata, aiplatform_v1.CreatePersistentResourceOperationMetadata)
    assert f"/persistentResources/{resource_id}/operations/" in operation.operation.name
    created = operation.result(timeout=60)
    assert created.state == State.RUNNING and created.name.endswith(f"/persistentResources/{resource_id}")
    got = resources.get_persistent_resource(name=created.name)
    assert got.resource_pools == created.resource_pools and dict(got.labels) == {"team": "ml"}
    with server.client() as http:
        rest = http.get(f"/v1/{created.name}").json()
    assert json_format.MessageToDict(aiplatform_v1.PersistentResource.pb(got)) == rest

    second = resources.create_persistent_resource(
        parent=server.parent, persistent_resource=body, persistent_resource_id=resource_id + "-b"
    ).result(timeout=60)
    pages = list(resources.list_persistent_resources(request={"parent": server.parent, "page_size": 1}).pages)
    names = [r.name for page in pages for r in page.persistent_resources]
    assert created.name in names and second.name in names
    assert all(len(page.persistent_resources) == 1 for page in pages) and not pages[-1].next_page_token

    # UpdatePersistentResource names the resource in persistent_resource.name, as REST's PATCH path does.
    change = aiplatform_v1.PersistentResource(
        name=created.name,
        display_name="renamed",
        resource_pools=[aiplatform_v1.ResourcePool(id=created.resource_pools[0].id, replica_count=2)],
    )
    update = resources.update_persistent_resource(
        persistent_resource=change, update_mask={"paths": ["resource_pools.replica_count", "display_name"]}
    )
    assert isinstance(update.metadata, aiplatform_v1.UpdatePersistentResourceOperationMetadata)
    updated = update.result(timeout=60)
    assert updated.display_name == "renamed" and updated.resource_pools[0].replica_count == 2

    reboot = resources.reboot_persistent_resource(name=created.name)
    assert isinstance(reboot.metadata, aiplatform_v1.RebootPersistentResourceOperationMetadata)
    assert reboot.result(timeout=60).state == State.RUNNING

    for name in (created.name, second.name):
        deletion = resources.delete_persistent_resource(name=name)
        assert isinstance(deletion.metadata, aiplatform_v1.DeleteOperationMetadata)
        assert isinstance(deletion.result(timeout=60), empty_pb2.Empty)
        with pytest.raises(exceptions.NotFound):
            resources.get_persistent_resource(name=name)


def test_v1beta1(served: tuple[ServerProcess, grpc.Channel]) -> None:
    server, channel = served
    beta = gapic(aiplatform_v1beta1.PersistentResourceServiceClient, channel)
    operation = beta.create_persistent_resource(
        parent=server.parent,
        persistent_resource=aiplatform_v1beta1.PersistentResource(resource_pools=[pool(aiplatform_v1beta1)]),
        persistent_resource_id=unique("beta"),
    )
    created = operation.result(timeout=60)
    assert operation.operation.metadata.type_url.endswith("v1beta1.CreatePersistentResourceOperationMetadata")
    assert isinstance(beta.delete_persistent_resource(name=created.name).result(timeout=60), empty_pb2.Empty)


def test_errors(resources: aiplatform_v1.PersistentResourceServiceClient, server: ServerProcess) -> None:
    unknown = f"{server.parent}/persistentResources/nothing-here"
    calls = (
        resources.get_persistent_resource,
        resources.delete_persistent_resource,
        resources.reboot_persistent_resource,
    )
    not_found(calls, unknown)

    bad = aiplatform_v1.PersistentResource(resource_pools=[pool(replicas=0)])
    with pytest.raises(exceptions.InvalidArgument) as caught:
        resources.create_persistent_resource(
            parent=server.parent, persistent_resource=bad, persistent_resource_id="Bad_ID"
        )
    assert fields(caught.value) == ["persistent_resource_id", "resource_pools[0].replica_count"]
    body = json_format.MessageToDict(aiplatform_v1.PersistentResource.pb(bad))
    with server.client() as http:
        rest = http.post(
            f"/v1/{server.parent}/persistentResources", params={"persistentResourceId": "Bad_ID"}, json=body
        ).json()["error"]
    assert_as_rest(caught.value, rest)

    taken = unique("dup")
    good = aiplatform_v1.PersistentResource(resource_pools=[pool()])
    made = resources.create_persistent_resource(
        parent=server.parent, persistent_resource=good, persistent_resource_id=taken
    ).result(timeout=60)
    with pytest.raises(exceptions.AlreadyExists):
        resources.create_persistent_resource(
            parent=server.parent, persistent_resource=good, persistent_resource_id=taken
        )
    with pytest.raises(exceptions.InvalidArgument) as caught:
        resources.update_persistent_resource(
            persistent_resource=good, update_mask={"paths": ["display_name"]}
        )
    assert fields(caught.value) == ["persistent_resource.name"]
    resources.delete_persistent_resource(name=made.name).result(timeout=60)


def test_auth_judges_an_update_by_the_name_in_its_body() -> None:
    """UpdatePersistentResource names the resource in persistent_resource.name: auth sees its project, as the
    REST PATCH path has it."""
    name = "projects/other/locations/l/persistentResources/r"

    def update(channel: grpc.Channel) -> object:
        client = gapic(aiplatform_v1.PersistentResourceServiceClient, channel)
        return client.update_persistent_resource(
            persistent_resource={"name": name}, update_mask={"paths": ["labels"]}
        )

    assert judged_paths(rpc.bindings, update) == [f"/v1/{name}"]
