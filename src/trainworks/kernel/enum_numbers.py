"""Enums as numbers when a request asks for them: `$alt=json;enum-encoding=int`.

Canonical proto3 JSON writes an enum by its name or its number; the routes write names. google-gax (the
Node.js client's REST transport, and every GAPIC REST transport built with numeric enums) sends
`$alt=json;enum-encoding=int` and expects numbers. The response's official message type says which fields
are enums: it is looked up from the route's HTTP method and path in the official REST bindings (the
`google.api.http` rules of each RPC, as the published google-cloud-aiplatform REST transports carry them,
with the RPC's response type), then the body is walked along the message's descriptor, Any values by their
`@type`, and each enum name becomes its number. Everything else is left byte for byte as the route built it.

Without google-cloud-aiplatform (the `vertex` extra) no message type is known and names are written: every
proto3 JSON parser takes them as well.
"""

from __future__ import annotations

import functools
import importlib
import importlib.resources
import json
import re
import threading
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from starlette.requests import Request

from trainworks.kernel.wire_errors import snake

ALT = "$alt"
NUMBERS = "enum-encoding=int"

# The RPCs every Vertex service mixes in (google.longrunning.Operations, google.cloud.location.Locations):
# their REST transports carry the bindings but no response types.
_MIXINS = {
    "GetOperation": "google.longrunning.Operation",
    "ListOperations": "google.longrunning.ListOperationsResponse",
    "WaitOperation": "google.longrunning.Operation",
    "CancelOperation": "google.protobuf.Empty",
    "DeleteOperation": "google.protobuf.Empty",
    "GetLocation": "google.cloud.location.Location",
    "ListLocations": "google.cloud.location.ListLocationsResponse",
}
# Messages whose JSON object is no object of their fields: any JSON (its keys are the user's). The other
# well-known types are JSON scalars (Timestamp, Duration, wrappers...): never walked into.
_OPAQUE = frozenset({"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"})


def wants_numbers(request: Request) -> bool:
    """Whether the request asks for enums as numbers (`$alt=json;enum-encoding=int`)."""
    return NUMBERS in request.query_params.get(ALT, "")


def numbered_if_asked(request: Request, body: dict[str, Any]) -> dict[str, Any]:
    """`body`, the answer of the request's route, with its enums as numbers when the request asks for that
    and the route is an official one (else as it is)."""
    if not body or not wants_numbers(request):
        return body
    message = response_message(request.method, request.scope["path"])
    return body if message is None else numbered(body, message)


# ------------------------------------------------------------------------------ official REST bindings
@dataclass(frozen=True)
class _Binding:
    method: str  # GET, POST...
    path: re.Pattern[str]
    response: str  # the response message's full name
    verb: bool  # a custom method (`...}:cancel`, `models:upload`)


def _template_pattern(uri: str) -> re.Pattern[str]:
    """A `google.api.http` path template (`/v1/{name=projects/*/locations/*}/operations`) as a regex."""
    out: list[str] = []
    for i, part in enumerate(re.split(r"\{\w+(?:=([^}]*))?\}", uri)):
        if i % 2 == 0:
            out.append(re.escape(part))
        else:  # a variable: its segments' pattern, `*` when it has none
            segments = (part or "*").split("/")
            out.append(
                "/".join(".+" if s == "**" else "[^/]+" if s == "*" else re.escape(s) for s in segments)
            )
    return re.compile("".join(out))


def _bindings_of(transport: Any, rpc: str, response: str) -> list[_Binding]:
    base = getattr(transport, f"_Base{rpc}", None)
    options = getattr(base, "_get_http_options", None)
    if options is None:  # a streaming RPC: no REST binding
        return []
    return [
        _Binding(
            o["method"].upper(), _template_pattern(o["uri"]), response, ":" in o["uri"].rsplit("/", 1)[-1]
        )
        for o in options()
    ]


def _response_name(transport: Any, method: str) -> str | None:
    """The response message of a REST transport's method, from its stub's type: Callable[[Req], Resp]."""
    hints = typing.get_type_hints(getattr(transport, method).fget)
    signature = typing.get_args(hints.get("return"))
    if len(signature) != 2:
        return None
    response = signature[1]
    raw = response.pb() if hasattr(response, "pb") else response
    descriptor = getattr(raw, "DESCRIPTOR", None)
    return None if descriptor is None else str(descriptor.full_name)


def _service_bindings(package: str, name: str, rpcs: Mapping[str, Any], mixins: bool) -> list[_Binding]:
    module = importlib.import_module(f"{package}.services.{snake(name)}.transports.rest")
    transport = getattr(module, f"{name}RestTransport")
    found: list[_Binding] = []
    for rpc, entry in rpcs.items():
        (method,) = entry["methods"]
        response = _response_name(transport, method)
        if response is not None:
            found.extend(_bindings_of(transport, rpc, response))
    if mixins:
        for rpc, response in _MIXINS.items():
            found.extend(_bindings_of(transport, rpc, response))
    return found


@functools.cache
def _bindings(api_version: str) -> tuple[_Binding, ...]:
    """Every REST binding of the published package of `api_version` (v1, v1beta1), custom verbs first (a
    `*` would take `ID:verb` for an ID). Empty without the package."""
    package = f"google.cloud.aiplatform_{api_version}"
    try:
        metadata = json.loads(importlib.resources.files(package).joinpath("gapic_metadata.json").read_text())
    except ImportError:
        return ()
    _imported(api_version)  # registers every message type, for Any values' @type
    found: list[_Binding] = []
    for name, service in metadata["services"].items():
        rpcs = service["clients"].get("rest", {}).get("rpcs", {})
        try:
            # The mixins are the same on every service: the first one's will do.
            found.extend(_service_bindings(package, name, rpcs, mixins=not found))
        except (ImportError, AttributeError, TypeError, ValueError):
            continue  # a service this version of the package lays out otherwise: its enums stay names
    found.sort(key=lambda b: not b.verb)
    return tuple(found)


_LOCK = threading.Lock()


def response_message(method: str, path: str) -> Descriptor | None:
    """The official response message of `method path` (`GET /v1/projects/p/locations/l/customJobs/1`),
    None for a path no official RPC has."""
    version = path.split("/", 2)[1] if path.count("/") > 1 else ""
    if version == "ui":  # where the official clients reach operations and locations: in every package
        version = "v1"
    if version not in ("v1", "v1beta1"):
        return None
    with _LOCK:  # built once (seconds: the official types are imported), however many ask at first
        bindings = _bindings(version)
    for binding in bindings:
        if binding.method == method and binding.path.fullmatch(path):
            return _message(binding.response)
    return None


def _message(full_name: str) -> Descriptor | None:
    try:
        return descriptor_pool.Default().FindMessageTypeByName(full_name)
    except KeyError:
        pass
    # An Any of the other API version (an operation under /ui): its package registers it once imported.
    found = re.match(r"google\.cloud\.aiplatform\.(v1|v1beta1)\.", full_name)
    if found is None or not _imported(found.group(1)):
        return None
    try:
        return descriptor_pool.Default().FindMessageTypeByName(full_name)
    except KeyError:
        return None


@functools.cache
def _imported(api_version: str) -> bool:
    try:
        importlib.import_module(f"google.cloud.aiplatform_{api_version}")
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------------------------------- the walk
def numbered(value: dict[str, Any], message: Descriptor) -> dict[str, Any]:
    """`value`, proto3 JSON of `message`, with every enum name written as its number."""
    if message.full_name in _OPAQUE:
        return value
    if message.full_name == "google.protobuf.Any":
        return _any(value)
    fields = {f.json_name: f for f in message.fields}
    out: dict[str, Any] = {}
    for key, item in value.items():
        field = fields.get(key) or message.fields_by_name.get(key)
        out[key] = item if field is None else _field(item, field)
    return out


def _any(value: dict[str, Any]) -> dict[str, Any]:
    type_url = value.get("@type")
    inner = _message(type_url.rsplit("/", 1)[-1]) if isinstance(type_url, str) else None
    if inner is None or inner.full_name.startswith("google.protobuf."):
        return value  # unknown, or a well-known type (its JSON is under "value"): no enums
    return numbered(value, inner)


def _field(item: Any, field: FieldDescriptor) -> Any:
    message = field.message_type
    if message is not None and message.GetOptions().map_entry:
        entry = message.fields_by_name["value"]
        return {k: _single(v, entry) for k, v in item.items()} if isinstance(item, dict) else item
    if field.is_repeated and isinstance(item, list):
        return [_single(v, field) for v in item]
    return _single(item, field)


def _single(item: Any, field: FieldDescriptor) -> Any:
    enum = field.enum_type
    if enum is not None and isinstance(item, str):
        value = enum.values_by_name.get(item)
        return item if value is None else value.number
    if field.message_type is not None and isinstance(item, dict):
        return numbered(item, field.message_type)
    return item


__all__ = ["numbered", "numbered_if_asked", "response_message", "wants_numbers"]
