"""Property-based tests of the proto3-JSON building blocks: durations, timestamps, int64 and enums.

Valid values round-trip through parse and the canonical printer; anything else fails as a pydantic
ValidationError that names the field (the API turns it into a 400), never as another exception.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from trainworks.jobs import enums
from trainworks.kernel.wire import (
    Duration,
    Int32,
    Int64,
    ProtoEnum,
    Timestamp,
    WireModel,
    enum_field,
    format_duration,
    format_timestamp,
    parse_duration,
    parse_timestamp,
)

MAX_SECONDS = 315_576_000_000
ENUMS: list[type[ProtoEnum]] = [
    value
    for value in vars(enums).values()
    if isinstance(value, type) and issubclass(value, ProtoEnum) and value is not ProtoEnum
]
SETTINGS = settings(max_examples=400, deadline=None)


class Probe(WireModel):
    """A message with one field of each kind, validated the way every request body is."""

    timeout: Duration | None = None
    start_time: Timestamp | None = None
    count: Int64 | None = None
    small: Int32 | None = None
    state: enum_field(enums.JobState) | None = None  # type: ignore[valid-type]


# Anything JSON can carry, plus the strings that look almost right.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=5,
)
NEAR_MISSES = st.lists(st.sampled_from([*"0123456789.-+sSZT: e", "٣", "1e3", "nan"]), max_size=14).map(
    "".join
)


# ------------------------------------------------------------------ durations
@SETTINGS
@given(
    seconds=st.integers(min_value=0, max_value=MAX_SECONDS),
    nanos=st.integers(min_value=0, max_value=999_999_999),
    negative=st.booleans(),
    digits=st.sampled_from([0, 1, 3, 6, 9]),
)
@example(seconds=0, nanos=1, negative=True, digits=9)  # -0.000000001s: a sign with a zero timedelta
@example(seconds=MAX_SECONDS, nanos=999_999_999, negative=True, digits=9)
def test_durations_round_trip(seconds: int, nanos: int, negative: bool, digits: int) -> None:
    nanos -= nanos % 10 ** (9 - digits)  # what `digits` fractional digits can say
    fraction = f".{nanos:09d}"[: digits + 1] if digits else ""
    text = f"{'-' if negative else ''}{seconds}{fraction}s"
    parsed = parse_duration(text)
    total = (parsed // timedelta(microseconds=1)) * 1000 + getattr(parsed, "sub_micro_nanos", 0)
    assert total == (-1 if negative else 1) * (seconds * 1_000_000_000 + nanos)
    canonical = format_duration(parsed)
    assert parse_duration(canonical) == parsed
    assert format_duration(parse_duration(canonical)) == canonical
    # Through a model, as a request body carries it.
    assert Probe.model_validate({"timeout": text}).to_wire() == {"timeout": canonical}


@SETTINGS
@given(value=st.one_of(JSON_VALUES, NEAR_MISSES))
def test_bad_durations_are_validation_errors(value: Any) -> None:
    try:
        Probe.model_validate({"timeout": value})
    except ValidationError as exc:
        assert exc.errors()[0]["loc"] == ("timeout",)


@pytest.mark.parametrize("text", ["1.5", "1.5S", "1.0000000001s", "+1s", "1e3s", "315576000001s", " s", "-s"])
def test_duration_rejections_name_the_field(text: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Probe.model_validate({"timeout": text})
    assert caught.value.errors()[0]["loc"] == ("timeout",)


# ------------------------------------------------------------------ timestamps
@SETTINGS
@given(
    moment=st.datetimes(
        min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
    ),
    offset_minutes=st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59),
)
# Found by this test: years before 1000 were printed with fewer than four digits ("999-01-01T00:00:00Z").
@example(moment=datetime(999, 1, 1, tzinfo=UTC), offset_minutes=0)
def test_timestamps_round_trip(moment: datetime, offset_minutes: int) -> None:
    canonical = format_timestamp(moment)
    assert parse_timestamp(canonical) == moment
    # The same instant written in another offset reads back as that instant.
    local = moment.astimezone(timezone(timedelta(minutes=offset_minutes)))
    sign = "-" if offset_minutes < 0 else "+"
    hours, minutes = divmod(abs(offset_minutes), 60)
    text = f"{local.year:04d}-" + local.strftime("%m-%dT%H:%M:%S.%f") + f"{sign}{hours:02d}:{minutes:02d}"
    assert parse_timestamp(text) == moment


@SETTINGS
@given(value=st.one_of(JSON_VALUES, NEAR_MISSES))
@example(value="0000-01-01T00:00:00Z")
@example(value="0001-01-01T00:00:00+01:00")  # before datetime.min once in UTC
@example(value="9999-12-31T23:59:59-01:00")  # after datetime.max once in UTC
def test_bad_timestamps_are_validation_errors(value: Any) -> None:
    try:
        Probe.model_validate({"startTime": value})
    except ValidationError as exc:
        assert exc.errors()[0]["loc"] == ("startTime",)


# ------------------------------------------------------------------ int64 / int32
@SETTINGS
@given(number=st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_int64_round_trips_as_string_or_number(number: int) -> None:
    for sent in (number, str(number)):
        assert Probe.model_validate({"count": sent}).count == number
    assert Probe(count=number).to_wire() == {"count": str(number)}


@SETTINGS
@given(value=st.one_of(JSON_VALUES, NEAR_MISSES, st.integers().filter(lambda n: not -(2**63) <= n < 2**63)))
def test_bad_integers_are_validation_errors(value: Any) -> None:
    for key in ("count", "small"):
        try:
            Probe.model_validate({key: value})
        except ValidationError as exc:
            assert exc.errors()[0]["loc"] == (key,)


# ------------------------------------------------------------------ enums
@SETTINGS
@given(data=st.data())
def test_enums_parse_by_name_or_number(data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(ENUMS))
    member = data.draw(st.sampled_from(list(cls)))
    assert cls.parse(member.name) is member
    assert cls.parse(int(member)) is member
    assert cls.parse(member) is member


@SETTINGS
@given(cls=st.sampled_from(ENUMS), value=JSON_VALUES)
def test_unknown_enum_values_raise_value_error(cls: type[ProtoEnum], value: Any) -> None:
    known = {m.name for m in cls} | {int(m) for m in cls}
    if isinstance(value, str | int) and not isinstance(value, bool) and value in known:
        return
    with pytest.raises(ValueError):
        cls.parse(value)


@SETTINGS
@given(value=JSON_VALUES)
def test_enum_fields_reject_with_validation_errors(value: Any) -> None:
    try:
        probe = Probe.model_validate({"state": value})
    except ValidationError as exc:
        assert exc.errors()[0]["loc"] == ("state",)
    else:
        assert value is None or probe.state is not None
