"""The service side of the resources whose changes are LROs (kernel/lro_store.py): finding one, list pages,
starting a change and deleting. Each change is stored with its operation in one transaction by the store."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from trainworks.kernel.errors import (
    ApiError,
    failed_precondition,
    not_found,
)
from trainworks.kernel.listing import id_page_token, page_size, read_id_page_token
from trainworks.kernel.lro_store import Key, LroResourceStore
from trainworks.kernel.operations import OperationService, aborted_by_delete, operation_wire
from trainworks.kernel.projects import Projects
from trainworks.kernel.status import Code
from trainworks.kernel.wire import ProtoEnum
from trainworks.store.tables import OperationRow


def already_exists(type_name: str, name: str) -> ApiError:
    """What a create answers when the ID is taken."""
    return ApiError(Code.ALREADY_EXISTS, f"{type_name} {name} already exists.", reason="ALREADY_EXISTS")


def find_resource(
    store: LroResourceStore[Any],
    projects: Projects,
    parent: tuple[str, str],
    resource_id: str,
    longest: int,
    type_name: str,
    name_of: Callable[[str, str, str], str],
) -> Any:
    """The resource of `parent` (project, location); NOT_FOUND when there is none (an ID longer than
    `longest` names none)."""
    project, location = parent
    number = projects.number(project, location)
    row = store.get((number, location, resource_id)) if len(resource_id) <= longest else None
    if row is None:
        raise not_found(f"{type_name} {name_of(number, location, resource_id[:80])}")
    return row


def list_resources(
    store: LroResourceStore[Any],
    projects: Projects,
    parent: tuple[str, str],
    page: tuple[int, str],
    longest: int,
    key: str,
    render: Callable[[Sequence[Any]], list[dict[str, Any]]],
) -> dict[str, Any]:
    """One page of the parent (project, location) in ID order. `page`: (page_size, page_token); `render`
    turns the page's rows into wire forms (all at once: some kinds read what the rows share in one go);
    `key` names the repeated field."""
    requested, page_token = page
    size = page_size(requested)
    after = read_id_page_token(page_token, longest) if page_token else None
    project, location = parent
    number = projects.number(project, location)
    rows = store.page(number, location, after, size + 1)
    out: dict[str, Any] = {}
    if rows:  # proto3 JSON omits an empty repeated field
        out[key] = render(rows[:size])
    if len(rows) > size:
        out["nextPageToken"] = id_page_token(getattr(rows[size - 1], store.id_column))
    return out


def start_change(
    store: LroResourceStore[Any],
    key: Key,
    from_states: Sequence[ProtoEnum],
    operation: OperationRow,
    what: str,
    **values: Any,
) -> None:
    """Move the resource out of `from_states` with the operation tracking the change, in one transaction;
    FAILED_PRECONDITION naming its new state when it moved meanwhile. `what`: "The {type} {name}"."""
    if not store.transition(key, from_states, operation=operation, **values):
        current = store.get(key)
        state = type(from_states[0])(current.state).name if current else "deleted"
        raise failed_precondition(f"{what} changed meanwhile ({state}).")


def delete_resource(
    store: LroResourceStore[Any],
    operations: OperationService,
    row: Any,
    key: Key,
    stopping: ProtoEnum,
    new_operation: Callable[[], OperationRow],
    names: tuple[str, str],
    again: Callable[[], dict[str, Any]],
    wake: Callable[[], None],
    **values: Any,
) -> dict[str, Any]:
    """Delete: move the resource to `stopping` with a new delete operation, ending (ABORTED) a create or
    update still running, in one transaction. A deletion under way answers with its operation (a new one
    when its record was deleted). `names`: (type name, full name); `again` retries when it moved meanwhile;
    `values` are the resource's own fields to set."""
    if row.state == stopping:  # deleting already: answer with that deletion's operation
        existing = operations.store.get(row.operation_id) if row.operation_id is not None else None
        if existing is not None:
            return operation_wire(existing)
    op = new_operation()
    if row.state == stopping:  # its operation record was deleted: a new one completes it
        if not store.transition(key, [stopping], operation=op, operation_id=op.id):
            return again()
        return operation_wire(op)
    others = [s for s in type(stopping) if s != stopping]
    # A change still running will not complete: its operation ends with the deletion, together.
    if not store.transition(
        key,
        others,
        operation=op,
        abort=aborted_by_delete(row.operation_id, *names),
        state=stopping,
        operation_id=op.id,
        **values,
    ):
        return again()
    wake()
    return operation_wire(op)


__all__ = ["already_exists", "delete_resource", "find_resource", "list_resources", "start_change"]
