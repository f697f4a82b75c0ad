"""Query pieces every store's list pages share, for tables keyed by (project number, location, ...); and what
a new row takes from its request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, TypeVarTuple

from sqlalchemy import ColumnElement, Select, inspect, select, tuple_

from trainworks.kernel.filtering import required_label
from trainworks.store.database import Database

Ts = TypeVarTuple("Ts")
R = TypeVar("R")


class Named(Protocol):
    """A create's wire model, as far as its new row takes from it."""

    @property
    def display_name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...


def filtered(query: Select[*Ts], where: ColumnElement[bool] | None) -> Select[*Ts]:
    """The query narrowed by a list filter, when there is one."""
    return query if where is None else query.where(where)


def in_location(
    table: Any, project_number: str, location: str, where: ColumnElement[bool] | None
) -> Select[Any]:
    """The rows of `table` in one project and location that pass `where`."""
    query = select(table).where(table.project_number == project_number, table.location == location)
    return filtered(query, where)


def newest_first(
    query: Select[*Ts], key: tuple[Any, Any], after: tuple[datetime, int] | None, limit: int
) -> Select[*Ts]:
    """A page newest first by `key`, the (create_time, id) columns; `after` is the key of the last row of the
    previous page. The row value comparison seeks an index on (..., create_time, id) past `after` on SQLite
    and PostgreSQL alike, where `a < x OR (a = x AND b < y)` would scan it from the top."""
    created, row_id = key
    if after is not None:
        query = query.where(tuple_(created, row_id) < tuple_(*after))
    return query.order_by(created.desc(), row_id.desc()).limit(limit)


def labelled_in_location(
    table: Any,
    labels: Any,
    project_number: str,
    location: str,
    label: tuple[str, str],
    where: ColumnElement[bool] | None,
) -> Select[Any]:
    """The rows of `table` in one project and location that carry `label` (key, value) and pass `where`, found
    through `labels`, their label rows (job_id, key, value, project_number, location, create_time)."""
    key, value = label
    query = (
        select(table)
        .join(labels, labels.job_id == table.id)
        .where(
            labels.key == key,
            labels.value == value,
            labels.project_number == project_number,
            labels.location == location,
        )
    )
    return filtered(query, where)


def by_offset(
    query: Select[*Ts],
    where: ColumnElement[bool] | None,
    order: Sequence[Any],
    tiebreak: Any,
    offset: int,
    limit: int,
) -> Select[*Ts]:
    """A page in a caller-chosen order (`orderBy`, then `tiebreak`), by offset."""
    return filtered(query, where).order_by(*order, tiebreak).offset(offset).limit(limit)


def insert_values(row: Any) -> dict[str, Any]:
    """A new mapped object's column values for a Core INSERT, its Python-side defaults filled in (on the
    object too, as an ORM flush would set them)."""
    values: dict[str, Any] = {}
    for attribute in inspect(row).mapper.column_attrs:
        key, column = attribute.key, attribute.columns[0]
        if key in row.__dict__:
            values[key] = row.__dict__[key]
        elif column.default is not None and column.default.is_scalar:
            values[key] = column.default.arg
            setattr(row, key, values[key])
        elif column.default is not None and column.default.is_callable:
            values[key] = column.default.arg(None)  # SQLAlchemy wraps dict, list... to take a context
            setattr(row, key, values[key])
        else:
            values[key] = None  # NULL, and loaded as such: nothing to read back once the row is stored
            setattr(row, key, None)
    return values


class NewestFirstRows(Generic[R]):
    """A store of one table (`row`: a mapped class with id, project_number, location and create_time) whose
    lists page newest first. A table that keeps its rows' labels as label rows too names their mapped class
    in `row.labels_row` (columns job_id, key, value, project_number, location, create_time)."""

    row: Any

    def __init__(self, db: Database) -> None:
        self.db = db

    def page(
        self,
        project_number: str,
        location: str,
        where: ColumnElement[bool] | None,
        after: tuple[datetime, int] | None,
        limit: int,
    ) -> list[R]:
        """Newest first; `after` is the (create_time, id) of the last row of the previous page. A filter that
        requires a label (labels.KEY=VALUE among its top-level AND terms) pages through the table's label
        rows, where it has them: an index seek however few rows carry that label, never a walk over the
        parent's rows."""
        table, labels = self.row, getattr(self.row, "labels_row", None)
        label = required_label(where)
        if labels is not None and label is not None:
            rows = labelled_in_location(table, labels, project_number, location, label, where)
            query = newest_first(rows, (labels.create_time, labels.job_id), after, limit)
        else:
            rows = in_location(table, project_number, location, where)
            query = newest_first(rows, (table.create_time, table.id), after, limit)
        with self.db.session() as session:
            return list(session.scalars(query))

    def carrying(self, key: str, value: str) -> list[R]:
        """The rows carrying the label key=value, in any project and location: found through the table's label
        rows where it has them, else by reading every row's labels."""
        table, labels = self.row, getattr(self.row, "labels_row", None)
        if labels is None:
            query = select(table).where(table.labels[key].as_string() == value)
        else:
            query = select(table).join(labels, labels.job_id == table.id)
            query = query.where(labels.key == key, labels.value == value)
        with self.db.session() as session:
            return list(session.scalars(query))


__all__ = [
    "Named",
    "NewestFirstRows",
    "by_offset",
    "filtered",
    "in_location",
    "labelled_in_location",
    "newest_first",
]
