"""What the three job kinds' lists share: the AIP-160 filter over a job table (page sizes, tokens and
readMask are kernel/listing.py's)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement

from trainworks.jobs.enums import JobState
from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.filtering import FilterColumns, FilterError, compile_filter

STATE_NAMES = {s.name: int(s) for s in JobState}


def job_filter(table: Any, filter_text: str) -> ColumnElement[bool] | None:
    """A jobs list filter (AIP-160) as SQL over a job table's columns; a bad one is INVALID_ARGUMENT."""
    try:
        return compile_filter(
            filter_text,
            FilterColumns(
                display_name=table.display_name,
                state=table.state,
                create_time=table.create_time,
                labels=table.labels,
            ),
            STATE_NAMES,
        )
    except FilterError as exc:
        raise invalid_argument([FieldViolation("filter", str(exc))]) from None
