"""JSON Schemas of response bodies, translated from the official proto descriptors as proto3 JSON maps them.

The Vertex routes answer with the JSON form of official messages (aiplatform v1/v1beta1 types, longrunning
Operation, google.protobuf.Empty). This module turns a message descriptor into a JSON Schema (2020-12, as
OpenAPI 3.1 uses) of its canonical proto3 JSON, the form the server writes:

- fields under their json_name (lowerCamelCase), and no others (`additionalProperties: false`), at most one
  member of each oneof, never `null`;
- int64, uint64, fixed64, sfixed64 and sint64 as decimal strings; 32-bit integers as bounded numbers;
  float and double as numbers or "NaN"/"Infinity"/"-Infinity"; bytes as base64; enums by name;
- repeated fields as arrays, maps as objects keyed by the key's text;
- well-known types in their special forms: Timestamp (RFC 3339 in UTC, `Z`, 0/3/6/9 fraction digits),
  Duration ("1.5s"), FieldMask (a string), Struct/Value/ListValue (any JSON), the wrappers (the wrapped
  value), Empty ({}), Any (an object naming its `@type`; its fields are checked by the proto parser, which
  looks the type up).

Messages become components named by their full proto name and are referenced with `$ref`, so recursive
messages are fine. The official types come from google-cloud-aiplatform, which the server does not need
otherwise: it is imported on the first call, and every translation is cached.
"""

from __future__ import annotations

import copy
import functools
import importlib
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

REF_PREFIX = "#/components/schemas/"
_F = FieldDescriptor

_INT64_PATTERN = r"^-?[0-9]+$"
_UINT64_PATTERN = r"^[0-9]+$"
_SPECIAL_FLOATS = ["NaN", "Infinity", "-Infinity"]
_NUMBER: dict[str, Any] = {"anyOf": [{"type": "number"}, {"type": "string", "enum": _SPECIAL_FLOATS}]}
# Standard or URL-safe alphabet, padded or not: what the proto JSON parser reads.
_BYTES: dict[str, Any] = {"type": "string", "pattern": r"^[A-Za-z0-9+/_-]*={0,2}$"}

_SCALARS: dict[int, dict[str, Any]] = {
    _F.TYPE_DOUBLE: _NUMBER,
    _F.TYPE_FLOAT: _NUMBER,
    _F.TYPE_INT64: {"type": "string", "pattern": _INT64_PATTERN},
    _F.TYPE_SINT64: {"type": "string", "pattern": _INT64_PATTERN},
    _F.TYPE_SFIXED64: {"type": "string", "pattern": _INT64_PATTERN},
    _F.TYPE_UINT64: {"type": "string", "pattern": _UINT64_PATTERN},
    _F.TYPE_FIXED64: {"type": "string", "pattern": _UINT64_PATTERN},
    _F.TYPE_INT32: {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1},
    _F.TYPE_SINT32: {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1},
    _F.TYPE_SFIXED32: {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1},
    _F.TYPE_UINT32: {"type": "integer", "minimum": 0, "maximum": 2**32 - 1},
    _F.TYPE_FIXED32: {"type": "integer", "minimum": 0, "maximum": 2**32 - 1},
    _F.TYPE_BOOL: {"type": "boolean"},
    _F.TYPE_STRING: {"type": "string"},
    _F.TYPE_BYTES: _BYTES,
}

# Canonical output: what json_format.MessageToJson and kernel/wire.py write.
_TIMESTAMP = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{3}|\.[0-9]{6}|\.[0-9]{9})?Z$"
_DURATION = r"^-?[0-9]+(\.[0-9]{3}|\.[0-9]{6}|\.[0-9]{9})?s$"
_WRAPPED = {
    "google.protobuf.DoubleValue": _F.TYPE_DOUBLE,
    "google.protobuf.FloatValue": _F.TYPE_FLOAT,
    "google.protobuf.Int64Value": _F.TYPE_INT64,
    "google.protobuf.UInt64Value": _F.TYPE_UINT64,
    "google.protobuf.Int32Value": _F.TYPE_INT32,
    "google.protobuf.UInt32Value": _F.TYPE_UINT32,
    "google.protobuf.BoolValue": _F.TYPE_BOOL,
    "google.protobuf.StringValue": _F.TYPE_STRING,
    "google.protobuf.BytesValue": _F.TYPE_BYTES,
}
_WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Timestamp": {"type": "string", "pattern": _TIMESTAMP},
    "google.protobuf.Duration": {"type": "string", "pattern": _DURATION},
    "google.protobuf.FieldMask": {"type": "string"},
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array"},
    "google.protobuf.Any": {
        "type": "object",
        "required": ["@type"],
        "properties": {"@type": {"type": "string", "pattern": r"^[^/]*/[A-Za-z_][A-Za-z0-9_.]*$"}},
    },
    **{name: _SCALARS[scalar] for name, scalar in _WRAPPED.items()},
}

# Where the official messages live: a module per proto package (imported lazily, they are large).
_MODULES = {
    "google.cloud.aiplatform.v1": "google.cloud.aiplatform_v1",
    "google.cloud.aiplatform.v1beta1": "google.cloud.aiplatform_v1beta1",
    "google.longrunning": "google.longrunning.operations_pb2",
    "google.cloud.location": "google.cloud.location.locations_pb2",
    "google.protobuf": "google.protobuf.empty_pb2",
}


def ref(full_name: str) -> dict[str, Any]:
    return {"$ref": REF_PREFIX + full_name}


@functools.cache
def descriptor(full_name: str) -> Descriptor:
    """The descriptor of an official message by its full proto name (google.cloud.aiplatform.v1.CustomJob).

    Raises ImportError when the package that defines it is not installed, KeyError for an unknown name."""
    package, _, name = full_name.rpartition(".")
    module = importlib.import_module(_MODULES[package])
    message = getattr(module, name)
    pb = message.pb() if hasattr(message, "pb") else message  # proto-plus class, or a raw protobuf one
    return pb.DESCRIPTOR


def _field(field: FieldDescriptor) -> tuple[dict[str, Any], list[Descriptor]]:
    """A field's value schema and the messages it refers to (to translate next)."""
    if field.type == _F.TYPE_MESSAGE:
        message = field.message_type
        assert message is not None  # a message field has its message type
        if message.GetOptions().map_entry:
            key, value = message.fields_by_name["key"], message.fields_by_name["value"]
            value_schema, refs = _field(value)
            schema: dict[str, Any] = {"type": "object", "additionalProperties": value_schema}
            if key.type == _F.TYPE_BOOL:  # other keys travel as their text
                schema["propertyNames"] = {"enum": ["true", "false"]}
            elif key.type != _F.TYPE_STRING:
                schema["propertyNames"] = {"pattern": _INT64_PATTERN}
            return schema, refs
        single, refs = _message_value(message)
    elif field.type == _F.TYPE_ENUM:
        enum = field.enum_type
        assert enum is not None  # an enum field has its enum type
        single = (
            {"type": "null"}
            if enum.full_name == "google.protobuf.NullValue"
            else {"type": "string", "enum": [value.name for value in enum.values]}
        )
        refs = []
    else:
        single, refs = _SCALARS[field.type], []
    if field.is_repeated:
        return {"type": "array", "items": single}, refs
    return single, refs


def _message_value(message: Descriptor) -> tuple[dict[str, Any], list[Descriptor]]:
    if message.full_name in _WELL_KNOWN:
        return _WELL_KNOWN[message.full_name], []
    return ref(message.full_name), [message]


@functools.cache
def _translate(message: Descriptor) -> tuple[dict[str, Any], tuple[Descriptor, ...]]:
    """One message's component schema and the messages its fields refer to."""
    properties: dict[str, Any] = {}
    refs: list[Descriptor] = []
    for field in message.fields:
        properties[field.json_name], field_refs = _field(field)
        refs += field_refs
    schema: dict[str, Any] = {
        "type": "object",
        "title": message.full_name,
        "properties": properties,
        "additionalProperties": False,
    }
    # A oneof with two or more members: no two of them together (proto3 `optional` is a oneof of one).
    pairs = [
        [a.json_name, b.json_name]
        for oneof in message.oneofs
        for i, a in enumerate(oneof.fields)
        for b in oneof.fields[i + 1 :]
    ]
    if pairs:
        schema["not"] = {"anyOf": [{"required": pair} for pair in pairs]}
    return schema, tuple(refs)


def components(roots: list[str]) -> dict[str, dict[str, Any]]:
    """Component schemas of the named messages and of every message they reach, by full proto name."""
    out: dict[str, dict[str, Any]] = {}
    pending = [descriptor(name) for name in roots]
    while pending:
        message = pending.pop()
        if message.full_name in out:
            continue
        if message.full_name in _WELL_KNOWN:
            out[message.full_name] = _WELL_KNOWN[message.full_name]
            continue
        schema, refs = _translate(message)
        out[message.full_name] = copy.deepcopy(schema)  # the caller's to change; the cache keeps its own
        pending += [r for r in refs if r.full_name not in out]
    return out
