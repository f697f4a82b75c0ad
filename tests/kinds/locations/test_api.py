"""The Locations API against real servers: the official Python client's `list_locations` and `get_location`
mixins (JobServiceClient, REST transport), the /v1beta1 and /ui forms, paging, filters, and NOT_FOUND for a
location the capacity inventory does not serve. One location per region of the inventory."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1
from google.cloud.location import locations_pb2
from google.protobuf import json_format

from tests.support.server import PROJECT, ServerProcess, inventory_server
from trainworks.kinds.locations.wire import ListLocationsResponse, Location

INVENTORY = """\
regions:
  us-central1: {elastic: true}
  europe-west4: {elastic: true}
  asia-east1: {elastic: true}
"""
REGIONS = ["asia-east1", "europe-west4", "us-central1"]


@pytest.fixture(scope="module")
def regional(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server whose inventory names three regions and has no default region."""
    with inventory_server(tmp_path_factory.mktemp("regional"), INVENTORY) as proc:
        yield proc


def client(server: ServerProcess) -> aiplatform_v1.JobServiceClient:
    return aiplatform_v1.JobServiceClient(
        transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": server.url}
    )


def strict(body: dict[str, Any], message: Any) -> Any:
    parsed = message()
    json_format.Parse(json.dumps(body), parsed, ignore_unknown_fields=False)
    return parsed


def project_number(server: ServerProcess) -> str:
    with server.client() as http:
        return str(http.get(f"/v1/projects/{PROJECT}/locations").json()["locations"][0]["name"].split("/")[1])


def test_the_official_client_lists_and_gets_each_region(regional: ServerProcess) -> None:
    jobs = client(regional)
    listed = jobs.list_locations(locations_pb2.ListLocationsRequest(name=f"projects/{PROJECT}"))
    assert [loc.location_id for loc in listed.locations] == REGIONS
    assert not listed.next_page_token
    number = project_number(regional)
    for location in listed.locations:
        assert location.name == f"projects/{number}/locations/{location.location_id}"
        assert location.display_name == location.location_id
    got = jobs.get_location(
        locations_pb2.GetLocationRequest(name=f"projects/{PROJECT}/locations/europe-west4")
    )
    assert got.location_id == "europe-west4" and got.name == f"projects/{number}/locations/europe-west4"


def test_a_location_the_inventory_does_not_serve_is_not_found(regional: ServerProcess) -> None:
    with pytest.raises(exceptions.NotFound, match="Location"):
        client(regional).get_location(
            locations_pb2.GetLocationRequest(name=f"projects/{PROJECT}/locations/southamerica-east1")
        )
    with regional.client() as http:
        answer = http.get(f"/v1/projects/{PROJECT}/locations/southamerica-east1")
    assert answer.status_code == 404
    assert answer.json()["error"]["status"] == "NOT_FOUND"


def test_pages_and_filters(regional: ServerProcess) -> None:
    jobs = client(regional)
    first = jobs.list_locations(locations_pb2.ListLocationsRequest(name=f"projects/{PROJECT}", page_size=2))
    assert [loc.location_id for loc in first.locations] == REGIONS[:2] and first.next_page_token
    rest = jobs.list_locations(
        locations_pb2.ListLocationsRequest(
            name=f"projects/{PROJECT}", page_size=2, page_token=first.next_page_token
        )
    )
    assert [loc.location_id for loc in rest.locations] == REGIONS[2:] and not rest.next_page_token
    for flt, wanted in [
        ('location_id="europe-west4"', ["europe-west4"]),
        ("locationId:us-*", ["us-central1"]),
        ('NOT displayName="asia-east1"', ["europe-west4", "us-central1"]),
        ("locationId=asia-east1 OR locationId=us-central1", ["asia-east1", "us-central1"]),
        ("labels:team", []),
        ("labels.team!=ml", REGIONS),
        ('name:"*/locations/asia-east1"', ["asia-east1"]),
    ]:
        found = jobs.list_locations(
            locations_pb2.ListLocationsRequest(name=f"projects/{PROJECT}", filter=flt)
        )
        assert [loc.location_id for loc in found.locations] == wanted, flt


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"filter": "region=us-central1"}, "filter"),
        ({"filter": "locationId<us"}, "filter"),
        ({"filter": "labels=x"}, "filter"),
        ({"pageSize": "-1"}, "page_size"),
        ({"pageSize": "two"}, "page_size"),
        ({"pageToken": "%%%"}, "page_token"),
    ],
)
def test_bad_lists_name_the_field(regional: ServerProcess, query: dict[str, str], field: str) -> None:
    with regional.client() as http:
        answer = http.get(f"/v1/projects/{PROJECT}/locations", params=query)
    assert answer.status_code == 400, answer.text
    violations = answer.json()["error"]["details"][0]["fieldViolations"]
    assert [v["field"] for v in violations] == [field]


def test_every_prefix_answers_the_official_messages(regional: ServerProcess) -> None:
    with regional.client() as http:
        for prefix in ("/v1", "/v1beta1", "/ui"):
            listed = http.get(f"{prefix}/projects/{PROJECT}/locations")
            assert listed.status_code == 200, (prefix, listed.text)
            strict(listed.json(), locations_pb2.ListLocationsResponse)
            got = http.get(f"{prefix}/projects/{PROJECT}/locations/asia-east1")
            assert got.status_code == 200, (prefix, got.text)
            assert json_format.MessageToDict(strict(got.json(), locations_pb2.Location)) == got.json()
        bad = http.get(f"/v1/projects/{PROJECT}/locations/not_a_region!")
        assert bad.status_code == 400


def test_the_default_inventory_lists_its_region_and_serves_every_location(server: ServerProcess) -> None:
    """The built-in inventory: one elastic region, `local`, which serves any location."""
    jobs = client(server)
    listed = jobs.list_locations(locations_pb2.ListLocationsRequest(name=f"projects/{PROJECT}"))
    assert [loc.location_id for loc in listed.locations] == ["local"]
    for location in ("us-central1", "europe-west4", "local"):
        got = jobs.get_location(
            locations_pb2.GetLocationRequest(name=f"projects/{PROJECT}/locations/{location}")
        )
        assert got.location_id == location


def test_wire_models_match_the_official_messages() -> None:
    location = Location(
        name="projects/1/locations/l", location_id="l", display_name="L", labels={"a": "b"}
    ).to_wire()
    parsed = strict(location, locations_pb2.Location)
    assert json_format.MessageToDict(parsed) == location
    page = ListLocationsResponse(locations=[Location(location_id="l")], next_page_token="t").to_wire()
    assert json_format.MessageToDict(strict(page, locations_pb2.ListLocationsResponse)) == page
    assert Location.model_validate({"location_id": "x", "displayName": "y"}).to_wire() == {
        "locationId": "x",
        "displayName": "y",
    }
