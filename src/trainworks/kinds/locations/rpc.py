"""gRPC of google.cloud.location.Locations (the mixin every Vertex client has, one service on the port for
all of them): GetLocation and ListLocations, the LocationService calls of the REST routes (routes.py)."""

from __future__ import annotations

from google.cloud.location import locations_pb2  # type: ignore[import-untyped]  # ships no types

from trainworks.kernel.rpc import (
    LOCATION_TEMPLATE,
    Binding,
    Json,
    NameTemplate,
    descriptor_service,
    parse_name,
)
from trainworks.kinds.locations.routes import PROJECT
from trainworks.kinds.locations.service import LocationService

_PROJECT = NameTemplate(PROJECT)  # ListLocationsRequest.name: the project whose locations are listed


def bindings(locations: LocationService) -> list[Binding]:
    def list_locations(request: Json) -> Json:
        project = parse_name("name", request.get("name", ""), _PROJECT)["project"]
        return locations.list(
            project, request.get("pageSize", 0), request.get("pageToken", ""), request.get("filter", "")
        )

    def get_location(request: Json) -> Json:
        found = parse_name("name", request.get("name", ""), LOCATION_TEMPLATE)
        return locations.get(found["project"], found["location"])

    handlers = {"ListLocations": list_locations, "GetLocation": get_location}
    # The service has no API version of its own; auth judges its calls as the REST paths under /v1/.
    service = descriptor_service(locations_pb2.DESCRIPTOR.services_by_name["Locations"])
    return [Binding(service, "v1", handlers)]
