"""Which rows of a dataset go to training, validation and test: the pure split logic of dataset exports.

Every split is deterministic (same data, same config: same assignment, in every run and process) and the
three sets are disjoint. Rows are addressed by their index in the stored dataset; each set lists its
indices in dataset order.

* fractionSplit: rows are put in a pseudo-random order, the SHA-256 of a fixed seed, the row's index and its
  content, and cut by the cumulative fractions (rounded, so with fractions summing to 1 every row is used).
  Rows past the sum of the fractions are dropped. All three fractions unset (0) means 0.8 / 0.1 / 0.1.
* timestampSplit: rows ordered by the RFC 3339 value of `key` (ties by index); the earliest go to training,
  then validation, then test. A value that is not RFC 3339 is an error naming the row.
* stratifiedSplit: each class (distinct value of `key`) is ordered as in fractionSplit and cut by the
  fractions on its own, so every class keeps the proportions (up to rounding within the class).
* predefinedSplit: the value of `key` names the set: `training`, `validation` or `test` (any case, spaces
  ignored); rows with another value or none are left out, as Vertex AI does.
* filterSplit: three filters; a row goes to the first set (training, validation, test order) whose filter it
  matches, and to none when it matches no filter. A filter is AIP-160 (`AND`, `OR`, `NOT`/`-`, parentheses)
  over the row's fields, with `=`, `!=`, `:` (glob, `*` any run of characters; `field:*` means present) and
  `<`, `<=`, `>`, `>=` (numbers compare as numbers, other values as text). `-` alone matches nothing and `*`
  alone matches everything. Fields: for a tabular row, the column name; for a JSONL item, `labels.KEY`
  (the item's `dataItemResourceLabels`, e.g. `labels.aiplatform.googleapis.com/ml_use=training`), `ml_use`
  (short for that label) or a dotted path into the item's JSON (`classificationAnnotation.displayName`).
  Keys of keyed splits on JSONL items resolve the same way, and a bare label key names that label.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from trainworks.kernel.filtering import And, Comparison, FilterError, Node, Not, Or, parse_filter
from trainworks.kernel.wire import parse_timestamp

SETS = ("training", "validation", "test")
DEFAULT_FRACTIONS = (0.8, 0.1, 0.1)
EPSILON = 1e-9  # fractions summing to 1 in floating point may exceed it by a rounding error
SEED = b"trainworks/dataset-split/v1"
ML_USE_LABEL = "aiplatform.googleapis.com/ml_use"
Assignment = dict[str, list[int]]


class SplitError(ValueError):
    """The data cannot be split as asked (e.g. a timestamp value that is not RFC 3339); `field` is the
    config field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


# ------------------------------------------------------------------ records
class Records(Protocol):
    """The rows of a dataset as the splits see them."""

    def __len__(self) -> int: ...

    def value(self, index: int, path: str) -> str | None:
        """The value of a field (a column, or a field path of an item) as text; None when absent."""

    def fingerprint(self, index: int) -> bytes:
        """The row's content, for the pseudo-random order."""


@dataclass(frozen=True)
class TableRows:
    """Tabular rows: a header and rows of strings."""

    columns: Sequence[str]
    rows: Sequence[Sequence[str]]
    positions: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "positions", {name: i for i, name in enumerate(self.columns)})

    def __len__(self) -> int:
        return len(self.rows)

    def value(self, index: int, path: str) -> str | None:
        position = self.positions.get(path)
        return None if position is None else self.rows[index][position]

    def fingerprint(self, index: int) -> bytes:
        return json.dumps(list(self.rows[index]), ensure_ascii=False).encode()


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def item_labels(item: dict[str, Any]) -> dict[str, Any]:
    labels = item.get("dataItemResourceLabels") or item.get("data_item_resource_labels") or {}
    return labels if isinstance(labels, dict) else {}


def item_value(item: dict[str, Any], path: str) -> str | None:
    """A field of a JSONL item by the rules of the module docstring."""
    labels = item_labels(item)
    if path.startswith("labels."):
        return _text(labels.get(path[len("labels.") :]))
    if path == "ml_use":
        return _text(labels.get(ML_USE_LABEL))
    current: Any = item
    for part in path.split("."):
        if not isinstance(current, dict) or part not in current:
            return _text(labels.get(path))  # a bare label key
        current = current[part]
    return _text(current)


@dataclass(frozen=True)
class Items:
    """Non-tabular items: one JSON object each."""

    items: Sequence[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.items)

    def value(self, index: int, path: str) -> str | None:
        return item_value(self.items[index], path)

    def fingerprint(self, index: int) -> bytes:
        return json.dumps(self.items[index], sort_keys=True, ensure_ascii=False).encode()


# ------------------------------------------------------------------ fractions
@dataclass(frozen=True)
class Fractions:
    training: float
    validation: float
    test: float

    @classmethod
    def of(cls, training: float, validation: float, test: float) -> Fractions:
        """The fractions as configured; all unset (0) means the default 0.8 / 0.1 / 0.1."""
        if training == validation == test == 0:
            return cls(*DEFAULT_FRACTIONS)
        return cls(training, validation, test)

    def boundaries(self, count: int) -> tuple[int, int, int]:
        """Ends of the training, validation and test slices of `count` ordered rows (cumulative rounding,
        so the slices tile the rows exactly when the fractions sum to 1)."""
        ends: list[int] = []
        total = 0.0
        for fraction in (self.training, self.validation, self.test):
            total += fraction
            end = min(count, round(count * min(total, 1.0)))
            ends.append(max(end, ends[-1] if ends else 0))
        return ends[0], ends[1], ends[2]


def fraction_problems(training: float, validation: float, test: float) -> list[tuple[str, str]]:
    """(field, description) for fractions that are not usable: negative, non-finite or summing over 1."""
    out: list[tuple[str, str]] = []
    for name, value in (("training_fraction", training), ("validation_fraction", validation)):
        out += _one_fraction(name, value)
    out += _one_fraction("test_fraction", test)
    if not out and training + validation + test > 1 + EPSILON:
        out.append(
            (
                "training_fraction",
                f"the fractions sum to {training + validation + test:g}; their sum must not exceed 1",
            )
        )
    return out


def _one_fraction(name: str, value: float) -> list[tuple[str, str]]:
    if not math.isfinite(value):
        return [(name, "must be a finite number")]
    if not 0 <= value <= 1:
        return [(name, f"must be between 0 and 1, got {value:g}")]
    return []


# ------------------------------------------------------------------ the splits
def pseudo_random_order(records: Records, indices: Sequence[int] | None = None) -> list[int]:
    """A deterministic shuffle: by SHA-256 of the seed, the row's index and its content."""
    chosen = range(len(records)) if indices is None else indices

    def rank(i: int) -> bytes:
        return hashlib.sha256(SEED + i.to_bytes(8, "big") + records.fingerprint(i)).digest()

    return sorted(chosen, key=rank)


def cut(order: Sequence[int], fractions: Fractions) -> Assignment:
    first, second, third = fractions.boundaries(len(order))
    return {
        "training": sorted(order[:first]),
        "validation": sorted(order[first:second]),
        "test": sorted(order[second:third]),
    }


def fraction_split(records: Records, fractions: Fractions) -> Assignment:
    return cut(pseudo_random_order(records), fractions)


def timestamp_split(records: Records, key: str, fractions: Fractions, field: str) -> Assignment:
    times: list[tuple[datetime, int]] = []
    for i in range(len(records)):
        raw = records.value(i, key)
        if raw is None or not raw.strip():
            raise SplitError(field, f"row {i + 1} has no value for the timestamp key {key!r}")
        try:
            times.append((parse_timestamp(raw.strip()), i))
        except ValueError:
            raise SplitError(
                field, f"row {i + 1}: {raw[:60]!r} in {key!r} is not an RFC 3339 timestamp"
            ) from None
    return cut([i for _, i in sorted(times)], fractions)


def stratified_split(records: Records, key: str, fractions: Fractions) -> Assignment:
    classes: dict[str, list[int]] = {}
    for i in range(len(records)):
        classes.setdefault(records.value(i, key) or "", []).append(i)
    out: Assignment = {name: [] for name in SETS}
    for members in classes.values():
        for name, indices in cut(pseudo_random_order(records, members), fractions).items():
            out[name] += indices
    return {name: sorted(indices) for name, indices in out.items()}


def predefined_split(records: Records, key: str) -> Assignment:
    out: Assignment = {name: [] for name in SETS}
    for i in range(len(records)):
        value = (records.value(i, key) or "").strip().lower()
        if value in out:
            out[value].append(i)
    return out


def filter_split(records: Records, filters: Sequence[Callable[[Records, int], bool]]) -> Assignment:
    out: Assignment = {name: [] for name in SETS}
    for i in range(len(records)):
        for name, matches in zip(SETS, filters, strict=True):
            if matches(records, i):
                out[name].append(i)
                break
    return out


# ------------------------------------------------------------------ record filters
RecordFilter = Callable[[Records, int], bool]


def compile_record_filter(text: str) -> RecordFilter:
    """A filterSplit filter as a predicate over one record; a bad filter raises FilterError."""
    stripped = text.strip()
    if stripped == "-":
        return lambda records, i: False
    if stripped == "*":
        return lambda records, i: True
    node = parse_filter(stripped)
    return lambda records, i: _matches(node, records, i)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _compare(value: str, op: str, wanted: str) -> bool:
    left, right = _number(value), _number(wanted)
    if left is not None and right is not None:
        pair: tuple[Any, Any] = (left, right)
    else:
        pair = (value, wanted)
    a, b = pair
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _matches(node: Node, records: Records, i: int) -> bool:
    if isinstance(node, And):
        return all(_matches(child, records, i) for child in node.operands)
    if isinstance(node, Or):
        return any(_matches(child, records, i) for child in node.operands)
    if isinstance(node, Not):
        return not _matches(node.operand, records, i)
    assert isinstance(node, Comparison)
    value = records.value(i, ".".join(node.field))
    wanted = node.value.text
    if node.op == "!=":
        return value is None or not _equal(value, wanted)
    if value is None:
        return False
    if node.op == "=":
        return _equal(value, wanted)
    if node.op == ":":
        return wanted == "*" or fnmatch.fnmatchcase(value, _glob(wanted))
    return _compare(value, node.op, wanted)


def _equal(value: str, wanted: str) -> bool:
    if value == wanted:
        return True
    left, right = _number(value), _number(wanted)
    return left is not None and left == right


def _glob(pattern: str) -> str:
    # Only `*` is a wildcard: escape fnmatch's `?` and `[`.
    return "".join("[" + ch + "]" if ch in "?[" else ch for ch in pattern)


__all__ = [
    "SETS",
    "Assignment",
    "FilterError",
    "Fractions",
    "Items",
    "Records",
    "SplitError",
    "TableRows",
    "compile_record_filter",
    "cut",
    "filter_split",
    "fraction_problems",
    "fraction_split",
    "item_value",
    "predefined_split",
    "stratified_split",
    "timestamp_split",
]
