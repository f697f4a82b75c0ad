"""gRPC of google.longrunning.Operations: the OperationService calls of the REST routes (routes.py), for the
operations of a location and those under a resource, named as the REST paths name them."""

from __future__ import annotations

from google.longrunning import operations_pb2

from trainworks.kernel.operations import OperationService
from trainworks.kernel.rpc import Binding, Json, NameTemplate, descriptor_service, parse_name
from trainworks.kernel.wire import parse_duration
from trainworks.kinds.operations.routes import LOCATION, UNDER

# ListOperationsRequest.name is where the operations are; the other requests name one operation.
_PLACES = (NameTemplate(LOCATION), NameTemplate(UNDER))
_OPERATIONS = tuple(NameTemplate(place.text + "/operations/{op}") for place in _PLACES)


def _where(request: Json, templates: tuple[NameTemplate, ...]) -> tuple[str, str, str, str]:
    """Project, location, the resource the operations are under (`customJobs/1`, or "" at the location), and
    the operation's ID (or "")."""
    found = parse_name("name", request.get("name", ""), *templates)
    resource = f"{found['collection']}/{found['resource_id']}" if "collection" in found else ""
    return found["project"], found["location"], resource, found.get("op", "")


def bindings(operations: OperationService) -> list[Binding]:
    def list_operations(request: Json) -> Json:
        project, location, resource, _ = _where(request, _PLACES)
        page_size, page_token = request.get("pageSize", 0), request.get("pageToken", "")
        return operations.list(project, location, resource or None, page_size, page_token)

    def get_operation(request: Json) -> Json:
        return operations.get(*_where(request, _OPERATIONS))

    def wait_operation(request: Json) -> Json:
        timeout = parse_duration(request["timeout"]).total_seconds() if "timeout" in request else None
        return operations.wait(*_where(request, _OPERATIONS), timeout)

    def cancel_operation(request: Json) -> None:
        operations.cancel(*_where(request, _OPERATIONS))

    def delete_operation(request: Json) -> None:
        operations.delete(*_where(request, _OPERATIONS))

    handlers = {
        "ListOperations": list_operations,
        "GetOperation": get_operation,
        "WaitOperation": wait_operation,
        "CancelOperation": cancel_operation,
        "DeleteOperation": delete_operation,
    }
    # Operations carry their API version in their types; auth judges them as the REST paths under /v1/.
    return [
        Binding(descriptor_service(operations_pb2.DESCRIPTOR.services_by_name["Operations"]), "v1", handlers)
    ]
