"""Locations: get, and list with pageSize, pageToken and an AIP-160 filter, from the capacity inventory.

A location is a region of the inventory (scheduling/inventory.py). List answers the inventory's named
regions in name order. Get finds those, and also any location the inventory's default region serves (the
built-in inventory's `local` serves every location): jobs run there, so a client that checks its location
first finds it. Any other location is NOT_FOUND. Names carry the project number, as every name does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from trainworks.kernel import listing
from trainworks.kernel.errors import FieldViolation, invalid_argument, not_found
from trainworks.kernel.filtering import And, Comparison, FilterError, Node, Not, Or, parse_filter
from trainworks.kernel.names import parent_name
from trainworks.kernel.projects import Projects
from trainworks.kinds.locations.wire import ListLocationsResponse, Location
from trainworks.scheduling.inventory import Inventory

MAX_LOCATION_ID = 63  # what a page token may carry

# The string fields a filter may compare, by either spelling, as their wire keys.
_FIELDS = {
    "name": "name",
    "location_id": "locationId",
    "locationId": "locationId",
    "display_name": "displayName",
    "displayName": "displayName",
}
_OPS = ("=", "!=", ":")


def location_wire(project_number: str, location: str) -> dict[str, Any]:
    return Location(
        name=parent_name(project_number, location), location_id=location, display_name=location
    ).to_wire()


class LocationService:
    def __init__(self, projects: Projects, inventory: Inventory) -> None:
        self.projects = projects
        self.inventory = inventory

    def get(self, project: str, location: str) -> dict[str, Any]:
        number = self.projects.number(project, location)
        if self.inventory.region(location) is None:
            raise not_found(f"Location {parent_name(number, location)!r}")
        return location_wire(number, location)

    def list(self, project: str, page_size: int, page_token: str, filter_text: str) -> dict[str, Any]:
        number = self.projects.number(project)
        size = listing.page_size(page_size)
        matches = _matcher(filter_text)
        after = listing.read_id_page_token(page_token, MAX_LOCATION_ID) if page_token else ""
        found = [
            wire
            for wire in (location_wire(number, name) for name in sorted(self.inventory.regions))
            if wire["locationId"] > after and matches(wire)
        ]
        page = ListLocationsResponse.model_validate({"locations": found[:size]})
        if len(found) > size:
            page.next_page_token = listing.id_page_token(found[size - 1]["locationId"])
        return page.to_wire()


# ---------------------------------------------------------------- filter
def _matcher(filter_text: str) -> Callable[[dict[str, Any]], bool]:
    """Whether a location (its wire form) passes the filter; a bad filter is INVALID_ARGUMENT at once."""
    if not filter_text.strip():
        return lambda _location: True
    try:
        node = parse_filter(filter_text)
        _holds(node, {})  # every comparison is checked, whatever the locations are
    except FilterError as exc:
        raise invalid_argument([FieldViolation("filter", str(exc))]) from None
    return lambda location: _holds(node, location)


def _holds(node: Node, location: dict[str, Any]) -> bool:
    # Every operand is evaluated (no short cut): a bad comparison fails even where it would not decide.
    if isinstance(node, And):
        return all([_holds(child, location) for child in node.operands])
    if isinstance(node, Or):
        return any([_holds(child, location) for child in node.operands])
    if isinstance(node, Not):
        return not _holds(node.operand, location)
    return _compare(node, location)


def _compare(node: Comparison, location: dict[str, Any]) -> bool:
    field, text = node.field[0], node.value.text
    if field == "labels":
        return _label(node, location.get("labels", {}))
    if field not in _FIELDS:
        raise FilterError(
            f"unknown field '{field}'; allowed fields: display_name, labels, location_id, name "
            "(camelCase spellings also work)",
            node.position,
        )
    if len(node.field) > 1:
        raise FilterError(f"field '{field}' has no sub-fields", node.position)
    _check_op(node, field)
    return _matches(node.op, location.get(_FIELDS[field]), text)


def _label(node: Comparison, labels: dict[str, str]) -> bool:
    if len(node.field) == 1:  # labels:KEY, AIP-160's "has key" form
        if node.op != ":":
            raise FilterError(
                f"compare a label as labels.KEY{node.op}VALUE, or test a key with labels:KEY",
                node.op_position,
            )
        return node.value.text in labels
    _check_op(node, "labels")
    key = ".".join(node.field[1:])
    if node.op == ":" and node.value.text == "*":
        return key in labels
    return _matches(node.op, labels.get(key), node.value.text)


def _check_op(node: Comparison, field: str) -> None:
    if node.op not in _OPS:
        raise FilterError(
            f"operator '{node.op}' is not supported for field '{field}'; use one of {', '.join(_OPS)}",
            node.op_position,
        )


def _matches(op: str, value: str | None, text: str) -> bool:
    """`value op text`: `:` is a glob where only `*` is special; a missing value equals nothing."""
    if op == "!=":
        return value != text
    if value is None:
        return False
    if op == ":":
        return re.fullmatch(".*".join(re.escape(part) for part in text.split("*")), value) is not None
    return value == text


__all__ = ["LocationService", "location_wire"]
