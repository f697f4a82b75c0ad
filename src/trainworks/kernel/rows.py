"""Query pieces every store's list pages share, for tables keyed by (project number, location, ...); and what
a new row takes from its request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, TypeVarTuple

from sqlalchemy import ColumnElement, Select, and_, or_, select

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
    query: Select[*Ts], table: Any, after: tuple[datetime, int] | None, limit: int
) -> Select[*Ts]:
    """A page newest first; `after` is the (create_time, id) of the last row of the previous page."""
    if after is not None:
        created, row_id = after
        query = query.where(
            or_(table.create_time < created, and_(table.create_time == created, table.id < row_id))
        )
    return query.order_by(table.create_time.desc(), table.id.desc()).limit(limit)


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


class NewestFirstRows(Generic[R]):
    """A store of one table (`row`: a mapped class with id, project_number, location and create_time) whose
    lists page newest first."""

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
        """Newest first; `after` is the (create_time, id) of the last row of the previous page."""
        query = newest_first(in_location(self.row, project_number, location, where), self.row, after, limit)
        with self.db.session() as session:
            return list(session.scalars(query))


__all__ = ["Named", "NewestFirstRows", "by_offset", "filtered", "in_location", "newest_first"]
