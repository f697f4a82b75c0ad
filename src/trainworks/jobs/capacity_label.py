"""The job label that carries `trainworks submit`'s capacity walk: written by the submitter, shown in every
job's summary. Its format is here once, below both."""

from __future__ import annotations

import re
from collections.abc import Sequence

#: The job label that carries the walk's attempts (the whole ledger is staged beside the run's config).
LEDGER_LABEL = "trainworks-capacity"


def capacity_label(attempts: Sequence[tuple[str, str]]) -> str:
    """(region, outcome) attempts as one label value (`us-east1_stockout__us-central1_submitted`), cut to 63
    characters from the front so the latest attempts stay."""
    parts = [f"{_label_safe(region)}_{outcome}" for region, outcome in attempts]
    text = "__".join(parts)
    while len(text) > 63 and len(parts) > 1:
        parts = parts[1:]
        text = "__".join(["more", *parts])
    return text[:63]


def parse_capacity_label(value: str) -> list[tuple[str, str]]:
    """(region, outcome) pairs back from :func:`capacity_label`."""
    out = []
    for part in value.split("__"):
        region, _, outcome = part.rpartition("_")
        if region:
            out.append((region, outcome))
    return out


def _label_safe(text: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", text.lower())


__all__ = ["LEDGER_LABEL", "capacity_label", "parse_capacity_label"]
