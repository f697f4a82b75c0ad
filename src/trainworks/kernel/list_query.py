"""What a List request asks beyond its parent (ListQuery), its `orderBy` as SQL (order_terms), and the rows
a page in that order reads (OrderedSlice). Page sizes, tokens and readMask are kernel/listing.py's."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVarTuple

from sqlalchemy import ColumnElement, Select

from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.rows import by_offset
from trainworks.kernel.wire_errors import snake

Ts = TypeVarTuple("Ts")


@dataclass(frozen=True)
class ListQuery:
    """A List request's query parameters (AIP-132), as kernel/routes.py's LIST_QUERY reads them."""

    page_size: int = 0  # 0: the default size
    page_token: str = ""
    filter: str = ""  # AIP-160
    order_by: str = ""
    read_mask: str = ""


@dataclass(frozen=True)
class OrderedSlice:
    """The rows of a page in a caller-chosen order: those passing `where`, in `order`, from `offset` on, at
    most `limit` of them."""

    where: ColumnElement[bool] | None
    order: Sequence[Any]
    offset: int
    limit: int

    def narrow(self, query: Select[*Ts], tiebreak: Any) -> Select[*Ts]:
        """`query` narrowed to these rows, in `order` then by `tiebreak`."""
        return by_offset(query, self.where, self.order, tiebreak, self.offset, self.limit)


def order_terms(order_by: str, columns: Mapping[str, Any], message: Callable[[str], str]) -> list[Any]:
    """`orderBy` as SQL order terms: comma-separated fields (`columns` by snake_case name), each optionally
    followed by `asc` or `desc`. Any other part is INVALID_ARGUMENT on order_by, described by `message(part)`
    (each kind words its own)."""
    out: list[Any] = []
    for part in (p.strip() for p in order_by.split(",")):
        if not part:
            continue
        words = part.split()
        column = columns.get(snake(words[0]))
        direction = words[1].lower() if len(words) > 1 else "asc"
        if column is None or len(words) > 2 or direction not in ("asc", "desc"):
            raise invalid_argument([FieldViolation("order_by", message(part))])
        out.append(column.desc() if direction == "desc" else column.asc())
    return out


__all__ = ["ListQuery", "OrderedSlice", "order_terms"]
