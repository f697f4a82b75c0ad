"""The Logging query language on entries made here (no server): each field and operator, the boolean
structure, what a query says about the jobs and the time range it can match, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainworks.backends.capture import Record
from trainworks.kernel.errors import ApiError
from trainworks.kinds.log_entries.query import JOB_ID, TASK_NAME, EntryView, parse_query, parse_time
from trainworks.kinds.log_entries.store import Entry, JobLog, LogSource, insert_id
from trainworks.kinds.log_entries.wire import format_ns, to_log_entry

T0 = 1_700_000_000_123_456_789  # 2023-11-14T22:13:20.123456789Z
JOB = JobLog("123", "proj", {"team": "Vision"})
TRIAL_JOB = JobLog("456", "proj", {})


def entry(
    data: bytes | str,
    kind: str = "o",
    ns: int = T0,
    task: str = "workerpool0-0",
    trial: str = "",
    job: JobLog = JOB,
    offset: int = 0,
) -> Entry:
    raw = data.encode() if isinstance(data, str) else data
    source = LogSource(task, Path("/nowhere") / task, trial)
    record = Record(offset, ns, kind, raw, 0, False, 0)
    return Entry(job, source, record, insert_id(ns, source, offset))


def structured(**fields: object) -> Entry:
    return entry(json.dumps(fields))


def matches(text: str, item: Entry) -> bool:
    return parse_query(text).matches(EntryView(item))


def test_timestamps_compare_at_the_nanosecond_whatever_the_zone() -> None:
    item = entry("x")
    assert parse_time_text("2023-11-14T22:13:20.123456789Z") == T0
    assert matches('timestamp="2023-11-14T22:13:20.123456789Z"', item)
    assert matches('timestamp>"2023-11-14T22:13:20.123456788Z"', item)
    assert not matches('timestamp>"2023-11-14T22:13:20.123456789Z"', item)
    assert matches('timestamp<="2023-11-14T23:13:20.123456789+01:00"', item)
    assert not matches('timestamp<"2023-11-14T23:13:20.123456789+01:00"', item)
    # What the client library writes (%z: no colon), and gcloud's microseconds.
    assert matches('timestamp>="2023-11-14T22:13:20.123456+0000"', item)
    assert matches('timestamp<"2023-11-14T22:13:20.123457+00:00"', item)
    assert matches('timestamp>="2023-11-14"', item) and not matches('timestamp>="2023-11-15"', item)
    assert matches('receiveTimestamp="2023-11-14T22:13:20.123456789Z"', item)


@pytest.mark.parametrize(
    ("ns", "shown"),
    [
        (1_700_000_000_123_456_789, "2023-11-14T22:13:20.123456789Z"),
        (1_700_000_000_123_456_000, "2023-11-14T22:13:20.123456Z"),
        (1_700_000_000_120_000_000, "2023-11-14T22:13:20.120Z"),
        (1_700_000_000_000_000_000, "2023-11-14T22:13:20Z"),
    ],
)
def test_entry_times_are_canonical_proto3_json(ns: int, shown: str) -> None:
    # As protobuf prints a Timestamp: 0, 3, 6 or 9 digits (a capture clock may land on a whole microsecond).
    assert format_ns(ns) == shown
    assert parse_time_text(shown) == ns


def parse_time_text(text: str) -> int:
    from trainworks.kernel.filtering import Value

    return parse_time(Value(text, True, 0))


def test_severity_compares_by_rank_by_name_or_number() -> None:
    out, err = entry("hello"), entry("boom", kind="e")
    warning = structured(severity="warning", message="careful")
    assert matches("severity=INFO", out) and matches("severity=ERROR", err)
    assert matches("severity>=WARNING", err) and not matches("severity>=WARNING", out)
    assert matches('severity>="warning"', warning) and matches("severity<ERROR", warning)
    assert matches("severity>=400", warning) and not matches("severity>400", warning)
    assert matches("severity!=DEFAULT", out)
    platform = entry(
        json.dumps({"severity": "NOTICE", "message": "Job is running."}), kind="p", task="service"
    )
    assert matches("severity=NOTICE", platform)


def test_fields_of_the_resource_the_labels_and_the_log_name() -> None:
    item = entry("x", trial="3", job=TRIAL_JOB, task="workerpool1-0")
    assert matches('resource.type="ml_job"', item) and matches("resource.type=ML_JOB", item)
    assert matches("resource.labels.job_id=456", item) and not matches("resource.labels.job_id=45", item)
    assert matches('resource.labels.task_name="workerpool1-0"', item)
    assert matches('resource.labels.project_id="proj"', item)
    assert matches('labels."ml.googleapis.com/trial_id"="3"', item)
    assert matches('labels."ml.googleapis.com/trial_id":*', item)
    assert not matches('labels."ml.googleapis.com/trial_id":*', entry("x"))
    assert matches('labels.team="vision"', entry("x"))  # strings compare without regard to case
    assert matches('logName="projects/proj/logs/workerpool1-0"', item)
    assert matches('log_name:"logs/workerpool1"', item)  # the proto field name works too
    service = entry(json.dumps({"severity": "INFO", "message": "m"}), kind="p", task="service")
    assert matches('logName:"ml.googleapis.com%2F123"', service)


def test_insert_ids_are_ordered_as_entries_are() -> None:
    early, late = entry("a", ns=T0), entry("b", ns=T0 + 1)
    late_id = to_log_entry(late)["insertId"]
    assert matches(f'insertId<"{late_id}"', early) and not matches(f'insertId<"{late_id}"', late)
    assert matches(f'insertId="{late_id}"', late)


def test_has_is_a_substring_without_regard_to_case() -> None:
    item = entry("Epoch 3: Loss=0.25")
    assert matches('textPayload:"loss="', item) and matches("textPayload:epoch", item)
    assert not matches('textPayload:"accuracy"', item)
    assert matches('textPayload="epoch 3: loss=0.25"', item)
    assert matches("NOT textPayload:robot", item) and matches("-textPayload:robot", item)
    assert matches("textPayload:*", item) and not matches("jsonPayload:*", item)


def test_json_payload_fields_by_path_number_list_and_null() -> None:
    item = structured(
        severity="INFO",
        message="Step done",
        step=12,
        loss=0.5,
        ok=True,
        tags=["a", "B"],
        meta={"run": {"id": "r-7"}},
    )
    view = to_log_entry(item)
    assert "severity" not in view["jsonPayload"] and view["jsonPayload"]["message"] == "Step done"
    assert matches('jsonPayload.message="step done"', item) and matches("jsonPayload.message:DONE", item)
    assert matches("jsonPayload.step>=10", item) and not matches("jsonPayload.step>12", item)
    assert matches("jsonPayload.step=12", item) and matches("jsonPayload.loss<0.6", item)
    assert matches("jsonPayload.ok=true", item)
    assert matches("jsonPayload.tags=b", item) and not matches("jsonPayload.tags=c", item)
    assert matches('jsonPayload.meta.run.id="R-7"', item) and matches("jsonPayload.meta:r-7", item)
    assert matches("jsonPayload:*", item) and not matches("textPayload:*", item)
    nothing = structured(message="m", value=None)
    assert matches("jsonPayload.value=NULL_VALUE", nothing) and not matches(
        "jsonPayload.value!=NULL_VALUE", nothing
    )
    assert matches("jsonPayload.message!=NULL_VALUE", nothing)


def test_a_field_the_entry_lacks_makes_every_comparison_false() -> None:
    item = entry("x")
    for text in ("jsonPayload.x=1", "jsonPayload.x!=1", "unknown=1", "unknown!=1", "trace:*", "split.uid:*"):
        assert not matches(text, item), text
    assert matches("NOT unknown=1", item)


def test_and_or_not_parentheses_and_implicit_and() -> None:
    out, err = entry("alpha"), entry("beta", kind="e")
    assert matches("severity=ERROR OR textPayload:alpha", out)
    assert matches("textPayload:alpha severity=INFO", out)  # implicit AND
    assert not matches("textPayload:alpha severity=ERROR", out)
    # OR binds tighter than AND: a AND b OR c is a AND (b OR c).
    assert not matches("severity=ERROR AND textPayload:beta OR textPayload:alpha", out)
    assert matches("(severity=ERROR AND textPayload:beta) OR textPayload:alpha", out)
    assert matches("NOT (severity=INFO OR textPayload:zzz)", err)


def test_what_a_query_says_about_jobs_and_tasks() -> None:
    assert parse_query("resource.labels.job_id=5").allowed(JOB_ID) == {"5"}
    assert parse_query('resource.labels.job_id="5" OR resource.labels.job_id=6').allowed(JOB_ID) == {"5", "6"}
    assert parse_query(
        "(resource.labels.job_id=5 OR resource.labels.job_id=6) resource.labels.job_id=6"
    ).allowed(JOB_ID) == {"6"}
    assert parse_query("resource.labels.job_id=5 OR severity>=ERROR").allowed(JOB_ID) is None
    assert parse_query("NOT resource.labels.job_id=5").allowed(JOB_ID) is None
    assert parse_query("resource.labels.job_id:5").allowed(JOB_ID) is None
    assert parse_query("").allowed(JOB_ID) is None
    tasks = parse_query('resource.labels.job_id=5 AND resource.labels.task_name="WorkerPool0-0"')
    assert tasks.allowed(TASK_NAME) == {"workerpool0-0"}


def test_what_a_query_says_about_time() -> None:
    t = "2023-11-14T22:13:20.123456789Z"
    assert (parse_query(f'timestamp>="{t}"').since_ns, parse_query(f'timestamp>="{t}"').until_ns) == (
        T0,
        None,
    )
    assert parse_query(f'timestamp>"{t}"').since_ns == T0 + 1
    assert parse_query(f'timestamp<"{t}"').until_ns == T0 - 1
    gcloud = parse_query(
        f'resource.type="ml_job" AND resource.labels.job_id="1" AND ((timestamp="{t}" AND insertId>"i") '
        f'OR timestamp>"{t}") AND timestamp<"2023-11-14T22:13:25.000000+00:00"'
    )
    assert gcloud.since_ns == T0 and gcloud.until_ns == T0 - 123_456_789 + 5 * 10**9 - 1
    assert parse_query(f'NOT timestamp<"{t}"').since_ns == T0
    assert parse_query(f'timestamp>="{t}" OR severity=ERROR').since_ns is None
    assert parse_query(f'NOT (timestamp<"{t}" OR severity=ERROR)').since_ns == T0  # De Morgan
    assert parse_query(f'timestamp>"{t}" AND timestamp<"{t}"').empty_range


@pytest.mark.parametrize(
    ("text", "problem", "where"),
    [
        ("severity>=WARNING AND (", "expected a comparison", "line 1, column 24"),
        ("textPayload:a AND\n  (severity=", "has no value", "line 2, column 12"),
        ('timestamp>="yesterday"', "invalid timestamp 'yesterday'", "column 12"),
        ('timestamp>="2023-02-30T00:00:00Z"', "invalid timestamp", "column 12"),
        ("severity>=LOUD", "invalid severity 'LOUD'", "column 11"),
        ('timestamp:"2023"', "'timestamp' takes", "column 10"),
        ("severity:ERR", "'severity' takes", "column 9"),
        ('textPayload:"open', "unterminated string", "column 13"),
        ("jsonPayload.x>NULL_VALUE", "NULL_VALUE takes = or !=", "column 15"),
        ("textPayload:a and severity=ERROR", "must be upper case", ""),
    ],
)
def test_errors_name_the_problem_and_where_it_is(text: str, problem: str, where: str) -> None:
    with pytest.raises(ApiError) as raised:
        parse_query(text)
    message = raised.value.message
    assert message.startswith("Unparseable filter: ") and problem in message and where in message, message
    assert raised.value.violations[0].field == "filter"


def test_a_filter_longer_than_loggings_limit_is_refused() -> None:
    with pytest.raises(ApiError, match="the limit is 20000"):
        parse_query("textPayload:x " * 2000)


@pytest.mark.parametrize("line", [b'{"v": NaN}', b'{"v": 1e400}', b'{"v": "\\ud800"}', b'{"v": Infinity}'])
def test_json_no_answer_can_carry_stays_text(line: bytes) -> None:
    shown = to_log_entry(entry(line))
    assert shown["textPayload"] == line.decode() and "jsonPayload" not in shown
    json.dumps(shown, allow_nan=False).encode()


_PIECES = [
    "timestamp",
    "severity",
    "jsonPayload.a.b",
    'labels."k.x"',
    "resource.labels.job_id",
    "textPayload",
    "insertId",
    "=",
    "!=",
    ">=",
    "<",
    ":",
    "AND",
    "OR",
    "NOT",
    "-",
    "(",
    ")",
    '"2024-01-01T00:00:00Z"',
    '"0000-01-01"',
    "9" * 5000,
    "1e999",
    "NULL_VALUE",
    "*",
    "ERROR",
    "²",
    '"',
    "\n",
    " ",
]


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_PIECES) | st.text(max_size=6), max_size=12))
def test_any_filter_parses_or_is_refused_and_never_fails_otherwise(pieces: list[str]) -> None:
    text = " ".join(pieces)
    try:
        query = parse_query(text)
    except ApiError as exc:
        assert exc.message.startswith("Unparseable filter: ")
        return
    for item in (entry("x"), structured(a={"b": [1, "two", None]}, severity="ERROR")):
        query.matches(EntryView(item))
    query.allowed(JOB_ID)
