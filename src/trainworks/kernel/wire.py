"""Proto3-JSON building blocks shared by every wire model.

Input follows the proto JSON parser: lowerCamelCase or snake_case keys, enums as names or integers, int64 as
strings or numbers. Output is canonical: camelCase, enum names, int64 as strings, durations as ``"Ns"``,
RFC 3339 timestamps with ``Z``, default values omitted.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import Annotated, Any, Self, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ModelWrapValidatorHandler,
    PlainSerializer,
    StrictBool,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

#: The validation context of an answer read from a server (the REST client): see `WireModel.from_server`.
FROM_SERVER: dict[str, Any] = {"from_server": True}


class WireModel(BaseModel):
    """A proto message: camelCase aliases, snake_case accepted, unknown fields rejected.

    Read from a server (`from_server`, or validation context `FROM_SERVER`) it is lenient instead: unknown
    fields are dropped at every depth, as a client of a newer server must, and `to_wire()` gives back exactly
    the fields it read, in their order.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_default=False,
        ser_json_inf_nan="strings",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _null_is_unset(
        cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo
    ) -> Self:
        """The proto JSON parser reads `null` as "not set" for every field: drop such keys. From a server,
        unknown keys are dropped too, and the order of the fields read is kept for `to_wire`."""
        if not isinstance(data, dict):
            return handler(data)
        if isinstance(info.context, dict) and info.context.get("from_server"):
            names = _field_names(cls)
            data = {key: value for key, value in data.items() if value is not None and key in names}
            model = handler(data)
            # An undeclared private value: a declared PrivateAttr would slow down every model of the server.
            object.__setattr__(model, "__pydantic_private__", {_READ_ORDER: tuple(names[k] for k in data)})
            return model
        if any(v is None for v in data.values()):
            data = {k: v for k, v in data.items() if v is not None}
        return handler(data)

    @classmethod
    def from_server(cls, data: Any) -> Self:
        """`data` as a server answered it, leniently (see the class)."""
        return cls.model_validate(data, context=FROM_SERVER)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, WireModel) and (self.__pydantic_private__ or other.__pydantic_private__):
            # The order a model was read in is no part of its value: compare the fields alone.
            fields = type(self).model_fields
            return type(other) is type(self) and all(getattr(self, n) == getattr(other, n) for n in fields)
        return super().__eq__(other)

    def to_wire(self) -> dict[str, Any]:
        """Canonical proto3 JSON as a dict (defaults omitted). One read from a server gives back what was
        read: the same fields (a default one too), in the same order."""
        if _read_order(self) is None:
            return self.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        return _in_read_order(self, self.model_dump(mode="json", by_alias=True, exclude_unset=True))


_READ_ORDER = "read_order"


@cache
def _field_names(model: type[WireModel]) -> dict[str, str]:
    """Field name by wire key: the camelCase alias and the snake_case name."""
    names = {name: name for name in model.model_fields}
    names.update({field.alias: name for name, field in model.model_fields.items() if field.alias})
    return names


def _read_order(model: WireModel) -> tuple[str, ...] | None:
    """The names of the fields a model read from a server had, in their order (None: not read so)."""
    private = model.__pydantic_private__
    return private.get(_READ_ORDER) if private else None


def _in_read_order(model: WireModel, dumped: dict[str, Any]) -> dict[str, Any]:
    """`model`'s dump (`dumped`) with its keys, at every depth, in the order they were read; fields set
    since come after them."""
    fields = type(model).model_fields
    out: dict[str, Any] = {}
    for name in (*(_read_order(model) or ()), *fields):
        key = fields[name].alias or name
        if key in dumped and key not in out:
            out[key] = _value_in_read_order(getattr(model, name), dumped[key])
    return out


def _value_in_read_order(value: Any, dumped: Any) -> Any:
    if isinstance(value, WireModel) and isinstance(dumped, dict):
        return _in_read_order(value, dumped)
    if isinstance(value, list) and isinstance(dumped, list):
        return [_value_in_read_order(item, out) for item, out in zip(value, dumped, strict=True)]
    if isinstance(value, dict) and isinstance(dumped, dict):
        return {key: _value_in_read_order(value.get(key), out) for key, out in dumped.items()}
    return dumped


W = TypeVar("W", bound=WireModel)
_T = TypeVar("_T")


class _OutputOnly:
    def __repr__(self) -> str:
        return "OutputOnly"


_OUTPUT_ONLY = _OutputOnly()
# A field the service sets (google.api.field_behavior OUTPUT_ONLY): what a client sends in it is ignored.
OutputOnly = Annotated[_T, _OUTPUT_ONLY]


def input_dict(model: WireModel) -> dict[str, Any]:
    """The part of `model` a client sets, as canonical proto3 JSON (what is stored and echoed back): its
    OutputOnly fields, and those of the messages it holds, are left out, as the service ignores them."""
    return _settable(model).to_wire()


def _settable(model: W) -> W:
    """`model` re-parsed from the fields its sender set, less the OutputOnly ones (at every depth)."""
    fields = type(model).model_fields
    kept = {
        name: _settable_value(getattr(model, name))
        for name in model.model_fields_set
        if _OUTPUT_ONLY not in fields[name].metadata
    }
    return type(model).model_validate(kept)


def _settable_value(value: Any) -> Any:
    if isinstance(value, WireModel):
        return _settable(value)
    if isinstance(value, list):
        return [_settable_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _settable_value(item) for key, item in value.items()}
    return value


def check_oneof(model: WireModel, names: Sequence[str], group: str) -> None:
    """Rejects a message with two members of one `oneof` set (a message member set to `{}` counts as set), as
    the proto JSON parser does; call it from a `model_validator(mode="after")`."""
    present = [name for name in names if getattr(model, name) is not None]
    if len(present) > 1:
        fields = type(model).model_fields
        shown = ", ".join(fields[name].alias or name for name in present)
        raise ValueError(f"only one field of the oneof {group!r} may be set, got {shown}")


# ---------------------------------------------------------------- bool
# The proto JSON parser takes only `true`/`false` for a bool: no "true" strings, no 0/1.
Bool = StrictBool


# ---------------------------------------------------------------- int64
def _parse_int64(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected an integer")
    if isinstance(value, int):
        result = value
    elif isinstance(value, float):
        if not value.is_integer():
            raise ValueError("expected an integer")
        result = int(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            number = Decimal(text)
        except InvalidOperation:
            raise ValueError(f"expected an integer, got {value!r}") from None
        if not (number.is_finite() and -(2**63) <= number < 2**63) or number != number.to_integral_value():
            raise ValueError(f"expected an integer, got {value!r}")
        result = int(number)
    else:
        raise ValueError("expected an integer")
    if not -(2**63) <= result < 2**63:
        raise ValueError("integer out of the int64 range")
    return result


def _parse_int32(value: Any) -> int:
    result = _parse_int64(value)
    if not -(2**31) <= result < 2**31:
        raise ValueError("integer out of the int32 range")
    return result


Int64 = Annotated[
    int,
    BeforeValidator(_parse_int64),
    PlainSerializer(lambda v: str(v), return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "int64"}),
]
Int32 = Annotated[int, BeforeValidator(_parse_int32)]


# ---------------------------------------------------------------- double
_JSON_NUMBER = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_SPECIAL_DOUBLES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _parse_double(value: Any) -> float:
    """A proto `double`: a JSON number, or a string holding one, or "NaN", "Infinity", "-Infinity"."""
    if isinstance(value, bool):
        raise ValueError("expected a number")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text in _SPECIAL_DOUBLES:
            return _SPECIAL_DOUBLES[text]
        if _JSON_NUMBER.match(text):
            result = float(text)
            if math.isinf(result):
                raise ValueError(f"number {value!r} is out of the double range")
            return result
        raise ValueError(f"expected a number, got {value!r}")
    raise ValueError("expected a number")


def _format_double(value: float) -> float | str:
    """Canonical proto3 JSON: non-finite values are the strings "NaN", "Infinity" and "-Infinity"."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return float(value)


Double = Annotated[
    float,
    BeforeValidator(_parse_double),
    PlainSerializer(_format_double, when_used="json"),
    WithJsonSchema({"type": "number"}),
]


# ---------------------------------------------------------------- Duration
_DURATION_RE = re.compile(r"^(-)?(\d+)(?:\.(\d{1,9}))?s$")
_MAX_DURATION_SECONDS = 315_576_000_000


class PreciseDuration(timedelta):
    """A timedelta that remembers the nanoseconds below its microseconds, so "1.000000001s" echoes exactly."""

    sub_micro_nanos: int = 0


def parse_duration(value: Any) -> timedelta:
    if isinstance(value, timedelta):
        return value
    if not isinstance(value, str):
        raise ValueError('a duration must be a string such as "3600s"')
    match = _DURATION_RE.match(value.strip())
    if not match:
        raise ValueError(
            f'invalid duration {value!r}: use seconds with an "s" suffix, such as "3600s" or "1.5s"'
        )
    sign, whole, frac = match.groups()
    seconds = int(whole)
    if seconds > _MAX_DURATION_SECONDS:
        raise ValueError(f"duration {value!r} is out of range")
    nanos = int((frac or "0").ljust(9, "0"))
    micros, sub_micro = divmod(nanos, 1000)
    result = timedelta(seconds=seconds, microseconds=micros)
    result = -result if sign else result
    if not sub_micro:
        return result
    precise = PreciseDuration(days=result.days, seconds=result.seconds, microseconds=result.microseconds)
    precise.sub_micro_nanos = -sub_micro if sign else sub_micro
    return precise


def fraction_digits(nanos: int) -> str:
    """Fractional seconds as protobuf prints them: none, or 3, 6 or 9 digits."""
    if nanos == 0:
        return ""
    if nanos % 1_000_000 == 0:
        return f".{nanos // 1_000_000:03d}"
    if nanos % 1000 == 0:
        return f".{nanos // 1000:06d}"
    return f".{nanos:09d}"


def format_duration(value: timedelta) -> str:
    """Canonical proto3 JSON: 0, 3, 6 or 9 fractional digits, as protobuf prints it."""
    total_ns = (value // timedelta(microseconds=1)) * 1000 + getattr(value, "sub_micro_nanos", 0)
    sign = "-" if total_ns < 0 else ""
    seconds, nanos = divmod(abs(total_ns), 1_000_000_000)
    return f"{sign}{seconds}{fraction_digits(nanos)}s"


Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "pattern": r"^-?\d+(\.\d+)?s$"}),
]


# ---------------------------------------------------------------- Timestamp
def parse_timestamp(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise ValueError("a timestamp must be an RFC 3339 string")
    text = value.strip()
    if not re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$", text):
        raise ValueError(f"invalid RFC 3339 timestamp {value!r}")
    text = text.replace("Z", "+00:00")
    frac = re.search(r"\.(\d+)", text)
    if frac and len(frac.group(1)) > 6:
        text = text.replace(frac.group(0), "." + frac.group(1)[:6])
    try:
        return datetime.fromisoformat(text).astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"timestamp {value!r} is out of range") from None


def format_timestamp(value: datetime) -> str:
    """RFC 3339 in UTC with 0, 3 or 6 fractional digits, as protobuf prints it."""
    value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    # Four-digit year as RFC 3339 requires: strftime's %Y does not pad years before 1000.
    base = f"{value.year:04d}-" + value.strftime("%m-%dT%H:%M:%S")
    return f"{base}{fraction_digits(value.microsecond * 1000)}Z"


Timestamp = Annotated[
    datetime,
    BeforeValidator(parse_timestamp),
    PlainSerializer(format_timestamp, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


# ---------------------------------------------------------------- enums
class ProtoEnum(enum.IntEnum):
    """A proto enum: names on the wire, integers accepted on input."""

    @classmethod
    def parse(cls, value: Any) -> ProtoEnum:
        if isinstance(value, cls):
            return value
        if isinstance(value, bool):
            raise ValueError(f"invalid {cls.__name__} value {value!r}")
        if isinstance(value, int):
            try:
                return cls(value)
            except ValueError:
                raise ValueError(f"invalid {cls.__name__} value {value}") from None
        if isinstance(value, str):
            try:
                return cls[value]
            except KeyError:
                raise ValueError(
                    f"invalid {cls.__name__} value {value!r}; expected one of "
                    + ", ".join(m.name for m in cls)
                ) from None
        raise ValueError(f"invalid {cls.__name__} value {value!r}")


def enum_field(cls: type[ProtoEnum]) -> Any:
    return Annotated[
        cls,
        BeforeValidator(cls.parse),
        PlainSerializer(lambda v: cls(v).name, return_type=str, when_used="json"),
        WithJsonSchema({"type": "string", "enum": [m.name for m in cls]}),
    ]


def now_utc() -> datetime:
    return datetime.now(UTC)
