"""The service side of the resources whose changes are LROs (kernel/lro_store.py): finding one, list pages,
the checks and the row of a create, starting a change and deleting. Each change is stored with its operation
in one transaction by the store."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar, Generic, Protocol, cast

from trainworks.kernel import listing
from trainworks.kernel.errors import ApiError, failed_precondition, not_found
from trainworks.kernel.ids import new_numeric_id
from trainworks.kernel.lro_store import Key, LroResourceStore, RowT, key_of
from trainworks.kernel.operations import aborted_by_delete, operation_wire
from trainworks.kernel.projects import Projects
from trainworks.kernel.rows import Named
from trainworks.kernel.status import Code
from trainworks.kernel.wire import ProtoEnum
from trainworks.store.tables import OperationRow


def already_exists(type_name: str, name: str) -> ApiError:
    """What a create answers when the ID is taken."""
    return ApiError(Code.ALREADY_EXISTS, f"{type_name} {name} already exists.", reason="ALREADY_EXISTS")


class ResourceRow(Protocol):
    """What the service reads of a resource row (store/tables.py's LroResourceColumns)."""

    @property
    def state(self) -> int: ...

    @property
    def operation_id(self) -> int | None: ...


class LroResourceService(Generic[RowT]):
    """find, list, create's ID check and new row, a change's start and delete, as every resource whose changes
    are LROs has them. A kind's service names itself in the class attributes and defines `render`."""

    what: ClassVar[str]  # the type in messages: "PersistentResource"
    collection: ClassVar[str]  # the list's repeated field: "persistentResources"
    longest_id: ClassVar[int]  # a longer resource ID names no resource
    name_of: ClassVar[staticmethod[[str, str, str], str]]  # the full name: staticmethod(resource_name)

    def __init__(self, store: LroResourceStore[RowT], projects: Projects, wake: Callable[[], None]) -> None:
        self.store = store
        self.projects = projects
        self.wake = wake  # asks the kind's controller for a pass now

    def render(self, rows: Sequence[RowT]) -> builtins.list[dict[str, Any]]:
        """A list page's wire forms (all at once: some kinds read what the rows share in one go)."""
        raise NotImplementedError

    def full_name(self, row: ResourceRow) -> str:
        return self.name_of(*key_of(row))

    # -------------------------------------------------------------- reading
    def find(self, project: str, location: str, resource_id: str) -> RowT:
        """The resource of the parent; NOT_FOUND when there is none (an ID longer than `longest_id` names
        none)."""
        number = self.projects.number(project, location)
        key = (number, location, resource_id)
        row = self.store.get(key) if len(resource_id) <= self.longest_id else None
        if row is None:
            raise not_found(f"{self.what} {self.name_of(number, location, resource_id[:80])}")
        return row

    def list(self, project: str, location: str, page_size: int, page_token: str) -> dict[str, Any]:
        """One page of the parent in ID order."""
        size = listing.page_size(page_size)
        after = listing.read_id_page_token(page_token, self.longest_id) if page_token else None
        number = self.projects.number(project, location)
        rows = self.store.page(number, location, after, size + 1)
        out: dict[str, Any] = {}
        if rows:  # proto3 JSON omits an empty repeated field
            out[self.collection] = self.render(rows[:size])
        if len(rows) > size:
            out["nextPageToken"] = listing.id_page_token(getattr(rows[size - 1], self.store.id_column))
        return out

    # -------------------------------------------------------------- create
    def new_key(self, project: str, location: str, resource_id: str) -> Key:
        """The key of a resource to create; ALREADY_EXISTS when its ID is taken."""
        key = (self.projects.number(project, location), location, resource_id)
        if self.store.get(key) is not None:
            raise self.exists(key)
        return key

    def exists(self, key: Key) -> ApiError:
        """What a create answers when the ID is taken."""
        return already_exists(self.what, self.name_of(*key))

    def new_row(
        self,
        key: Key,
        body: Named,
        state: ProtoEnum,
        spec: dict[str, Any],
        operation: OperationRow,
        now: datetime,
        **own_columns: Any,
    ) -> RowT:
        """A new resource, not yet stored: created `now` from the request's `body` in `state`, its create
        `operation` running; `own_columns` are the kind's own."""
        number, location, resource_id = key
        row: RowT = self.store.row_type(
            project_number=number,
            location=location,
            uid=new_numeric_id(),
            display_name=body.display_name,
            state=int(state),
            spec=spec,
            labels=dict(body.labels),
            operation_id=operation.id,
            create_time=now,
            update_time=now,
            **{self.store.id_column: resource_id},
            **own_columns,
        )
        return row

    # -------------------------------------------------------------- changes
    def require_state(self, row: ResourceRow, allowed: Sequence[ProtoEnum], when: str) -> None:
        """FAILED_PRECONDITION unless the resource is in one of `allowed`; `when` says in which ("it can be
        updated only while RUNNING")."""
        state = type(allowed[0])(row.state)
        if state not in allowed:
            raise failed_precondition(f"The {self.what} {self.full_name(row)} is {state.name}; {when}.")

    def start_change(
        self, row: ResourceRow, from_states: Sequence[ProtoEnum], operation: OperationRow, **values: Any
    ) -> None:
        """Move the resource out of `from_states` with `operation` tracking the change, in one transaction,
        and wake the controller; FAILED_PRECONDITION naming its new state when it moved meanwhile."""
        key = key_of(row)
        if not self.store.transition(
            key, from_states, operation=operation, operation_id=operation.id, **values
        ):
            current = cast(ResourceRow | None, self.store.get(key))
            state = type(from_states[0])(current.state).name if current else "deleted"
            raise failed_precondition(f"The {self.what} {self.name_of(*key)} changed meanwhile ({state}).")
        self.wake()

    def delete_resource(
        self,
        row: ResourceRow,
        stopping: ProtoEnum,
        new_operation: Callable[[], OperationRow],
        again: Callable[[], dict[str, Any]],
        **values: Any,
    ) -> dict[str, Any]:
        """Delete: move the resource to `stopping` with a new delete operation, ending (ABORTED) a create or
        update still running, in one transaction. A deletion under way answers with its operation (a new one
        when its record was deleted). `again` retries when it moved meanwhile; `values` are the resource's own
        fields to set."""
        key = key_of(row)
        if row.state == stopping:  # deleting already: answer with that deletion's operation
            existing = self.store.operations.get(row.operation_id) if row.operation_id is not None else None
            if existing is not None:
                return operation_wire(existing)
        op = new_operation()
        if row.state == stopping:  # its operation record was deleted: a new one completes it
            if not self.store.transition(key, [stopping], operation=op, operation_id=op.id):
                return again()
            return operation_wire(op)
        others = [s for s in type(stopping) if s != stopping]
        # A change still running will not complete: its operation ends with the deletion, together.
        if not self.store.transition(
            key,
            others,
            operation=op,
            abort=aborted_by_delete(row.operation_id, self.what, self.name_of(*key)),
            state=stopping,
            operation_id=op.id,
            **values,
        ):
            return again()
        self.wake()
        return operation_wire(op)


__all__ = ["LroResourceService", "already_exists"]
