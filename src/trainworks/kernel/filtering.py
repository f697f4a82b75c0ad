"""AIP-160 list filters (the subset Vertex AI accepts for ``customJobs.list``) compiled to SQLAlchemy.

Supported fields::

    display_name / displayName   =  !=  :   (``:`` is a glob: ``*`` matches any run of characters)
    state                        =  !=      (enum name, quoted or bare, or its integer value)
    create_time / createTime     =  !=  <  <=  >  >=   (RFC 3339 timestamp, e.g. "2021-05-18T00:00:00Z")
    labels.KEY                   =  !=  :   (``labels.KEY:*`` and ``labels:KEY`` test that KEY exists)
    <extra string fields>        =  !=  :

Terms combine with ``AND``, ``OR``, ``NOT`` / ``-`` and parentheses; juxtaposition is an implicit AND.
As AIP-160 specifies, ``OR`` binds tighter than ``AND``: ``a AND b OR c`` means ``a AND (b OR c)``.

Every comparison compiles to a two-valued SQL expression (never NULL), so ``NOT`` behaves as users expect
for rows whose column is NULL or that lack a label.  The output uses generic SQLAlchemy constructs (JSON
indexing, ``LIKE ... ESCAPE``; ``GLOB`` on SQLite, whose LIKE ignores case), so the same expression runs, and
matches the same rows, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, TypeAlias

from sqlalchemy import SQLColumnExpression, and_, false, not_, or_, true
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import operators
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import BooleanClauseList, ColumnElement
from sqlalchemy.sql.operators import OperatorType
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import Boolean

__all__ = [
    "And",
    "Comparison",
    "FilterColumns",
    "FilterError",
    "LabelEquals",
    "Node",
    "Not",
    "Or",
    "Value",
    "compile_filter",
    "parse_filter",
    "required_label",
]


class FilterError(ValueError):
    """An invalid filter string; ``position`` is the 0-based offset of the problem, when known."""

    def __init__(self, reason: str, position: int | None = None) -> None:
        self.reason = reason
        self.position = position
        message = reason if position is None else f"invalid filter at column {position + 1}: {reason}"
        super().__init__(message)


# --------------------------------------------------------------------------------------------- AST


@dataclass(frozen=True)
class Value:
    """The right-hand side of a comparison; ``quoted`` matters because ``*`` is only special in globs."""

    text: str
    quoted: bool
    position: int


@dataclass(frozen=True)
class Comparison:
    """``field op value``; ``field`` is the dotted path, e.g. ``("labels", "a key")``."""

    field: tuple[str, ...]
    op: str
    value: Value
    position: int
    op_position: int


@dataclass(frozen=True)
class And:
    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    operand: Node


Node: TypeAlias = Comparison | And | Or | Not


# ------------------------------------------------------------------------------------------- lexer


@dataclass(frozen=True)
class _Token:
    kind: str  # one of the _K* constants below
    text: str  # decoded text (string literals are unescaped)
    start: int
    end: int


_KLPAREN, _KRPAREN, _KOP, _KDOT, _KMINUS, _KSTRING, _KTEXT = "(", ")", "op", ".", "-", "string", "text"
_KAND, _KOR, _KNOT, _KEOF = "AND", "OR", "NOT", "eof"
_KEYWORDS = {"AND": _KAND, "OR": _KOR, "NOT": _KNOT}
_OPERATORS = ("<=", ">=", "!=", "=", "<", ">", ":")  # two-character operators first
# A bare token ends at whitespace or at any character that starts another token.
_TEXT_STOP = set("()<>=!:.\"'")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t"}
_MAX_DEPTH = 64  # nested parentheses / NOTs
_MAX_COMPARISONS = 200  # keeps the SQL within every database's expression limits


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "()":
            tokens.append(_Token(ch, ch, i, i + 1))
            i += 1
        elif ch == ".":
            tokens.append(_Token(_KDOT, ch, i, i + 1))
            i += 1
        elif ch == "-":
            # Only reached at the start of a token ('-' inside a bare word is part of it): NOT, or a sign.
            tokens.append(_Token(_KMINUS, ch, i, i + 1))
            i += 1
        elif ch in "\"'":
            tokens.append(_read_string(text, i))
            i = tokens[-1].end
        elif ch in "<>=!:":
            op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
            if op is None:
                raise FilterError("unexpected '!' (did you mean '!='?)", i)
            tokens.append(_Token(_KOP, op, i, i + len(op)))
            i += len(op)
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in _TEXT_STOP:
                j += 1
            word = text[i:j]
            tokens.append(_Token(_KEYWORDS.get(word, _KTEXT), word, i, j))
            i = j
    tokens.append(_Token(_KEOF, "", n, n))
    return tokens


def _read_string(text: str, start: int) -> _Token:
    quote = text[start]
    out: list[str] = []
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == quote:
            return _Token(_KSTRING, "".join(out), start, i + 1)
        if ch == "\\" and i + 1 < len(text):
            # \n, \r, \t are control characters; any other escaped character stands for itself.
            out.append(_ESCAPES.get(text[i + 1], text[i + 1]))
            i += 2
            continue
        out.append(ch)
        i += 1
    raise FilterError(f"unterminated string: the {quote} opened here is never closed", start)


# ------------------------------------------------------------------------------------------ parser


def _describe(token: _Token) -> str:
    if token.kind == _KEOF:
        return "end of filter"
    if token.kind in (_KAND, _KOR, _KNOT):
        return f"keyword {token.text}"
    if token.kind == _KSTRING:
        return "a quoted string"
    return f"'{token.text}'"


class _Parser:
    """Recursive descent over the AIP-160 EBNF (https://google.aip.dev/assets/misc/ebnf-filtering.txt).

    expression = sequence {AND sequence};  sequence = factor {factor};  factor = term {OR term};
    term = [NOT | '-'] simple;  simple = restriction | '(' expression ')';  restriction = member op arg.
    """

    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0
        self.comparisons = 0

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def advance(self) -> _Token:
        token = self.tokens[self.i]
        if token.kind != _KEOF:
            self.i += 1
        return token

    def parse(self) -> Node:
        if self.peek().kind == _KEOF:
            raise FilterError("empty filter", 0)
        node = self.expression()
        token = self.peek()
        if token.kind == _KRPAREN:
            raise FilterError("unbalanced parentheses: this ')' has no matching '('", token.start)
        if token.kind != _KEOF:
            raise FilterError(f"unexpected {_describe(token)}", token.start)
        return node

    def expression(self) -> Node:
        parts = [self.sequence()]
        while self.peek().kind == _KAND:
            keyword = self.advance()
            parts.append(self.sequence(after=keyword))
        return _join(And, parts)

    def sequence(self, after: _Token | None = None) -> Node:
        parts = [self.factor(after)]
        # Implicit AND: another term simply follows.
        while self.peek().kind in (_KTEXT, _KSTRING, _KLPAREN, _KNOT, _KMINUS):
            parts.append(self.factor())
        return _join(And, parts)

    def factor(self, after: _Token | None = None) -> Node:
        parts = [self.term(after)]
        while self.peek().kind == _KOR:
            keyword = self.advance()
            parts.append(self.term(after=keyword))
        return _join(Or, parts)

    def term(self, after: _Token | None = None) -> Node:
        token = self.peek()
        if token.kind in (_KNOT, _KMINUS, _KLPAREN):
            # Bound the recursion so hostile input gets a FilterError rather than a RecursionError.
            self.depth += 1
            if self.depth > _MAX_DEPTH:
                raise FilterError(f"filter nests more than {_MAX_DEPTH} levels deep", token.start)
            try:
                return self.nested(token)
            finally:
                self.depth -= 1
        if token.kind == _KTEXT:
            return self.restriction()
        where = f" after {after.text}" if after is not None else ""
        if token.kind == _KOP:
            raise FilterError(f"comparison '{token.text}' has no field on its left", token.start)
        if token.kind == _KRPAREN and after is None:
            raise FilterError("unbalanced parentheses: this ')' has no matching '('", token.start)
        raise FilterError(f"expected a comparison{where}, found {_describe(token)}", token.start)

    def nested(self, token: _Token) -> Node:
        """NOT term, - term, or ( expression )."""
        self.advance()
        if token.kind in (_KNOT, _KMINUS):
            return Not(self.term(after=token))
        if self.peek().kind == _KRPAREN:
            raise FilterError("empty parentheses", token.start)
        node = self.expression()
        found = self.peek()
        if found.kind == _KEOF:
            raise FilterError("unbalanced parentheses: this '(' is never closed", token.start)
        if found.kind != _KRPAREN:
            raise FilterError(
                f"expected ')' to close the '(' at column {token.start + 1}, found {_describe(found)}",
                found.start,
            )
        self.advance()
        return node

    def restriction(self) -> Comparison:
        first = self.advance()
        self.comparisons += 1
        if self.comparisons > _MAX_COMPARISONS:
            raise FilterError(f"a filter may hold at most {_MAX_COMPARISONS} comparisons", first.start)
        path = [first.text]
        while self.peek().kind == _KDOT:
            dot = self.advance()
            segment = self.peek()
            if segment.kind not in (_KTEXT, _KSTRING):
                raise FilterError(f"expected a field name after '.', found {_describe(segment)}", dot.end)
            path.append(self.advance().text)
        op = self.peek()
        if op.kind != _KOP:
            if len(path) == 1 and first.text.upper() in _KEYWORDS:
                raise FilterError(f"AND, OR and NOT must be upper case: {first.text.upper()}", first.start)
            name = ".".join(path)
            hint = ""
            if op.kind == _KTEXT and op.text.upper() in _KEYWORDS:
                hint = f" (AND, OR and NOT must be upper case: {op.text.upper()})"
            elif op.kind == _KEOF or op.kind in (_KAND, _KOR, _KRPAREN):
                hint = " (bare values are not supported; write field=value)"
            raise FilterError(
                f"expected a comparison operator (=, !=, <, <=, >, >=, :) after '{name}', "
                f"found {_describe(op)}{hint}",
                op.start,
            )
        self.advance()
        value = self.value(op)
        return Comparison(tuple(path), op.text, value, first.start, op.start)

    def value(self, op: _Token) -> Value:
        token = self.peek()
        if token.kind == _KSTRING:
            self.advance()
            result = Value(token.text, True, token.start)
        elif token.kind in (_KTEXT, _KMINUS, _KDOT):
            # A bare value is every adjacent word, '.' and '-' piece: -1, 1.5, job.v2.
            pieces = [self.advance()]
            while self.peek().kind in (_KTEXT, _KMINUS, _KDOT) and self.peek().start == pieces[-1].end:
                pieces.append(self.advance())
            result = Value("".join(p.text for p in pieces), False, token.start)
        else:
            raise FilterError(
                f"empty comparison: '{op.text}' has no value (found {_describe(token)})", op.start
            )
        after = self.peek()
        if after.kind == _KOP and after.start == self.tokens[self.i - 1].end:
            # Typically an unquoted timestamp such as 2021-05-18T00:00:00Z.
            raise FilterError(
                f"unexpected '{after.text}' inside a value; quote values that contain it, "
                'e.g. "2021-05-18T00:00:00Z"',
                after.start,
            )
        return result


def _join(kind: type[And] | type[Or], parts: list[Node]) -> Node:
    if len(parts) == 1:
        return parts[0]
    flat: list[Node] = []
    for part in parts:
        # a AND (b AND c) is the same as a AND b AND c; flattening keeps the AST and the SQL shallow.
        flat.extend(part.operands if isinstance(part, kind) else (part,))
    return kind(tuple(flat))


def parse_filter(text: str) -> Node:
    """Parse an AIP-160 filter into an AST; a blank filter raises FilterError (compile_filter allows it)."""
    return _Parser(text).parse()


# ---------------------------------------------------------------------------------------- compiler


@dataclass(frozen=True, eq=False)  # eq=False: comparing SQL columns with == builds SQL, not a bool
class FilterColumns:
    """The SQL expressions the filter fields map to."""

    display_name: SQLColumnExpression[str]
    state: SQLColumnExpression[int] | None  # the integer enum value; None for resources without a state
    create_time: SQLColumnExpression[datetime]  # DateTime(timezone=True), UTC
    labels: SQLColumnExpression[Any]  # JSON holding {"key": "value"}
    # More string fields, snake_case.
    extra: Mapping[str, SQLColumnExpression[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clash = set(self.extra) & set(_BUILTIN_FIELDS)
        if clash:
            raise ValueError(f"extra filter fields shadow built-in fields: {sorted(clash)}")


_BUILTIN_FIELDS = ("display_name", "state", "create_time", "labels")
_STRING_OPS = ("=", "!=", ":")
_STATE_OPS = ("=", "!=")
_TIME_OPS = ("=", "!=", "<", "<=", ">", ">=")
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _nullable(column: SQLColumnExpression[Any]) -> bool:
    # Table columns and ORM attributes know; anything else (labels, expressions) may be NULL.
    return bool(getattr(column, "nullable", True))


def _compare(column: SQLColumnExpression[Any], op: str, value: Any, nullable: bool) -> ColumnElement[bool]:
    """``column op value`` that is TRUE or FALSE, never NULL, so NOT/!= include rows with NULLs."""
    expr: ColumnElement[bool] = _COMPARE[op](column, value)
    if not nullable:
        return expr
    if op == "!=":
        return or_(column.is_(None), expr)
    return and_(column.is_not(None), expr)


def _like_pattern(glob: str) -> str:
    # Escape LIKE's own metacharacters (and the escape char itself) so only '*' is a wildcard.
    out: list[str] = []
    for ch in glob:
        if ch == "*":
            out.append("%")
        elif ch in "\\%_":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


class _GlobMatch(ColumnElement[bool]):
    """``column`` matches ``glob`` (only ``*`` is special), case-sensitively on every database."""

    inherit_cache = False  # the glob is not part of SQLAlchemy's cache key, so never reuse compiled SQL
    type = Boolean()

    def __init__(self, column: SQLColumnExpression[str], glob: str) -> None:
        self.column = column
        self.glob = glob


@compiles(_GlobMatch)
def _glob_as_like(element: _GlobMatch, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(element.column.like(_like_pattern(element.glob), escape="\\"), **kw)


@compiles(_GlobMatch, "sqlite")
def _glob_as_sqlite_glob(element: _GlobMatch, compiler: SQLCompiler, **kw: Any) -> str:
    # SQLite's LIKE ignores ASCII case (PostgreSQL's does not); its GLOB is case-sensitive. Only '*' stays a
    # wildcard: GLOB's '?' and '[' are bracketed.
    pattern = "".join(f"[{ch}]" if ch in "?[" else ch for ch in element.glob)
    return compiler.process(element.column.op("GLOB", is_comparison=True)(pattern), **kw)


class LabelEquals(ColumnElement[bool]):
    """``labels.KEY = VALUE``: `condition` is its SQL; the pair is kept too, so that a list whose filter
    requires it can seek an index of label rows instead of reading every row (``required_label``)."""

    inherit_cache = True  # the cache key is condition's (its bound values are parameters, as anywhere)
    _traverse_internals = [("condition", InternalTraversal.dp_clauseelement)]
    _is_implicitly_boolean = True  # a condition already: never compared with 1 where booleans are integers
    type = Boolean()

    def __init__(self, condition: ColumnElement[bool], key: str, value: str) -> None:
        self.condition = condition
        self.key_value = (key, value)  # (`key` and `label` are ColumnElement's own)

    def self_group(self, against: OperatorType | None = None) -> ColumnElement[bool]:
        return self  # compiled in parentheses already; kept whole so required_label finds it

    def _negate(self) -> ColumnElement[bool]:
        return not_(self.condition)


@compiles(LabelEquals)
def _label_equals(element: LabelEquals, compiler: SQLCompiler, **kw: Any) -> str:
    # Parenthesized: the condition is itself an AND, whatever surrounds it.
    return "(" + compiler.process(element.condition, **kw) + ")"


def required_label(where: ColumnElement[bool] | None) -> tuple[str, str] | None:
    """A (key, value) that every row passing `where` carries as a label: a ``labels.KEY=VALUE`` among its
    top-level AND terms (never one under OR or NOT); None when there is none."""
    if isinstance(where, LabelEquals):
        return where.key_value
    if isinstance(where, BooleanClauseList) and where.operator is operators.and_:
        for term in where.clauses:
            found = required_label(term)
            if found is not None:
                return found
    return None


def _glob(column: SQLColumnExpression[str], glob: str, nullable: bool) -> ColumnElement[bool]:
    if "*" not in glob:
        return _compare(column, "=", glob, nullable)
    expr = _GlobMatch(column, glob)
    return and_(column.is_not(None), expr) if nullable else expr


class _Compiler:
    def __init__(self, columns: FilterColumns, state_names: Mapping[str, int]) -> None:
        self.columns = columns
        self.state_names = state_names
        self.fields: dict[str, str] = {}  # spelling -> canonical snake_case name
        for name in (*_BUILTIN_FIELDS, *columns.extra):
            if name == "state" and columns.state is None:
                continue
            self.fields[name] = name
            self.fields.setdefault(_camel(name), name)

    def compile(self, node: Node) -> ColumnElement[bool]:
        if isinstance(node, And):
            return and_(*(self.compile(child) for child in node.operands))
        if isinstance(node, Or):
            return or_(*(self.compile(child) for child in node.operands))
        if isinstance(node, Not):
            return not_(self.compile(node.operand))
        return self.comparison(node)

    def comparison(self, node: Comparison) -> ColumnElement[bool]:
        name = self.fields.get(node.field[0])
        if name is None:
            allowed = ", ".join(sorted(set(self.fields.values())))
            raise FilterError(
                f"unknown field '{node.field[0]}'; allowed fields: {allowed} (camelCase spellings also work)",
                node.position,
            )
        if name == "labels":
            return self.labels(node)
        if len(node.field) > 1:
            raise FilterError(f"field '{name}' has no sub-fields", node.position)
        if name == "state":
            self.check_op(node, name, _STATE_OPS)
            state = self.columns.state
            assert state is not None  # not a known field otherwise
            return _compare(state, node.op, self.state_value(node.value), _nullable(state))
        if name == "create_time":
            self.check_op(node, name, _TIME_OPS)
            return self.create_time(node)
        column = self.columns.display_name if name == "display_name" else self.columns.extra[name]
        self.check_op(node, name, _STRING_OPS)
        nullable = _nullable(column)
        if node.op == ":":
            return _glob(column, node.value.text, nullable)
        return _compare(column, node.op, node.value.text, nullable)

    @staticmethod
    def check_op(node: Comparison, name: str, allowed: tuple[str, ...]) -> None:
        if node.op not in allowed:
            raise FilterError(
                f"operator '{node.op}' is not supported for field '{name}'; use one of {', '.join(allowed)}",
                node.op_position,
            )

    def state_value(self, value: Value) -> int:
        if value.text in self.state_names:
            return self.state_names[value.text]
        known = ", ".join(sorted(self.state_names, key=lambda n: self.state_names[n]))
        if re.fullmatch(r"-?\d+", value.text):
            number = int(value.text)
            if number in self.state_names.values():
                return number
            raise FilterError(f"unknown state value {number}; expected one of {known}", value.position)
        raise FilterError(f"unknown state '{value.text}'; expected one of {known}", value.position)

    def create_time(self, node: Comparison) -> ColumnElement[bool]:
        moment, sub_micro = _parse_timestamp(node.value)
        column = self.columns.create_time
        op = node.op
        if sub_micro:
            # The database keeps microseconds, so nanoseconds decide by rounding towards the answer.
            if op == "=":
                return false()
            if op == "!=":
                return true()
            if op in ("<", ">="):
                moment += timedelta(microseconds=1)
        return _compare(column, op, moment, _nullable(column))

    def labels(self, node: Comparison) -> ColumnElement[bool]:
        if len(node.field) == 1:
            # labels:KEY is AIP-160's map "has key" form.
            if node.op != ":":
                raise FilterError(
                    f"compare a label as labels.KEY{node.op}VALUE, or test a key with labels:KEY",
                    node.op_position,
                )
            return self.label_exists(node.value.text, node.value.position)
        if len(node.field) > 2:
            dotted = ".".join(node.field[1:])
            raise FilterError(f'label keys containing dots must be quoted: labels."{dotted}"', node.position)
        key = node.field[1]
        self.check_op(node, "labels", _STRING_OPS)
        if node.op == ":" and node.value.text == "*":
            return self.label_exists(key, node.position)
        extracted = self.label(key, node.position)
        value = node.value.text
        if node.op == "=" or (node.op == ":" and "*" not in value):  # ':' without a wildcard is '='
            return LabelEquals(_compare(extracted, "=", value, True), key, value)
        if node.op == ":":
            return _glob(extracted, value, True)
        return _compare(extracted, node.op, value, True)

    def label(self, key: str, position: int) -> ColumnElement[str]:
        if '"' in key:
            # SQLite's JSON path syntax ($."key") cannot express a quote; GCP label keys never contain one.
            raise FilterError("label keys cannot contain '\"'", position)
        return self.columns.labels[key].as_string()

    def label_exists(self, key: str, position: int) -> ColumnElement[bool]:
        if "*" in key:
            raise FilterError("wildcards are not supported in label keys", position)
        return self.label(key, position).is_not(None)


def _parse_timestamp(value: Value) -> tuple[datetime, bool]:
    """RFC 3339 → aware UTC datetime, plus whether digits beyond microseconds were non-zero."""
    match = _RFC3339.fullmatch(value.text)
    if match is None:
        raise FilterError(
            f"invalid timestamp '{value.text}': expected RFC 3339 such as \"2021-05-18T00:00:00Z\"",
            value.position,
        )
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    digits = (fraction or "").ljust(9, "0")
    try:
        offset = (
            UTC
            if zulu
            else timezone((1 if sign == "+" else -1) * timedelta(hours=int(off_h), minutes=int(off_m)))
        )
        local = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), int(digits[:6]), offset
        )
        return local.astimezone(UTC), digits[6:] != "000"
    except (ValueError, OverflowError) as exc:
        raise FilterError(f"invalid timestamp '{value.text}': {exc}", value.position) from None


def compile_filter(
    text: str, columns: FilterColumns, state_names: Mapping[str, int]
) -> ColumnElement[bool] | None:
    """Compile a filter to a WHERE clause over ``columns``; None when the filter is empty or blank.

    ``state_names`` maps enum names (``JOB_STATE_SUCCEEDED``) to their stored integer values.
    """
    if not text or not text.strip():
        return None
    return _Compiler(columns, state_names).compile(parse_filter(text))
