"""The contract of kernel/lro_store.py's LroResourceStore, checked against every kind whose store uses it, on
SQLite and on PostgreSQL: a change and its operation are stored in one transaction, transitions are
compare-and-set, and finishing an operation clears it from (or removes) its resource together."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

import trainworks.kernel.lro_store as lro_store
from trainworks.kernel.lro_store import DuplicateResource, Key, LroResourceStore
from trainworks.kernel.operation_store import EMPTY_RESPONSE
from trainworks.kernel.operations import OperationService, aborted_by_delete
from trainworks.kernel.wire import now_utc
from trainworks.kinds.clusters.store import ClusterStore
from trainworks.kinds.clusters.wire import ClusterState
from trainworks.kinds.persistent_resources.store import PersistentResourceStore
from trainworks.kinds.persistent_resources.wire import PersistentResourceState
from trainworks.store.database import Database
from trainworks.store.tables import ClusterRow, OperationRow, PersistentResourceRow

NUMBER, LOCATION = "123", "us-central1"


class Crash(Exception):
    """Stands for the SIGKILL of a crash point: the transaction around it is rolled back."""


def cluster_row(resource_id: str, n: int, state: int, operation_id: int | None) -> ClusterRow:
    now = now_utc()
    return ClusterRow(
        project_number=NUMBER,
        location=LOCATION,
        cluster_id=resource_id,
        uid=1000 + n,
        display_name=f"cluster {resource_id}",
        state=state,
        spec={"displayName": f"cluster {resource_id}"},
        labels={},
        slurm_port=20000 + 10 * n,  # unique per cluster
        operation_id=operation_id,
        create_time=now,
        update_time=now,
    )


def resource_row(resource_id: str, n: int, state: int, operation_id: int | None) -> PersistentResourceRow:
    now = now_utc()
    return PersistentResourceRow(
        project_number=NUMBER,
        location=LOCATION,
        resource_id=resource_id,
        uid=1000 + n,
        display_name=f"resource {resource_id}",
        state=state,
        spec={"resourcePools": [{"id": "p", "replicaCount": "1", "machineSpec": {"machineType": "n1"}}]},
        labels={},
        operation_id=operation_id,
        generation=0,
        create_time=now,
        update_time=now,
    )


@dataclass(frozen=True)
class Kind:
    name: str
    store: Callable[[Database], LroResourceStore[Any]]
    row: Callable[[str, int, int, int | None], Any]  # (resource ID, n, state, operation ID) -> a new row
    start: int  # a state a row is created in
    next: int  # the state a transition moves it to
    other: int  # a state it is not in
    duplicate: type[Exception]
    operation_point: str
    ended_point: str


KINDS = [
    Kind(
        "clusters",
        ClusterStore,
        cluster_row,
        int(ClusterState.PROVISIONING),
        int(ClusterState.RUNNING),
        int(ClusterState.ERROR),
        DuplicateResource,
        "cluster-operation",
        "cluster-operation-ended",
    ),
    Kind(
        "persistent_resources",
        PersistentResourceStore,
        resource_row,
        int(PersistentResourceState.PROVISIONING),
        int(PersistentResourceState.RUNNING),
        int(PersistentResourceState.ERROR),
        DuplicateResource,
        "persistent-resource-operation",
        "persistent-resource-operation-ended",
    ),
]


@pytest.fixture(params=KINDS, ids=[k.name for k in KINDS])
def kind(request: pytest.FixtureRequest) -> Kind:
    kind: Kind = request.param
    return kind


@pytest.fixture
def store(kind: Kind, db: Database) -> LroResourceStore[Any]:
    return kind.store(db)


@pytest.fixture
def crash_at(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Make the named crash point raise Crash inside its transaction."""

    def arm(point: str) -> None:
        def crash_point(name: str) -> None:
            if name == point:
                raise Crash(name)

        monkeypatch.setattr(lro_store, "crash_point", crash_point)

    return arm


def operation(kind: Kind, resource_id: str) -> OperationRow:
    return OperationService.build(NUMBER, LOCATION, f"{kind.name}/{resource_id}", "test", "TestMetadata")


def created(kind: Kind, store: LroResourceStore[Any], resource_id: str = "r1", n: int = 1) -> OperationRow:
    """A stored resource in `kind.start`, with its create operation (still running)."""
    op = operation(kind, resource_id)
    store.insert(kind.row(resource_id, n, kind.start, op.id), operation=op)
    return op


def key(resource_id: str = "r1") -> Key:
    return (NUMBER, LOCATION, resource_id)


# ------------------------------------------------------------------------------ insert, get
def test_insert_stores_the_resource_and_its_operation(kind: Kind, store: LroResourceStore[Any]) -> None:
    op = created(kind, store)
    row = store.get(key())
    assert row is not None and row.state == kind.start and row.operation_id == op.id
    stored = store.operations.get(op.id)
    assert stored is not None and not stored.done
    assert store.get(key("absent")) is None


def test_insert_of_a_taken_id_raises_the_kinds_duplicate(kind: Kind, store: LroResourceStore[Any]) -> None:
    created(kind, store)
    op = operation(kind, "r1")
    with pytest.raises(kind.duplicate):
        store.insert(kind.row("r1", 2, kind.start, op.id), operation=op)
    assert store.operations.get(op.id) is None  # the operation went with the refused insert
    assert store.get(key()).uid == 1001  # type: ignore[union-attr]


def test_insert_and_its_operation_share_a_transaction(
    kind: Kind, store: LroResourceStore[Any], crash_at: Callable[[str], None]
) -> None:
    crash_at(kind.operation_point)
    op = operation(kind, "r1")
    with pytest.raises(Crash):
        store.insert(kind.row("r1", 1, kind.start, op.id), operation=op)
    assert store.get(key()) is None and store.operations.get(op.id) is None


# ------------------------------------------------------------------------------ page, all
def test_page_is_in_id_order_and_resumes_after_an_id(kind: Kind, store: LroResourceStore[Any]) -> None:
    for n, resource_id in enumerate(["c", "a", "e", "b", "d"]):
        store.insert(kind.row(resource_id, n, kind.start, None))
    elsewhere = kind.row("a0", 9, kind.start, None)
    elsewhere.location = "europe-west4"
    store.insert(elsewhere)

    def ids(after: str | None, limit: int) -> list[str]:
        return [getattr(r, store.id_column) for r in store.page(NUMBER, LOCATION, after, limit)]

    assert ids(None, 2) == ["a", "b"]
    assert ids("b", 2) == ["c", "d"]
    assert ids("d", 2) == ["e"]
    assert ids("e", 2) == []
    assert store.page("999", LOCATION, None, 10) == []
    assert [r.uid for r in store.all()] == [1000, 1001, 1002, 1003, 1004, 1009]  # uid order, all locations


# ------------------------------------------------------------------------------ transitions
def test_transition_is_compare_and_set_and_stores_its_operation(
    kind: Kind, store: LroResourceStore[Any]
) -> None:
    created(kind, store)
    before = store.get(key())
    refused = operation(kind, "r1")
    assert not store.transition(
        key(), [kind.other], operation=refused, state=kind.next, operation_id=refused.id
    )
    assert store.get(key()).state == kind.start  # type: ignore[union-attr]
    assert store.operations.get(refused.id) is None  # stored only with the change
    assert not store.transition(key("absent"), [kind.start], state=kind.next)

    op = operation(kind, "r1")
    assert store.transition(
        key(), [kind.other, kind.start], operation=op, state=kind.next, operation_id=op.id
    )
    row = store.get(key())
    assert row is not None and row.state == kind.next and row.operation_id == op.id
    assert row.update_time >= before.update_time  # type: ignore[union-attr]
    assert store.operations.get(op.id) is not None
    assert not store.transition(key(), [kind.start], state=kind.other)  # it moved on


def test_transition_and_its_operation_share_a_transaction(
    kind: Kind, store: LroResourceStore[Any], crash_at: Callable[[str], None]
) -> None:
    first = created(kind, store)
    crash_at(kind.operation_point)
    op = operation(kind, "r1")
    with pytest.raises(Crash):
        store.transition(key(), [kind.start], operation=op, state=kind.next, operation_id=op.id)
    row = store.get(key())
    assert row is not None and row.state == kind.start and row.operation_id == first.id
    assert store.operations.get(op.id) is None


def test_abort_ends_the_unfinished_operation_with_its_error(kind: Kind, store: LroResourceStore[Any]) -> None:
    first = created(kind, store)
    op = operation(kind, "r1")
    abort = aborted_by_delete(first.id, "Thing", "things/r1")
    assert abort is not None and aborted_by_delete(None, "Thing", "things/r1") is None
    assert store.transition(
        key(), [kind.start], operation=op, abort=abort, state=kind.next, operation_id=op.id
    )
    ended = store.operations.get(first.id)
    assert ended is not None and ended.done and ended.response is None
    assert ended.error == {"code": 10, "message": "The Thing things/r1 is being deleted."}
    assert (
        ended.metadata_["genericMetadata"]["updateTime"] != first.metadata_["genericMetadata"]["updateTime"]
    )
    assert not store.operations.get(op.id).done  # type: ignore[union-attr]
    assert store.get(key()).operation_id == op.id  # type: ignore[union-attr]


def test_abort_shares_the_changes_transaction(
    kind: Kind, store: LroResourceStore[Any], crash_at: Callable[[str], None]
) -> None:
    first = created(kind, store)
    crash_at(kind.ended_point)
    op = operation(kind, "r1")
    with pytest.raises(Crash):
        store.transition(
            key(),
            [kind.start],
            operation=op,
            abort=(first.id, {"code": 10, "message": "aborted"}),
            state=kind.next,
            operation_id=op.id,
        )
    assert not store.operations.get(first.id).done  # type: ignore[union-attr]
    assert store.operations.get(op.id) is None
    assert store.get(key()).state == kind.start  # type: ignore[union-attr]


def test_set_fields_and_remove(kind: Kind, store: LroResourceStore[Any]) -> None:
    created(kind, store)
    store.set_fields(key(), display_name="renamed")
    assert store.get(key()).display_name == "renamed"  # type: ignore[union-attr]
    store.remove(key())
    assert store.get(key()) is None
    store.remove(key())  # removing what is gone is a no-op


# ------------------------------------------------------------------------------ operations
def test_finish_operation_clears_it_only_while_it_is_the_resources(
    kind: Kind, store: LroResourceStore[Any]
) -> None:
    first = created(kind, store)
    stale = store.operations.insert(operation(kind, "r1"))  # an operation the resource no longer tracks
    store.finish_operation(key(), stale.id, error={"code": 13, "message": "failed"})
    assert store.operations.get(stale.id).error == {"code": 13, "message": "failed"}  # type: ignore[union-attr]
    assert store.get(key()).operation_id == first.id  # type: ignore[union-attr]

    store.finish_operation(key(), first.id, response={"done": "yes"})
    finished = store.operations.get(first.id)
    assert finished is not None and finished.done and finished.response == {"done": "yes"}
    assert finished.error is None
    assert store.get(key()).operation_id is None  # type: ignore[union-attr]


def test_finish_operation_with_remove_deletes_the_resource(kind: Kind, store: LroResourceStore[Any]) -> None:
    first = created(kind, store)
    created(kind, store, "r2", 2)
    store.finish_operation(key(), first.id, response=dict(EMPTY_RESPONSE), remove=True)
    assert store.get(key()) is None
    assert store.get(key("r2")) is not None
    finished = store.operations.get(first.id)
    assert finished is not None and finished.done and finished.response == EMPTY_RESPONSE


def test_set_progress_writes_the_running_operations_message(kind: Kind, store: LroResourceStore[Any]) -> None:
    first = created(kind, store)
    store.set_progress(first.id, "Halfway.")
    assert store.operations.get(first.id).metadata_["progressMessage"] == "Halfway."  # type: ignore[union-attr]
    store.finish_operation(key(), first.id, response={})
    store.set_progress(first.id, "Too late.")  # a finished operation keeps its last message
    assert store.operations.get(first.id).metadata_["progressMessage"] == "Halfway."  # type: ignore[union-attr]


# ------------------------------------------------------------------------------ persistent resources' hooks
def test_persistent_resources_bill_inside_the_changes_transaction(db: Database) -> None:
    """reopen_spans (in a transition) and removal close and open billing spans with the change."""
    store = PersistentResourceStore(db)
    kind = KINDS[1]
    first = created(kind, store)
    assert store.transition(key(), [kind.start], reopen_spans=True, state=kind.next)
    (span,) = store.spans(NUMBER, LOCATION)
    assert span.machines == 1 and span.end_time is None
    store.finish_operation(key(), first.id, response={}, remove=True)
    (span,) = store.spans(NUMBER, LOCATION)
    assert span.end_time is not None and span.end_time - span.start_time < timedelta(minutes=1)
