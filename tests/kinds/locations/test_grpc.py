"""google.cloud.location.Locations over gRPC: the official clients' `list_locations` and `get_location` mixins
on their gRPC transport (an insecure loopback channel) against a real server: the inventory's regions, pages,
filters, NOT_FOUND and INVALID_ARGUMENT with their details; the mixin of every Vertex client on the one port;
the same answers as REST."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from google.api_core import exceptions
from google.cloud import aiplatform_v1, aiplatform_v1beta1
from google.cloud.location import locations_pb2
from google.protobuf import json_format

from tests.kinds.locations.test_api import INVENTORY, REGIONS
from tests.support.rpc import fields, gapic, grpc_server, status_of
from tests.support.server import PROJECT, ServerProcess

PROJECT_NAME = f"projects/{PROJECT}"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, grpc.Channel]]:
    """A server whose inventory names three regions (and has no default region), gRPC on."""
    folder = tmp_path_factory.mktemp("locations-grpc")
    inventory = folder / "inventory.yaml"
    inventory.write_text(INVENTORY)
    with grpc_server(folder / "home", "--inventory", str(inventory)) as opened:
        yield opened


@pytest.fixture(scope="module")
def jobs(served: tuple[ServerProcess, grpc.Channel]) -> aiplatform_v1.JobServiceClient:
    return gapic(aiplatform_v1.JobServiceClient, served[1])


@pytest.fixture(scope="module")
def http(served: tuple[ServerProcess, grpc.Channel]) -> Iterator[httpx.Client]:
    with served[0].client() as opened:
        yield opened


def listed(client: Any, **request: Any) -> Any:
    return client.list_locations(locations_pb2.ListLocationsRequest(name=PROJECT_NAME, **request))


def test_list_and_get_each_region(jobs: aiplatform_v1.JobServiceClient, http: httpx.Client) -> None:
    page = listed(jobs)
    assert [loc.location_id for loc in page.locations] == REGIONS and not page.next_page_token
    assert json_format.MessageToDict(page) == http.get(f"/v1/{PROJECT_NAME}/locations").json()
    for location in page.locations:
        got = jobs.get_location(
            locations_pb2.GetLocationRequest(name=f"{PROJECT_NAME}/locations/{location.location_id}")
        )
        assert got == location
        assert (
            json_format.MessageToDict(got)
            == http.get(f"/v1/{PROJECT_NAME}/locations/{got.location_id}").json()
        )


def test_pages_and_filters(jobs: aiplatform_v1.JobServiceClient) -> None:
    first = listed(jobs, page_size=2)
    assert [loc.location_id for loc in first.locations] == REGIONS[:2] and first.next_page_token
    rest = listed(jobs, page_size=2, page_token=first.next_page_token)
    assert [loc.location_id for loc in rest.locations] == REGIONS[2:] and not rest.next_page_token
    assert [loc.location_id for loc in listed(jobs, filter="locationId:us-*").locations] == ["us-central1"]


def test_every_vertex_client_has_the_mixin_on_the_one_port(
    served: tuple[ServerProcess, grpc.Channel],
) -> None:
    channel = served[1]
    for client_class in (
        aiplatform_v1.ModelServiceClient,
        aiplatform_v1.DatasetServiceClient,
        aiplatform_v1.PipelineServiceClient,
        aiplatform_v1.PersistentResourceServiceClient,
        aiplatform_v1beta1.JobServiceClient,
    ):
        client = gapic(client_class, channel)
        assert [loc.location_id for loc in listed(client).locations] == REGIONS, client_class


def test_a_location_the_inventory_does_not_serve_is_not_found(
    jobs: aiplatform_v1.JobServiceClient, http: httpx.Client
) -> None:
    name = f"{PROJECT_NAME}/locations/southamerica-east1"
    with pytest.raises(exceptions.NotFound) as caught:
        jobs.get_location(locations_pb2.GetLocationRequest(name=name))
    assert status_of(caught.value).code == grpc.StatusCode.NOT_FOUND.value[0]
    rest = http.get(f"/v1/{name}").json()["error"]
    assert caught.value.message == rest["message"] and "Location" in rest["message"]


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"filter": "region=us-central1"}, "filter"),
        ({"page_size": -1}, "page_size"),
        ({"page_token": "%%%"}, "page_token"),
    ],
)
def test_bad_lists_name_the_field(
    jobs: aiplatform_v1.JobServiceClient, request_fields: dict[str, Any], field: str
) -> None:
    with pytest.raises(exceptions.InvalidArgument) as caught:
        listed(jobs, **request_fields)
    assert fields(caught.value) == [field]


def test_a_malformed_name_is_invalid_argument(jobs: aiplatform_v1.JobServiceClient) -> None:
    with pytest.raises(exceptions.InvalidArgument) as caught:
        jobs.list_locations(locations_pb2.ListLocationsRequest(name="locations"))
    assert fields(caught.value) == ["name"]
    with pytest.raises(exceptions.InvalidArgument) as caught:
        jobs.get_location(locations_pb2.GetLocationRequest(name=PROJECT_NAME))
    assert fields(caught.value) == ["name"]
