"""What the three job kinds' lists share: the AIP-160 filter over a job table (page sizes, tokens and
readMask are kernel/listing.py's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import ColumnElement

from trainworks.jobs.enums import JobState
from trainworks.kernel.listing import table_filter

STATE_NAMES = {s.name: int(s) for s in JobState}


def job_filter(
    table: Any,
    filter_text: str,
    state_names: Mapping[str, int] = STATE_NAMES,
    extra: Mapping[str, Any] | None = None,
) -> ColumnElement[bool] | None:
    """A jobs list filter (AIP-160) as SQL over a job table's columns; a bad one is INVALID_ARGUMENT.
    `state_names`: the kind's state enum by name; `extra`: the kind's own filterable fields."""
    return table_filter(table, filter_text, state_names, extra)
