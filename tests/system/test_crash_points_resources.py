"""Crash points of persistent resources and datasets: the server SIGKILLs itself where an operation and the
change it tracks used to be stored in separate transactions (TRAINWORKS_CRASH_AT, store/crash_points.py), and
after a clean restart no operation is left undone: each is stored with its change, or completed (or failed)
by the restarted controller from the state the change reached."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.kinds.persistent_resources.test_api import create_raw, kill_zygotes, pool_body, wait_op
from tests.support.server import ServerProcess, wait_for
from tests.system.test_chaos import crash_at, restart_after_crash, undone_operations

TEXT = "gs://google-cloud-aiplatform/schema/dataset/metadata/text_1.0.0.yaml"
MISSING_MODULE = "trainworksnosuchmodule"  # a preload that cannot import: provisioning fails


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "home"
    try:
        yield path
    finally:
        kill_zygotes(path)  # warm interpreters outlive the server by design


def running_resource(server: ServerProcess, resource_id: str) -> dict[str, Any]:
    with server.client() as http:
        op = create_raw(http, server, resource_id, {"resourcePools": [pool_body(1)]}).json()
        done = wait_op(http, op)
    assert "error" not in done, done
    return done["response"]  # type: ignore[no-any-return]


def send_until_crash(request: Any) -> None:
    """Send a request whose work the controller does afterwards: the server dies at its crash point then, as
    a rule after answering, but on a loaded machine possibly before the answer is out."""
    with contextlib.suppress(httpx.TransportError):
        request()


def only_operation(server: ServerProcess, resource_id: str) -> dict[str, Any]:
    """The one operation recorded for the resource, once done (found by listing: its answer may be lost)."""
    resource = f"/persistentResources/{resource_id}/operations/"
    with server.client() as http:

        def done() -> dict[str, Any] | None:
            listed = http.get(f"/v1/{server.parent}/operations").json().get("operations", [])
            mine = [op for op in listed if resource in op["name"]]
            assert len(mine) <= 1, mine
            return mine[0] if mine and mine[0].get("done") else None

        return wait_for(done, what=f"the operation of {resource_id}")  # type: ignore[no-any-return]


def restarted_with(server: ServerProcess, point: str) -> ServerProcess:
    """Stop a server cleanly and start it again on the same home with a crash point."""
    server.stop()
    server.env = {"TRAINWORKS_CRASH_AT": point}
    return server.start()


# ------------------------------------------------------------------------------ persistent resources
def test_crash_while_a_resource_create_is_recorded_leaves_no_operation_undone(home: Path) -> None:
    """The create's operation was stored before the resource: a crash in between left an operation that
    nothing would ever complete."""
    server = crash_at(home, "persistent-resource-operation")
    try:
        with server.client() as http, pytest.raises(httpx.TransportError):
            create_raw(http, server, "crashed", {"resourcePools": [pool_body(1)]})
        restart_after_crash(server)
        assert undone_operations(server) == []
        with server.client() as http:
            assert http.get(f"/v1/{server.parent}/persistentResources/crashed").status_code == 404
    finally:
        server.stop()


def test_crash_once_a_resource_runs_still_completes_its_create_and_bills_it(home: Path) -> None:
    """RUNNING was recorded, the create's operation not yet completed: the restarted controller completes it,
    and the billing span opened with RUNNING (same transaction) is there."""
    server = crash_at(home, "persistent-resource-running")
    try:
        with server.client() as http:
            send_until_crash(
                lambda: create_raw(http, server, "runs", {"resourcePools": [pool_body(2, id="p")]})
            )
        restart_after_crash(server)
        done = only_operation(server, "runs")
        assert "error" not in done and done["response"]["state"] == "RUNNING", done
        with server.client() as http:
            costs = http.get(f"/trainworks/v1/{server.parent}/costs", params={"by": "resource"}).json()
        row = next(r for r in costs["rows"] if r["name"].endswith("/persistentResources/runs"))
        assert row["running"] and row["groups"][0]["intervals"] == 2, row
        assert undone_operations(server) == []
    finally:
        server.stop()


def test_crash_while_a_failed_provisioning_is_recorded_still_fails_its_operation(home: Path) -> None:
    """ERROR was recorded, the create's operation not yet failed: a crash in between left it undone for ever
    (nothing reconciles an operation of a resource in ERROR)."""
    server = crash_at(home, "persistent-resource-operation-ended")
    try:
        body = {"resourcePools": [pool_body(1)], "labels": {"trainworks-preload": MISSING_MODULE}}
        with server.client() as http:
            send_until_crash(lambda: create_raw(http, server, "fails", body))
        restart_after_crash(server)
        done = only_operation(server, "fails")
        with server.client() as http:
            resource = http.get(f"/v1/{server.parent}/persistentResources/fails").json()
        assert done["error"]["code"] == 9 and MISSING_MODULE in done["error"]["message"], done
        assert resource["state"] == "ERROR", resource
        assert undone_operations(server) == []
    finally:
        server.stop()


def test_crash_while_a_failed_update_is_recorded_fails_its_operation_not_succeeds(home: Path) -> None:
    """The resource went back to RUNNING before the update's operation failed: after a crash in between the
    restarted controller saw RUNNING with an operation and reported the failed update as done."""
    server = ServerProcess(home=home).start()
    try:
        running_resource(server, "updated")
        with server.client() as http:  # only the update's operation is listed from here on
            listed = http.get(f"/v1/{server.parent}/operations").json()["operations"]
            http.delete(f"/v1/{listed[0]['name']}").raise_for_status()
        restarted_with(server, "persistent-resource-operation-ended")
        name = f"{server.parent}/persistentResources/updated"
        labels = {"labels": {"trainworks-preload": MISSING_MODULE}}
        with server.client() as http:
            send_until_crash(lambda: http.patch(f"/v1/{name}", params={"updateMask": "labels"}, json=labels))
        restart_after_crash(server)
        done = only_operation(server, "updated")
        with server.client() as http:
            resource = http.get(f"/v1/{name}").json()
        assert "error" in done and MISSING_MODULE in done["error"]["message"], done
        assert resource["state"] == "RUNNING" and "labels" not in resource, resource
        assert undone_operations(server) == []
    finally:
        server.stop()


def test_crash_while_a_resource_delete_is_recorded_leaves_no_operation_undone(home: Path) -> None:
    """The delete's operation was stored before the resource moved to STOPPING: a crash in between left an
    operation that nothing would complete. Now neither is kept, and a second delete completes."""
    server = ServerProcess(home=home).start()
    try:
        running_resource(server, "deleted")
        restarted_with(server, "persistent-resource-operation")
        name = f"{server.parent}/persistentResources/deleted"
        with server.client() as http, pytest.raises(httpx.TransportError):
            http.delete(f"/v1/{name}")
        restart_after_crash(server)
        assert undone_operations(server) == []
        with server.client() as http:
            assert http.get(f"/v1/{name}").json()["state"] == "RUNNING"
            done = wait_op(http, http.delete(f"/v1/{name}").json())
            assert done["response"]["@type"] == "type.googleapis.com/google.protobuf.Empty", done
            assert http.get(f"/v1/{name}").status_code == 404
    finally:
        server.stop()


# ------------------------------------------------------------------------------ datasets
def test_crash_while_a_dataset_create_is_recorded_leaves_no_operation_undone(home: Path) -> None:
    """The create's operation was stored, then the dataset, then the operation completed: a crash after the
    first left an operation undone for ever."""
    server = crash_at(home, "dataset-operation")
    try:
        with server.client() as http, pytest.raises(httpx.TransportError):
            http.post(f"/v1/{server.parent}/datasets", json={"displayName": "d", "metadataSchemaUri": TEXT})
        restart_after_crash(server)
        assert undone_operations(server) == []
        with server.client() as http:
            assert http.get(f"/v1/{server.parent}/datasets").json() == {}
    finally:
        server.stop()


def test_crash_while_a_dataset_delete_is_recorded_leaves_no_operation_undone(home: Path) -> None:
    server = ServerProcess(home=home).start()
    try:
        with server.client() as http:
            op = http.post(
                f"/v1/{server.parent}/datasets", json={"displayName": "d", "metadataSchemaUri": TEXT}
            ).json()
        assert op["done"], op
        name = op["response"]["name"]
        restarted_with(server, "dataset-operation")
        with server.client() as http, pytest.raises(httpx.TransportError):
            http.delete(f"/v1/{name}")
        restart_after_crash(server)
        assert undone_operations(server) == []
        with server.client() as http:
            assert http.get(f"/v1/{name}").status_code == 200  # the delete was not kept either
            deleted = http.delete(f"/v1/{name}").json()
            assert deleted["done"] and "error" not in deleted, deleted
            assert http.get(f"/v1/{name}").status_code == 404
    finally:
        server.stop()
