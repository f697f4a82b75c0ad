"""Wire models of the Locations API: google.cloud.location.Location and ListLocationsResponse."""

from __future__ import annotations

from typing import Any

from trainworks.kernel.wire import WireModel


class Location(WireModel):
    """google.cloud.location.Location."""

    name: str = ""  # projects/{project number}/locations/{location}
    location_id: str = ""  # us-central1
    display_name: str = ""
    labels: dict[str, str] = {}
    metadata: dict[str, Any] | None = None  # a google.protobuf.Any: none is set here


class ListLocationsResponse(WireModel):
    locations: list[Location] = []
    next_page_token: str = ""


__all__ = ["ListLocationsResponse", "Location"]
