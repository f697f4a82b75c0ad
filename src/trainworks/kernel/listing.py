"""What every list shares: page sizes, page tokens, readMask, and its AIP-160 filter as SQL (the filter
language is kernel/filtering.py's; a job list's fields are jobs/listing.py's)."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement

from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.filtering import FilterColumns, FilterError, compile_filter
from trainworks.kernel.wire import format_timestamp, parse_timestamp
from trainworks.kernel.wire_errors import snake

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


def page_size(requested: int) -> int:
    if requested < 0:
        raise invalid_argument([FieldViolation("page_size", "must not be negative")])
    return DEFAULT_PAGE_SIZE if requested == 0 else min(requested, MAX_PAGE_SIZE)


def list_filter(
    filter_text: str, columns: FilterColumns, state_names: Mapping[str, int]
) -> ColumnElement[bool] | None:
    """A list's filter (AIP-160) as SQL over `columns`, None when blank; a bad one is INVALID_ARGUMENT.
    `state_names`: the resource's state enum by name."""
    try:
        return compile_filter(filter_text, columns, state_names)
    except FilterError as exc:
        raise invalid_argument([FieldViolation("filter", str(exc))]) from None


def table_filter(
    table: Any,
    filter_text: str,
    state_names: Mapping[str, int],
    extra: Mapping[str, Any] | None = None,
) -> ColumnElement[bool] | None:
    """`list_filter` over a table's display_name, state, create_time and labels columns; `extra`: the
    resource's own filterable fields."""
    columns = FilterColumns(
        display_name=table.display_name,
        state=table.state,
        create_time=table.create_time,
        labels=table.labels,
        extra=dict(extra or {}),
    )
    return list_filter(filter_text, columns, state_names)


def fingerprint(filter_text: str) -> str:
    """Ties a page token to its filter."""
    return hashlib.sha256(filter_text.strip().encode()).hexdigest()[:16]


def page_token(created: datetime, job_id: int, filter_fingerprint: str) -> str:
    # SQLite hands back naive datetimes (UTC): format_timestamp always writes an explicit zone.
    raw = json.dumps({"t": format_timestamp(created), "i": job_id, "f": filter_fingerprint})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def read_page_token(token: str, filter_fingerprint: str) -> tuple[datetime, int]:
    """The (create_time, id) after which the next page starts."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        created, job_id, fp = parse_timestamp(data["t"]), int(data["i"]), data["f"]
        if not 0 <= job_id < 2**63:
            raise ValueError("id out of range")
    except (ValueError, KeyError, TypeError, OverflowError):
        raise invalid_argument([FieldViolation("page_token", "invalid page token")]) from None
    if fp != filter_fingerprint:
        raise invalid_argument(
            [FieldViolation("page_token", "the page token was issued for a different filter")]
        )
    return created, job_id


def offset_page_token(offset: int, filter_fingerprint: str) -> str:
    """Page token of a list sorted by orderBy: the offset of the next page."""
    return base64.urlsafe_b64encode(json.dumps({"o": offset, "f": filter_fingerprint}).encode()).decode()


def read_offset_page_token(token: str, filter_fingerprint: str, *, bound: int | None, issued_for: str) -> int:
    """The offset an offset_page_token carries; `bound` (exclusive) caps it, None leaves it unbounded.
    `issued_for` names what the fingerprint covers, for the mismatch message."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        offset, fp = int(data["o"]), data["f"]
        if offset < 0 or (bound is not None and offset >= bound):
            raise ValueError("offset out of range")
    except (ValueError, KeyError, TypeError, OverflowError):  # OverflowError: int(Infinity)
        raise invalid_argument([FieldViolation("page_token", "invalid page token")]) from None
    if fp != filter_fingerprint:
        raise invalid_argument(
            [FieldViolation("page_token", f"the page token was issued for a different {issued_for}")]
        )
    return offset


def apply_read_mask(resource: dict[str, Any], read_mask: str) -> dict[str, Any]:
    if not read_mask:
        return resource
    wanted = {snake(p.strip().split(".")[0]) for p in read_mask.split(",") if p.strip()}
    return {k: v for k, v in resource.items() if snake(k) in wanted}


def id_page_token(last_id: str) -> str:
    """Page token of resources listed in ID order (client-chosen IDs): the last ID of the page."""
    return base64.urlsafe_b64encode(last_id.encode()).decode()


def read_id_page_token(token: str, max_length: int) -> str:
    try:
        value = base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        value = ""
    if not value or len(value) > max_length:
        raise invalid_argument([FieldViolation("page_token", "invalid page token")])
    return value
