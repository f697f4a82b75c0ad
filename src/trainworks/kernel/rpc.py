"""gRPC serving: the RPCs of the official Vertex services, answered by the service methods REST calls.

No kind here. A kind says which RPCs of an official service it answers and with which of its service methods
(kinds/<kind>/rpc.py); this module gives the rest:

- The official RPC tables. A service descriptor where the package registers one (google.longrunning.Operations
  in googleapis-common-protos); for the Vertex services, whose published package registers no service
  descriptors, the package's own map of RPCs to GAPIC methods (gapic_metadata.json) and the typed stubs of
  its gRPC transport (`Callable[[CreateCustomJobRequest], CustomJob]`): no hand-copied .proto files.
- Bindings of a REST collection's methods (kernel/routes.py) to RPCs: the request, in proto3 JSON, gives the
  values the route would pass (the path's from `name`, `parent` or an update's `model.name`, each query
  parameter from the field of the same JSON name, the body from the field REST transcoding sends as the body,
  or all the others for `body: "*"`), and the route's service method is called with them. One mapping,
  never a second implementation.
- The server. A request becomes the canonical JSON a REST client sends (json_format.MessageToDict); the
  answer, canonical JSON of the official message, is parsed strictly (a field the message lacks is a fault
  of the server: INTERNAL, and logged). An ApiError becomes the gRPC status with a google.rpc.Status in
  `grpc-status-details-bin`, carrying the BadRequest and ErrorInfo details REST gives. Who may call what,
  and the answer to an unexpected failure, are the HTTP app's rules, passed in (the kernel knows no app).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.resources
import json
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar
from urllib.parse import unquote

import grpc
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2  # noqa: F401 - BadRequest, ErrorInfo: a Status's details

from trainworks.kernel.errors import ApiError, FieldViolation, invalid_argument
from trainworks.kernel.list_query import ListQuery
from trainworks.kernel.request_load import RequestLoad
from trainworks.kernel.routes import (
    API_VERSION,
    BODY,
    LIST_QUERY,
    LIST_QUERY_FIELDS,
    LOCATION,
    Argument,
    Collection,
    Method,
    Query,
)
from trainworks.kernel.status import status_dict
from trainworks.kernel.wire_errors import snake

if TYPE_CHECKING:
    from trainworks.tls import ServerTls

S = TypeVar("S")
Json = dict[str, Any]
# An RPC's work: its request as proto3 JSON in, its response as proto3 JSON out (None: google.protobuf.Empty).
Handler = Callable[[Json], Json | None]

VERSIONS = ("v1", "v1beta1")
DETAILS_KEY = "grpc-status-details-bin"


# ----------------------------------------------------------------------------------- official RPC tables
@dataclass(frozen=True)
class Rpc:
    """One method of a gRPC service, with its request and response messages (raw protobuf classes)."""

    name: str  # CreateCustomJob
    request: type[Message]
    response: type[Message]


@dataclass(frozen=True)
class RpcService:
    name: str  # the full name: google.cloud.aiplatform.v1.JobService
    rpcs: Mapping[str, Rpc]


def descriptor_service(descriptor: ServiceDescriptor) -> RpcService:
    """A service from its descriptor (google.longrunning.Operations)."""
    rpcs = {
        m.name: Rpc(
            m.name,
            message_factory.GetMessageClass(m.input_type),
            message_factory.GetMessageClass(m.output_type),
        )
        for m in descriptor.methods
    }
    return RpcService(descriptor.full_name, rpcs)


def _raw(message: Any) -> type[Message]:
    """The protobuf class of a message type: a proto-plus class's `pb()`, or the class itself."""
    to_pb = getattr(message, "pb", None)
    raw = to_pb() if callable(to_pb) else message
    if not (isinstance(raw, type) and issubclass(raw, Message)):
        raise TypeError(f"{message!r} is no protobuf message type")
    return raw


@functools.cache
def vertex_service(api_version: str, name: str) -> RpcService:
    """A Vertex AI service (`JobService`) of an API version, from the published google-cloud-aiplatform.

    Its gapic_metadata.json maps each RPC to the GAPIC method that calls it; that method's stub on the gRPC
    transport is typed with the request and response messages. Streaming RPCs (none served) are left out."""
    package = f"google.cloud.aiplatform_{api_version}"
    metadata = json.loads(importlib.resources.files(package).joinpath("gapic_metadata.json").read_text())
    transport = importlib.import_module(f"{package}.services.{snake(name)}.transports.grpc")
    stubs = getattr(transport, f"{name}GrpcTransport")
    rpcs: dict[str, Rpc] = {}
    for rpc, entry in metadata["services"][name]["clients"]["grpc"]["rpcs"].items():
        (method,) = entry["methods"]
        signature = typing.get_args(typing.get_type_hints(getattr(stubs, method).fget)["return"])
        if len(signature) == 2 and len(signature[0]) == 1:
            try:
                rpcs[rpc] = Rpc(rpc, _raw(signature[0][0]), _raw(signature[1]))
            except TypeError:
                continue  # a stream of messages
    return RpcService(f"{metadata['protoPackage']}.{name}", rpcs)


# ----------------------------------------------------------------------------------------- resource names
@dataclass(frozen=True)
class NameTemplate:
    """A resource name's form, written as a REST path template: `projects/{project}/locations/{location}`."""

    text: str

    @functools.cached_property
    def _pattern(self) -> re.Pattern[str]:
        parts = re.split(r"\{(\w+)\}", self.text.lstrip("/"))
        # Literal text and segment values alternate; a value is one path segment, as the REST path has it.
        regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>[^/]+)" for i, p in enumerate(parts))
        return re.compile(regex)

    def match(self, name: str) -> dict[str, str] | None:
        found = self._pattern.fullmatch(name)
        return found.groupdict() if found else None


LOCATION_TEMPLATE = NameTemplate(LOCATION)


def parse_name(field: str, name: str, *templates: NameTemplate) -> dict[str, str]:
    """The segment values of the first template `name` (the request's `field`) matches; INVALID_ARGUMENT
    when it matches none (REST has no such request: its path would match no route)."""
    if not name:
        raise invalid_argument([FieldViolation(field, "Required field is not set.")])
    for template in templates:
        values = template.match(name)
        if values is not None:
            return values
    forms = " or ".join(t.text.lstrip("/") for t in templates)
    raise invalid_argument([FieldViolation(field, f"expected a resource name of the form {forms}")])


# ------------------------------------------------------------------------------ bindings to REST methods
@dataclass(frozen=True)
class Binding:
    """The RPCs of one service a kind answers, and the API version whose REST paths auth judges them by."""

    service: RpcService
    api_version: str
    handlers: Mapping[str, Handler]  # by RPC name
    # By RPC name, the JSON keys of the request field naming the resource (UpdateModel: `model`, `name`);
    # an RPC not here names it in `name`, else `parent`.
    names: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)


ALL = "*"  # REST transcoding's `body: "*"`: every field of the request but the one in the path


@dataclass(frozen=True)
class Route:
    """An RPC answered by a REST collection's method: the route's name in the collection; the request field
    REST transcoding sends as the body (`custom_job`), for a method that takes one, or ALL (UploadModel);
    and the field naming the resource where it is not `name` (or `parent` for a method on the collection),
    as an update's `model.name`."""

    method: str
    body: str = ""
    name: str = ""


def job_routes(singular: str, plural: str, body: str) -> dict[str, Route]:
    """The RPCs of a job collection (kernel/routes.py's job_methods): Create<singular> with the job in the
    request field `body`, List<plural>, Get, Cancel and Delete<singular>, each answered by the route of the
    same name."""
    return {
        f"Create{singular}": Route("create", body=body),
        f"List{plural}": Route("list_"),
        f"Get{singular}": Route("get"),
        f"Cancel{singular}": Route("cancel"),
        f"Delete{singular}": Route("delete"),
    }


def bind_collection(
    collection: Collection[S], service: S, rpcs: RpcService, api_version: str, routes: Mapping[str, Route]
) -> Binding:
    """The RPCs of `routes`, each answered by the collection's method of the route's name, called as the
    REST route calls it. A route, RPC or request field that does not exist fails here, at start-up."""
    methods = {m.name: m for m in collection.methods}
    handlers: dict[str, Handler] = {}
    names: dict[str, tuple[str, ...]] = {}
    for name, route in routes.items():
        method, rpc = methods[route.method], rpcs.rpcs[name]
        # The REST path names the resource (`name`), or for a method on the collection its location.
        field = route.name or ("name" if method.on_resource else "parent")
        names[name] = _json_path(rpc, field)
        handlers[name] = _route_handler(collection, method, service, rpc, api_version, route.body, field)
    return Binding(rpcs, api_version, handlers, names)


def bind_vertex(
    collection: Collection[S], service: S, service_name: str, routes: Mapping[str, Route]
) -> list[Binding]:
    """A Vertex service's RPCs of `routes` (bind_collection), served at every API version."""
    return [
        bind_collection(collection, service, vertex_service(version, service_name), version, routes)
        for version in VERSIONS
    ]


def _route_handler(
    collection: Collection[S],
    method: Method[S],
    service: S,
    rpc: Rpc,
    api_version: str,
    body: str,
    field: str,
) -> Handler:
    if method.on_resource:
        template = NameTemplate(f"{LOCATION}/{collection.segment}/{{{collection.id_name}}}")
    else:
        template = LOCATION_TEMPLATE
    keys = _json_path(rpc, field)
    readers = [_reader(arg, rpc, body, api_version, keys[0]) for arg in method.args]

    def handle(request: Json) -> Json | None:
        path = parse_name(field, _resource_name(request, keys), template).values()
        return method.call(service, *path, *(read(request) for read in readers))

    return handle


def _reader(arg: Argument, rpc: Rpc, body: str, api_version: str, in_path: str) -> Callable[[Json], Any]:
    """How a route's argument is read off the RPC's request (`in_path`: the JSON key the REST path has)."""
    if arg is API_VERSION:
        return _constant(api_version)
    if arg is LIST_QUERY:
        # Each part as its query parameter; one the request lacks (v1beta1's ListModels has no order_by)
        # is never sent, so always absent.
        fields = rpc.request.DESCRIPTOR.fields_by_name
        reads = [
            _reader(q, rpc, body, api_version, in_path) if q.snake in fields else _constant(_absent(q))
            for q in LIST_QUERY_FIELDS
        ]
        return lambda request: ListQuery(*(read(request) for read in reads))
    if arg is BODY and body == ALL:
        return lambda request: {key: value for key, value in request.items() if key != in_path}
    default: Any
    if arg is BODY:
        key, default = _json_name(rpc, body), {}
    else:
        assert isinstance(arg, Query)
        # A query parameter is the request field of the same JSON name; absent, it is what REST reads then.
        key, default = _json_name(rpc, arg.snake), _absent(arg)
        if key != arg.camel:
            raise ValueError(f"{rpc.name}: the field of query parameter {arg.camel} is {key}")
    return lambda request: request.get(key, default)


def _absent(query: Query) -> int | str:
    """What the route reads for a query parameter not sent."""
    return 0 if query.integer else ""


def _constant(value: Any) -> Callable[[Json], Any]:
    return lambda _request: value


def _json_name(rpc: Rpc, field: str) -> str:
    """The JSON name of a field of the request itself."""
    (key,) = _json_path(rpc, field)
    return key


def _json_path(rpc: Rpc, field: str) -> tuple[str, ...]:
    """The JSON keys of a request field, `model.name` as (`model`, `name`); one that does not exist fails."""
    descriptor: Any = rpc.request.DESCRIPTOR
    keys = []
    for part in field.split("."):
        found = descriptor.fields_by_name.get(part) if descriptor is not None else None
        if found is None:
            raise ValueError(f"{rpc.name}: its request has no field {field!r}")
        keys.append(str(found.json_name))
        descriptor = found.message_type
    return tuple(keys)


def _resource_name(request: Json, keys: tuple[str, ...]) -> str:
    """The text at `keys` in a request (proto3 JSON), or "" when it has none."""
    value: Any = request
    for key in keys:
        value = value.get(key, "") if isinstance(value, dict) else ""
    return value if isinstance(value, str) else ""


# ------------------------------------------------------------------------------------------------ errors
def status_of(error: ApiError) -> Any:
    """The google.rpc.Status of an error, with the details its REST body has."""
    return json_format.ParseDict(status_dict(error.code, error.message, error.details()), status_pb2.Status())


def _abort(context: grpc.ServicerContext, error: ApiError) -> NoReturn:
    context.set_trailing_metadata(((DETAILS_KEY, status_of(error).SerializeToString()),))
    context.abort(grpc.StatusCode[error.code.name], error.message)
    raise AssertionError("grpc's abort returned")  # it raises


# ------------------------------------------------------------------------------------------------ server
@dataclass(frozen=True)
class RpcCall:
    """What auth judges a call by: as api/auth.py judges the REST request for the same resource."""

    path: str  # the REST path of the resource the request names: /v1/projects/p/locations/l/customJobs/1
    metadata: tuple[tuple[str, str], ...]  # the call's text metadata (keys lower case, as gRPC has them)
    client: tuple[str, int] | None  # the caller's address
    # The server's listening address (gRPC does not tell which local address a call came to): the host
    # may be a wildcard (0.0.0.0).
    listening: tuple[str, int]


Authorize = Callable[[RpcCall], ApiError | None]  # why a call is refused, or None
Unexpected = Callable[[Exception], ApiError]  # the answer to any other failure (logged by it)


def peer_address(peer: str) -> tuple[str, int] | None:
    """(host, port) of gRPC's peer string (`ipv4:127.0.0.1:5000`, `ipv6:%5B::1%5D:5000`); None for others."""
    kind, _, rest = unquote(peer).partition(":")
    host, _, port = rest.rpartition(":")
    if kind not in ("ipv4", "ipv6") or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


class RpcServer:
    """A gRPC server answering the bindings' RPCs, in a thread pool of its own: over TLS with the server's
    certificate and key (`tls`), else insecure."""

    def __init__(
        self,
        host: str,
        port: int,
        bindings: Sequence[Binding],
        authorize: Authorize,
        unexpected: Unexpected,
        max_message_bytes: int,
        workers: int = 32,
        tls: ServerTls | None = None,
        load: RequestLoad | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.load = load  # told of every call while it runs (controllers let requests go first)
        self.tls = tls
        self.authorize, self.unexpected = authorize, unexpected
        self.max_message_bytes = max_message_bytes
        self.workers = workers
        # Kinds share services (custom and tuning jobs are both JobService): one table per service.
        self._methods: dict[str, dict[str, grpc.RpcMethodHandler]] = {}
        for binding in bindings:
            table = self._methods.setdefault(binding.service.name, {})
            for name, handler in binding.handlers.items():
                if name in table:
                    raise ValueError(f"{binding.service.name}/{name} is bound twice")
                table[name] = self._method(binding, binding.service.rpcs[name], handler)
        self._server: Any = None

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"{host}:{self.port}"

    def start(self) -> None:
        handlers = [
            grpc.method_handlers_generic_handler(name, table) for name, table in self._methods.items()
        ]
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="grpc"),
            handlers=handlers,
            # No SO_REUSEPORT: a second server on the same port must fail, not share it.
            options=[("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", self.max_message_bytes)],
        )
        try:
            if self.tls is None:
                self.port = server.add_insecure_port(self.address)
            else:
                # The same files as HTTPS (checked at start-up: tls.load_server_tls), read now.
                pair = [(self.tls.key_pem(), self.tls.chain_pem())]
                self.port = server.add_secure_port(self.address, grpc.ssl_server_credentials(pair))
        except RuntimeError as exc:
            raise RuntimeError(f"gRPC cannot listen on {self.address}: {exc}") from None
        server.start()
        self._server = server

    def stop(self, grace: float = 5.0) -> None:
        """Refuses new calls at once; calls in progress get `grace` seconds to finish."""
        if self._server is not None:
            self._server.stop(grace).wait()
            self._server = None

    def _method(self, binding: Binding, rpc: Rpc, handler: Handler) -> grpc.RpcMethodHandler:
        def answer(request: Message, context: grpc.ServicerContext) -> Message:
            if self.load is None:
                return respond(request, context)
            self.load.begin()
            try:
                return respond(request, context)
            finally:
                self.load.end()

        def respond(request: Message, context: grpc.ServicerContext) -> Message:
            try:
                as_json = json_format.MessageToDict(request)
                refused = self.authorize(self._call(binding, rpc.name, as_json, context))
                if refused is not None:
                    raise refused
                return json_format.ParseDict(handler(as_json) or {}, rpc.response())
            except ApiError as exc:
                error = exc
            except Exception as exc:
                error = self.unexpected(exc)
            _abort(context, error)

        return grpc.unary_unary_rpc_method_handler(
            answer,
            request_deserializer=rpc.request.FromString,
            response_serializer=rpc.response.SerializeToString,
        )

    def _call(self, binding: Binding, rpc: str, request: Json, context: grpc.ServicerContext) -> RpcCall:
        keys = binding.names.get(rpc)
        resource = (
            _resource_name(request, keys) if keys else request.get("name") or request.get("parent") or ""
        )
        metadata = tuple(
            (m.key, m.value) for m in context.invocation_metadata() if not m.key.endswith("-bin")
        )
        listening = (self.host.strip("[]"), self.port)
        return RpcCall(
            f"/{binding.api_version}/{resource}", metadata, peer_address(context.peer()), listening
        )
