"""The Logging query language (the subset gcloud, the console and the client libraries send), evaluated on
each entry, and what a query says about where its entries can be.

Grammar: kernel/filtering.py's AIP-160 parser (AND, OR, NOT and `-`, parentheses, implicit AND; OR binds
tighter than AND, as in Logging). Comparisons (`=`, `!=`, `<`, `<=`, `>`, `>=`, `:`) on the LogEntry as
wire.py writes it:

- `timestamp` (and `receiveTimestamp`): RFC 3339 with up to nine fractional digits and `Z` or an offset,
  compared at the nanosecond;
- `severity`: a LogSeverity name or number, compared by rank (`severity>=WARNING`);
- every other field by its path in the entry: `insertId`, `logName`, `textPayload`, `resource.type`,
  `resource.labels.KEY`, `labels.KEY` (quote keys with dots: `labels."ml.googleapis.com/trial_id"`),
  `jsonPayload.a.b`, `split.uid`... Strings compare without regard to case, as Logging's do; `:` is Logging's
  "has": a substring, without regard to case (`:*`: the field is present); a number in jsonPayload compares
  as a number with a numeric value; `NULL_VALUE` is JSON null; in a list, any element may match.

A field the entry does not have (an unknown one, a jsonPayload key it lacks) makes every comparison on it
false, `!=` included, as Logging does: `NOT a=b` and `a!=b` differ on entries without `a`.

Beside the predicate, `LogQuery` tells what holds for every entry the query matches, so the service reads
only the right jobs from the right place: the values a field must equal (`resource.labels.job_id`), and the
time range (from comparisons on `timestamp`, through AND, OR and NOT; gcloud's paging bound
`((timestamp="T" AND insertId>"I") OR timestamp>"T")` gives `since T`).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainworks.kernel.errors import ApiError, FieldViolation, invalid_argument
from trainworks.kernel.filtering import And, Comparison, FilterError, Node, Not, Or, Value, parse_filter
from trainworks.kinds.log_entries.store import Entry
from trainworks.kinds.log_entries.wire import SEVERITIES, severity_name, to_log_entry

#: Logging's limit on a query's length.
MAX_FILTER_LENGTH = 20_000

JOB_ID = ("resource", "labels", "job_id")
TASK_NAME = ("resource", "labels", "task_name")
RESOURCE_TYPE = ("resource", "type")

_TIME_FIELDS = ("timestamp", "receiveTimestamp")
_ORDERED = ("<", "<=", ">", ">=")
_NULL = "NULL_VALUE"
# The proto field names Logging also accepts for the LogEntry's own fields.
_SNAKE = {
    "insert_id": "insertId",
    "log_name": "logName",
    "text_payload": "textPayload",
    "json_payload": "jsonPayload",
    "receive_timestamp": "receiveTimestamp",
}
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})"  # a date alone is its midnight in UTC
    r"(?:[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?(?:([Zz])|([+-])([0-9]{2}):?([0-9]{2})))?"
)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class EntryView:
    """An entry as the query sees it: its LogEntry JSON, made once (and answered as is when it matches)."""

    __slots__ = ("entry", "_json")

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self._json: dict[str, Any] | None = None

    def json(self) -> dict[str, Any]:
        if self._json is None:
            self._json = to_log_entry(self.entry)
        return self._json

    def severity(self) -> int:
        return SEVERITIES.get(self.json().get("severity", "DEFAULT"), 0)


Predicate = Callable[[EntryView], bool]


def _always(_view: EntryView) -> bool:
    return True


@dataclass(frozen=True)
class LogQuery:
    """A parsed query: `matches` an entry; `allowed` values of a field and the time range (`since_ns`,
    `until_ns`, inclusive; None: open) hold for every entry it matches."""

    text: str
    node: Node | None  # None: the empty query, which matches everything
    matches: Predicate
    since_ns: int | None
    until_ns: int | None

    def allowed(self, path: tuple[str, ...]) -> frozenset[str] | None:
        """The values (case-folded) one of which the field at `path` equals in every entry the query
        matches; None when the query does not say."""
        return None if self.node is None else _allowed(self.node, path)

    @property
    def empty_range(self) -> bool:
        return self.since_ns is not None and self.until_ns is not None and self.since_ns > self.until_ns


def parse_query(text: str) -> LogQuery:
    """The query of a `filter`; INVALID_ARGUMENT naming the problem and where it is."""
    if len(text) > MAX_FILTER_LENGTH:
        raise _error(f"the filter is {len(text)} characters long; the limit is {MAX_FILTER_LENGTH}")
    if not text.strip():
        return LogQuery(text, None, _always, None, None)
    try:
        node = parse_filter(text)
        predicate = _compile(node)
        since, until = _bounds(node, False)
    except FilterError as exc:
        raise _error(exc.reason, text, exc.position) from None
    return LogQuery(text, node, predicate, since, until)


def _error(reason: str, text: str = "", position: int | None = None) -> ApiError:
    where = ""
    if position is not None:
        line = text.count("\n", 0, position) + 1
        column = position - (text.rfind("\n", 0, position) + 1) + 1
        where = f" at line {line}, column {column}"
    message = f"Unparseable filter: {reason}{where}"
    return invalid_argument([FieldViolation("filter", message)], message)


# ------------------------------------------------------------------------------------------ values
def parse_time(value: Value) -> int:
    """An RFC 3339 timestamp (or a date: its midnight in UTC) as nanoseconds since the epoch."""
    match = _RFC3339.fullmatch(value.text.strip())
    if match is None:
        raise FilterError(
            f'invalid timestamp {value.text[:80]!r}: expected RFC 3339 such as "2024-05-18T00:00:00Z"',
            value.position,
        )
    year, month, day, hour, minute, second, fraction, _zulu, sign, off_h, off_m = match.groups()
    try:
        if not (int(year) >= 1 and 1 <= int(month) <= 12):
            raise ValueError("no such date")
        if not 1 <= int(day) <= calendar.monthrange(int(year), int(month))[1]:
            raise ValueError("no such date")
        if int(hour or 0) > 23 or int(minute or 0) > 59 or int(second or 0) > 60:
            raise ValueError("no such time")
        seconds = calendar.timegm(
            (int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0), 0, 0, 0)
        )
    except ValueError as exc:
        raise FilterError(f"invalid timestamp {value.text[:80]!r}: {exc}", value.position) from None
    if sign:
        offset = (int(off_h) * 60 + int(off_m)) * 60
        seconds -= offset if sign == "+" else -offset
    return seconds * 1_000_000_000 + int((fraction or "").ljust(9, "0"))


def _severity_value(value: Value) -> int:
    text = value.text.strip()
    if re.fullmatch(r"-?[0-9]{1,18}", text):
        return int(text)
    name = severity_name(text)
    if name is None or name != text.upper():  # names only: the aliases are what logging libraries write
        known = ", ".join(SEVERITIES)
        raise FilterError(f"invalid severity {value.text[:80]!r}: expected one of {known}", value.position)
    return SEVERITIES[name]


def _number(text: str) -> float | None:
    return float(text) if _NUMBER.fullmatch(text.strip()) else None


# --------------------------------------------------------------------------------------- compiling
def _field(node: Comparison) -> tuple[str, ...]:
    head, *rest = node.field
    return (_SNAKE.get(head, head), *rest)


def _compile(node: Node) -> Predicate:
    if isinstance(node, And):
        parts = [_compile(child) for child in node.operands]
        return lambda view: all(part(view) for part in parts)
    if isinstance(node, Or):
        parts = [_compile(child) for child in node.operands]
        return lambda view: any(part(view) for part in parts)
    if isinstance(node, Not):
        inner = _compile(node.operand)
        return lambda view: not inner(view)
    return _comparison(node)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: bool(a == b),
    "!=": lambda a, b: bool(a != b),
    "<": lambda a, b: bool(a < b),
    "<=": lambda a, b: bool(a <= b),
    ">": lambda a, b: bool(a > b),
    ">=": lambda a, b: bool(a >= b),
}


def _comparison(node: Comparison) -> Predicate:
    path = _field(node)
    op = node.op
    if path[0] in _TIME_FIELDS and len(path) == 1:
        if op == ":":
            raise FilterError(f"'{path[0]}' takes =, !=, <, <=, > or >=, not ':'", node.op_position)
        moment, compare = parse_time(node.value), _COMPARE[op]
        return lambda view: compare(view.entry.ns, moment)
    if path == ("severity",):
        if op == ":":
            raise FilterError("'severity' takes =, !=, <, <=, > or >=, not ':'", node.op_position)
        rank, compare = _severity_value(node.value), _COMPARE[op]
        return lambda view: compare(view.severity(), rank)
    test = _value_test(op, node.value)
    return lambda view: any(test(found) for found in _lookup(view.json(), path))


def _lookup(document: Any, path: tuple[str, ...]) -> list[Any]:
    """The values at `path` (a list holds several: any may match); none when the entry lacks the field."""
    found = [document]
    for key in path:
        step: list[Any] = []
        for value in found:
            if isinstance(value, list):
                value = [item.get(key) for item in value if isinstance(item, dict) and key in item]
                step.extend(value)
            elif isinstance(value, dict) and key in value:
                step.append(value[key])
        found = step
        if not found:
            return found
    flat: list[Any] = []
    for value in found:
        flat.extend(value if isinstance(value, list) else (value,))
    return flat


def _leaves(value: Any) -> list[str]:
    """Every key and scalar of a JSON value, as text (what `:` searches in an object)."""
    if isinstance(value, dict):
        out: list[str] = []
        for key, item in value.items():
            out.append(str(key))
            out.extend(_leaves(item))
        return out
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [] if value is None else [_text(value)]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _value_test(op: str, value: Value) -> Callable[[Any], bool]:
    """Whether a value found in the entry satisfies `op value`."""
    if not value.quoted and value.text == _NULL:
        if op == "=":
            return lambda found: found is None
        if op == "!=":
            return lambda found: found is not None
        raise FilterError(f"{_NULL} takes = or !=, not '{op}'", value.position)
    wanted = value.text.casefold()
    if op == ":":
        if wanted == "*" and not value.quoted:
            return lambda found: True
        return lambda found: any(wanted in leaf.casefold() for leaf in _leaves(found))
    number, compare = _number(value.text), _COMPARE[op]

    def test(found: Any) -> bool:
        if found is None or isinstance(found, dict | list):
            return False
        if number is not None and isinstance(found, int | float) and not isinstance(found, bool):
            return compare(found, number)
        return compare(_text(found).casefold(), wanted)

    return test


# --------------------------------------------------------------------------------- what holds for all
def _allowed(node: Node, path: tuple[str, ...]) -> frozenset[str] | None:
    if isinstance(node, Comparison):
        if node.op == "=" and _field(node) == path and (node.value.quoted or node.value.text != _NULL):
            return frozenset({node.value.text.casefold()})
        return None
    if isinstance(node, And):
        sets = [s for s in (_allowed(child, path) for child in node.operands) if s is not None]
        return frozenset.intersection(*sets) if sets else None
    if isinstance(node, Or):
        union: set[str] = set()
        for child in node.operands:
            found = _allowed(child, path)
            if found is None:
                return None
            union |= found
        return frozenset(union)
    return None  # NOT: every value but some


_Range = tuple[int | None, int | None]
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "=": "!=", "!=": "="}


def _bounds(node: Node, negated: bool) -> _Range:
    """The time range (inclusive nanoseconds) of every entry `node` (or its negation) matches."""
    if isinstance(node, Not):
        return _bounds(node.operand, not negated)
    if isinstance(node, And | Or):
        parts = [_bounds(child, negated) for child in node.operands]
        if isinstance(node, And) != negated:  # AND, or NOT of an OR: every part holds
            lows = [low for low, _ in parts if low is not None]
            highs = [high for _, high in parts if high is not None]
            return (max(lows) if lows else None, min(highs) if highs else None)
        # OR, or NOT of an AND: any part may hold
        low = None if any(p[0] is None for p in parts) else min(p[0] for p in parts if p[0] is not None)
        high = None if any(p[1] is None for p in parts) else max(p[1] for p in parts if p[1] is not None)
        return (low, high)
    path = _field(node)
    if len(path) != 1 or path[0] not in _TIME_FIELDS or node.op == ":":
        return (None, None)
    op = _NEGATED[node.op] if negated else node.op
    moment = parse_time(node.value)
    return {
        "=": (moment, moment),
        "<": (None, moment - 1),
        "<=": (None, moment),
        ">": (moment + 1, None),
        ">=": (moment, None),
    }.get(op, (None, None))
