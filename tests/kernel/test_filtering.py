"""AIP-160 list filters: parsing, error messages, and the rows they select on SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    insert,
    select,
)
from sqlalchemy.dialects import postgresql

from trainworks.kernel.filtering import (
    And,
    Comparison,
    FilterColumns,
    FilterError,
    Not,
    Or,
    Value,
    compile_filter,
    parse_filter,
)

# Kept local (not imported from the enum module) so these tests only exercise the filter code.
STATES = {
    "JOB_STATE_UNSPECIFIED": 0,
    "JOB_STATE_QUEUED": 1,
    "JOB_STATE_PENDING": 2,
    "JOB_STATE_RUNNING": 3,
    "JOB_STATE_SUCCEEDED": 4,
    "JOB_STATE_FAILED": 5,
    "JOB_STATE_CANCELLING": 6,
    "JOB_STATE_CANCELLED": 7,
}

metadata = MetaData()
jobs = Table(
    "jobs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("display_name", String, nullable=False),
    Column("state", Integer, nullable=False),
    Column("create_time", DateTime(timezone=True), nullable=False),
    Column("labels", JSON, nullable=True),
    Column("training_task_definition", String, nullable=True),
)

COLUMNS = FilterColumns(
    display_name=jobs.c.display_name,
    state=jobs.c.state,
    create_time=jobs.c.create_time,
    labels=jobs.c.labels,
    extra={"training_task_definition": jobs.c.training_task_definition},
)


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


ROWS = [
    # id, display_name, state, create_time, labels, training_task_definition
    (1, "my_job", 4, _t("2021-05-17T12:00:00Z"), {"keyA": "valueA"}, "gs://defs/a.yaml"),
    (2, "my_job_1", 4, _t("2021-05-18T00:00:00Z"), {"keyA": "valueA", "keyB": "x"}, "gs://defs/b.yaml"),
    (3, "my_job_2", 5, _t("2021-05-18T00:00:00.250000Z"), {"keyB": ""}, None),
    (4, "other", 3, _t("2021-05-19T08:30:00Z"), {"keyA": "valueB", "a key": "spaced"}, "file:///x"),
    (5, "100%_done", 4, _t("2021-06-01T00:00:00Z"), None, None),
    (6, "1000_done", 1, _t("2021-06-02T00:00:00Z"), {}, None),
    (7, "myXjobY3", 7, _t("2021-06-03T00:00:00Z"), {"team.name": "ml", "keyB": "x%y"}, None),
    (8, "back\\slash", 2, _t("2021-06-04T00:00:00Z"), {"keyA": "value_A"}, None),
]


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    engine = create_engine("sqlite://")
    metadata.create_all(engine)
    keys = ("id", "display_name", "state", "create_time", "labels", "training_task_definition")
    with engine.begin() as conn:
        conn.execute(insert(jobs), [dict(zip(keys, row, strict=True)) for row in ROWS])
    yield engine
    engine.dispose()


def _ids(engine: Engine, text: str) -> set[int]:
    where = compile_filter(text, COLUMNS, STATES)
    query = select(jobs.c.id)
    if where is not None:
        query = query.where(where)
    with engine.connect() as conn:
        return set(conn.scalars(query))


ALL = {row[0] for row in ROWS}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The examples from the Vertex AI customJobs.list documentation.
        ('state="JOB_STATE_SUCCEEDED" AND display_name:"my_job_*"', {2}),
        ('state!="JOB_STATE_FAILED" OR display_name="my_job"', ALL - {3}),
        ('NOT display_name="my_job"', ALL - {1}),
        ('create_time>"2021-05-18T00:00:00Z"', {3, 4, 5, 6, 7, 8}),
        ("labels.keyA=valueA", {1, 2}),
        ("labels.keyB:*", {2, 3, 7}),
        # display_name
        ("display_name=my_job", {1}),
        ("displayName='my_job'", {1}),
        ('display_name!="my_job"', ALL - {1}),
        ('display_name:"my_job"', {1}),  # ':' without '*' is an exact match
        ('display_name:"my_job*"', {1, 2, 3}),
        ('display_name:"*_done"', {5, 6}),
        ('display_name:"*job*"', {1, 2, 3, 7}),
        ('display_name:"*"', ALL),
        ('display_name="my_job_*"', set()),  # '=' never treats '*' as a wildcard
        # Escaping: '_', '%' and the escape character itself are literal in globs.
        ('display_name:"my_job_*"', {2, 3}),  # not myXjobY3
        ('display_name:"100%*"', {5}),  # not 1000_done
        ('display_name:"100_*"', set()),
        ('display_name:"back\\\\*"', {8}),  # the filter string holds back\\* -> glob back\*
        ('display_name="back\\\\slash"', {8}),
        # state
        ("state=JOB_STATE_SUCCEEDED", {1, 2, 5}),
        ("state='JOB_STATE_FAILED'", {3}),
        ("state=4", {1, 2, 5}),
        ('state="7"', {7}),
        ("state!=JOB_STATE_SUCCEEDED", {3, 4, 6, 7, 8}),
        # create_time
        ('create_time="2021-05-18T00:00:00Z"', {2}),
        ('create_time!="2021-05-18T00:00:00Z"', ALL - {2}),
        ('create_time>="2021-05-18T00:00:00Z"', ALL - {1}),
        ('create_time<"2021-05-18T00:00:00Z"', {1}),
        ('create_time<="2021-05-18T00:00:00.25Z"', {1, 2, 3}),
        ('createTime<"2021-05-18T02:00:00+02:00"', {1}),  # offsets are converted to UTC
        ('create_time>"2021-05-17T20:00:00-04:00"', {3, 4, 5, 6, 7, 8}),
        ('create_time>"2021-05-18T00:00:00.250000001Z"', {4, 5, 6, 7, 8}),  # nanoseconds round correctly
        ('create_time<"2021-05-18T00:00:00.250000001Z"', {1, 2, 3}),
        ('create_time="2021-05-18T00:00:00.250000001Z"', set()),
        ('create_time>"2021-05-19t08:29:59z"', {4, 5, 6, 7, 8}),
        # labels
        ("labels.keyA=valueB", {4}),
        ("labels.keyA!=valueA", {3, 4, 5, 6, 7, 8}),  # rows without the label (or any labels) count
        ("NOT labels.keyA=valueA", {3, 4, 5, 6, 7, 8}),
        ("labels.keyA:valueA", {1, 2}),
        ('labels.keyA:"value*"', {1, 2, 4, 8}),
        ('labels.keyA:"value_*"', {8}),
        ('labels.keyB:"x%*"', {7}),
        ("labels:keyB", {2, 3, 7}),
        ('labels.keyB=""', {3}),
        ("-labels.keyB:*", {1, 4, 5, 6, 8}),
        ('labels."a key"=spaced', {4}),
        ('labels."a key":*', {4}),
        ('labels."team.name"=ml', {7}),
        ("labels.missing:*", set()),
        # extra string fields
        ('training_task_definition="gs://defs/a.yaml"', {1}),
        ('trainingTaskDefinition:"gs://*"', {1, 2}),
        ('training_task_definition!="gs://defs/a.yaml"', ALL - {1}),  # NULLs are "not equal"
        ('NOT training_task_definition:"gs://*"', ALL - {1, 2}),
        # Combinations, parentheses, NOT and '-'.
        ('(display_name="my_job" OR display_name="other") AND NOT labels.keyA=valueA', {4}),
        ("NOT (state=JOB_STATE_SUCCEEDED OR state=JOB_STATE_FAILED)", {4, 6, 7, 8}),
        ('-state=JOB_STATE_SUCCEEDED -display_name:"my*"', {4, 6, 8}),
        ("NOT NOT display_name=my_job", {1}),
        ("((state=4))", {1, 2, 5}),
        # Implicit AND by juxtaposition.
        ('state=JOB_STATE_SUCCEEDED display_name:"my_job*"', {1, 2}),
        ("state=4 labels.keyA=valueA display_name!=my_job", {2}),
        # AIP-160 precedence: OR binds tighter than AND (and tighter than juxtaposition).
        ('state=JOB_STATE_RUNNING OR state=JOB_STATE_FAILED AND display_name="my_job_2"', {3}),
        ('display_name="my_job" AND state=JOB_STATE_FAILED OR state=JOB_STATE_SUCCEEDED', {1}),
        ("display_name=my_job state=5 OR state=4", {1}),
        ("state=5 OR state=4 display_name=my_job", {1}),
        ("(display_name=my_job AND state=5) OR state=4", {1, 2, 5}),
        # Blank filters select everything.
        ("", ALL),
        ("   ", ALL),
    ],
)
def test_filter_selects_expected_rows(engine: Engine, text: str, expected: set[int]) -> None:
    assert _ids(engine, text) == expected


def test_blank_filter_compiles_to_none() -> None:
    assert compile_filter("", COLUMNS, STATES) is None
    assert compile_filter(" \t\n", COLUMNS, STATES) is None


def test_parse_builds_aip160_precedence() -> None:
    def cmp(name: str, value: str, position: int) -> Comparison:
        return Comparison((name,), "=", Value(value, False, position + 2), position, position + 1)

    assert parse_filter("a=1 AND b=2 OR c=3") == And(
        (cmp("a", "1", 0), Or((cmp("b", "2", 8), cmp("c", "3", 15))))
    )
    assert parse_filter("a=1 b=2 OR c=3") == And(
        (cmp("a", "1", 0), Or((cmp("b", "2", 4), cmp("c", "3", 11))))
    )
    assert parse_filter("-a=1") == Not(cmp("a", "1", 1))


def test_parse_values_and_paths() -> None:
    node = parse_filter(r'labels."a key":"x\"y\\z" display_name=job.v-2 state=-1')
    assert isinstance(node, And)
    first, second, third = node.operands
    assert isinstance(first, Comparison) and first.field == ("labels", "a key") and first.op == ":"
    assert first.value == Value('x"y\\z', True, 15)
    assert isinstance(second, Comparison) and second.value.text == "job.v-2" and not second.value.quoted
    assert isinstance(third, Comparison) and third.value.text == "-1"
    single = parse_filter(r"display_name='it\'s'")
    assert isinstance(single, Comparison) and single.value.text == "it's"


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        ("foo=bar", "unknown field 'foo'; allowed fields: create_time, display_name, labels, state, tr", 1),
        ("state=4 AND fooBar=1", "unknown field 'fooBar'", 13),
        ('state<"JOB_STATE_FAILED"', "operator '<' is not supported for field 'state'; use one of =, !=", 6),
        ("state:4", "operator ':' is not supported for field 'state'", 6),
        ('display_name>"a"', "'>' is not supported for field 'display_name'; use one of =, !=, :", 13),
        ('create_time:"2021-05-18T00:00:00Z"', "operator ':' is not supported for field 'create_time'", 12),
        ('labels.k>"a"', "operator '>' is not supported for field 'labels'", 9),
        ('create_time>"2021-05-18"', "invalid timestamp '2021-05-18': expected RFC 3339", 13),
        (
            'create_time>"2021-13-01T00:00:00Z"',
            "timestamp '2021-13-01T00:00:00Z': month must be in 1..12",
            13,
        ),
        ('create_time>"2021-05-18T00:00:00"', "invalid timestamp", 13),  # RFC 3339 requires an offset
        ("create_time>2021-05-18T00:00:00Z", "quote values that contain it", 26),
        ("state=JOB_STATE_NOPE", "unknown state 'JOB_STATE_NOPE'; expected one of JOB_STATE_UNSPECIFIED,", 7),
        ("state=99", "unknown state value 99", 7),
        ("(state=4", "unbalanced parentheses: this '(' is never closed", 1),
        ("(state=4 OR (state=5)", "unbalanced parentheses: this '(' is never closed", 1),
        ("state=4)", "unbalanced parentheses: this ')' has no matching '('", 8),
        (")", "unbalanced parentheses", 1),
        ("()", "empty parentheses", 1),
        ("display_name=", "empty comparison: '=' has no value (found end of filter)", 13),
        ("display_name= AND state=4", "empty comparison: '=' has no value (found keyword AND)", 13),
        ("display_name:)", "empty comparison", 13),
        ("=foo", "comparison '=' has no field on its left", 1),
        ("display_name", "expected a comparison operator (=, !=, <, <=, >, >=, :) after 'display_name'", 13),
        ("display_name=a and state=4", "AND, OR and NOT must be upper case", 16),
        ("state=4 AND", "expected a comparison after AND, found end of filter", 12),
        ("state=4 OR AND state=5", "expected a comparison after OR, found keyword AND", 12),
        ("NOT", "expected a comparison after NOT, found end of filter", 4),
        ('display_name="abc', 'unterminated string: the " opened here is never closed', 14),
        ('display_name!"x"', "unexpected '!' (did you mean '!='?)", 13),
        ("labels=x", "compare a label as labels.KEY=VALUE, or test a key with labels:KEY", 7),
        ("labels.a.b=x", 'label keys containing dots must be quoted: labels."a.b"', 1),
        ("labels:k*", "wildcards are not supported in label keys", 8),
        ("labels.'a\"b'=x", "label keys cannot contain '\"'", 1),
        ("display_name.x=1", "field 'display_name' has no sub-fields", 1),
        ("state=4 'x'", "expected a comparison, found a quoted string", 9),
        ("display_name and state=4", "AND, OR and NOT must be upper case: AND", 14),
    ],
)
def test_errors_name_problem_and_position(text: str, message: str, column: int) -> None:
    with pytest.raises(FilterError) as caught:
        compile_filter(text, COLUMNS, STATES)
    assert message in str(caught.value)
    assert caught.value.position == column - 1
    assert str(caught.value).startswith(f"invalid filter at column {column}: ")


def test_deep_nesting_is_a_filter_error() -> None:
    with pytest.raises(FilterError, match="levels deep"):
        parse_filter("(" * 500 + "state=4" + ")" * 500)
    with pytest.raises(FilterError, match="levels deep"):
        parse_filter("NOT " * 500 + "state=4")
    assert isinstance(parse_filter("(" * 30 + "NOT " * 30 + "state=4" + ")" * 30), Not)


def test_filter_error_is_value_error() -> None:
    with pytest.raises(ValueError, match="empty filter"):
        parse_filter("  ")


def test_extra_fields_cannot_shadow_builtins() -> None:
    with pytest.raises(ValueError, match="shadow"):
        FilterColumns(
            jobs.c.display_name, jobs.c.state, jobs.c.create_time, jobs.c.labels, {"state": jobs.c.id}
        )


def test_compiles_for_postgresql() -> None:
    # Compile-only smoke test: the same expression must render on PostgreSQL with JSON ->> and ESCAPE.
    where = compile_filter(
        'labels.keyA:"v_*" AND NOT labels.keyB:* OR display_name:"100%*" create_time>"2021-05-18T00:00:00Z"',
        COLUMNS,
        STATES,
    )
    assert where is not None
    sql = str(where.compile(dialect=postgresql.dialect()))
    assert "->>" in sql
    assert "ESCAPE" in sql
