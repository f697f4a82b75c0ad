"""The REST client's typed results against what the server really answers.

Every successful response recorded in tests/system/wire_corpus.json, of a route the client calls, is read as
the client reads it (`WireModel.from_server`: lenient) and written back: `to_wire()` must give the recorded
body exactly. The extensions' answers (no proto) are TypedDicts: pydantic checks each recorded body against
its TypedDict, which must describe every key of it. The corpus holds placeholders for what varies from run to
run (`<time>`, `<id3>`...): they are put back as real values of their kind first.

Then the lenient mode itself: unknown fields are dropped at every depth, the order of what was read is kept,
and the server's own parsing stays strict.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from trainworks.capacity.client import CapacityReport
from trainworks.costs.client import CostsReport
from trainworks.kernel.longrunning import Operation
from trainworks.kernel.wire import FROM_SERVER, WireModel
from trainworks.kinds.clusters.wire import ModelDevelopmentCluster
from trainworks.kinds.custom_jobs.client import JobStatus, LogEntry, Preempted, TensorboardInfo
from trainworks.kinds.custom_jobs.wire import CustomJob
from trainworks.kinds.datasets.wire import Dataset
from trainworks.kinds.models.wire import Model
from trainworks.kinds.persistent_resources.wire import PersistentResource
from trainworks.kinds.training_pipelines.wire import TrainingPipeline
from trainworks.kinds.tuning_jobs.wire import HyperparameterTuningJob

CORPUS = Path(__file__).resolve().parents[1] / "system" / "wire_corpus.json"


# ====================================================================== what each route answers
@dataclass(frozen=True)
class Answer:
    """How the client reads a route's answer: as `model`, or each item under `items` (a List), or as a
    TypedDict (`extension`), or not at all (google.protobuf.Empty: the body must be `{}`)."""

    model: type[WireModel] | None = None
    items: str = ""
    extension: Any = None


EMPTY = Answer()
OPERATION = Answer(Operation)
_ID = r"/[^/:]+"
_LOCATION = r"/(?:v1|v1beta1)/projects/[^/]+/locations/[^/]+"
_EXTENSION = r"/trainworks/v1/projects/[^/]+/locations/[^/]+"


def _job_routes(collection: str, model: type[WireModel]) -> list[tuple[str, str, Answer]]:
    """The routes of a job kind: create and cancel are synchronous, delete an LRO."""
    return [
        ("POST", f"/{collection}", Answer(model)),
        ("GET", f"/{collection}", Answer(model, items=collection)),
        ("GET", f"/{collection}{_ID}", Answer(model)),
        ("POST", f"/{collection}{_ID}:cancel", EMPTY),
        ("DELETE", f"/{collection}{_ID}", OPERATION),
    ]


def _lro_routes(collection: str, model: type[WireModel], verbs: tuple[str, ...] = ()) -> list[Any]:
    """The routes of a kind whose changes are LROs (create, update, delete and `verbs`)."""
    return [
        ("POST", f"/{collection}", OPERATION),
        ("GET", f"/{collection}", Answer(model, items=collection)),
        ("GET", f"/{collection}{_ID}", Answer(model)),
        ("PATCH", f"/{collection}{_ID}", OPERATION),
        ("DELETE", f"/{collection}{_ID}", OPERATION),
        *(("POST", f"/{collection}{_ID}:{verb}", OPERATION) for verb in verbs),
    ]


ROUTES: list[tuple[str, str, Answer]] = [
    *_job_routes("customJobs", CustomJob),
    *_job_routes("hyperparameterTuningJobs", HyperparameterTuningJob),
    *_job_routes("trainingPipelines", TrainingPipeline),
    *_lro_routes("persistentResources", PersistentResource, ("reboot",)),
    *_lro_routes("modelDevelopmentClusters", ModelDevelopmentCluster),
    ("POST", "/datasets", OPERATION),
    ("GET", "/datasets", Answer(Dataset, items="datasets")),
    ("GET", f"/datasets{_ID}", Answer(Dataset)),
    ("PATCH", f"/datasets{_ID}", Answer(Dataset)),
    ("DELETE", f"/datasets{_ID}", OPERATION),
    ("POST", f"/datasets{_ID}:import", OPERATION),
    ("POST", "/models:upload", OPERATION),
    ("GET", "/models", Answer(Model, items="models")),
    ("GET", f"/models{_ID}", Answer(Model)),
    ("GET", f"/models{_ID}:listVersions", Answer(Model, items="models")),
    ("PATCH", f"/models{_ID}", Answer(Model)),
    ("DELETE", f"/models{_ID}", OPERATION),
    ("DELETE", f"/models{_ID}:deleteVersion", OPERATION),
    # get_operation and wait_operation, of any resource's operation or the location's
    ("GET", f"(?:/[a-zA-Z]+{_ID})?/operations{_ID}", OPERATION),
    ("POST", f"(?:/[a-zA-Z]+{_ID})?/operations{_ID}:wait", OPERATION),
]
EXTENSION_ROUTES: list[tuple[str, str, Answer]] = [
    ("GET", f"/customJobs{_ID}/status", Answer(extension=JobStatus)),
    ("GET", f"/customJobs{_ID}/tensorboard", Answer(extension=TensorboardInfo)),
    ("POST", f"/customJobs{_ID}:preempt", Answer(extension=Preempted)),
    ("GET", f"/customJobs{_ID}/logs", Answer(extension=list[LogEntry])),
    ("GET", "/costs", Answer(extension=CostsReport)),
    ("GET", "/capacity", Answer(extension=CapacityReport)),
]
# What the corpus does not exercise (its clusters are made by the CLI tests, preemption by the chaos tests).
NOT_RECORDED = {
    ("POST", "/modelDevelopmentClusters"),
    ("GET", f"/modelDevelopmentClusters{_ID}"),
    ("PATCH", f"/modelDevelopmentClusters{_ID}"),
    ("DELETE", f"/modelDevelopmentClusters{_ID}"),
    ("POST", f"/customJobs{_ID}:preempt"),
}


def answer_of(method: str, path: str) -> tuple[tuple[str, str], Answer] | None:
    """The route (method, pattern) and answer of a request the client makes; None for the others."""
    for prefix, routes in ((_LOCATION, ROUTES), (_EXTENSION, EXTENSION_ROUTES)):
        for route_method, pattern, answer in routes:
            if method == route_method and re.fullmatch(prefix + pattern, path):
                return (route_method, pattern), answer
    return None


# ====================================================================== the corpus, its placeholders put back
_PLACEHOLDER_ID = re.compile(r"<id(\d+)>")
# Timestamps as the server writes them: whole seconds, milliseconds or microseconds (kernel/wire.py).
_TIMES = ("2026-01-02T03:04:05Z", "2026-01-02T03:04:05.678Z", "2026-01-02T03:04:05.678901Z")


def real_values(value: Any, times: Iterator[str]) -> Any:
    """`value` with each placeholder of the corpus replaced by a real value of its kind."""
    if isinstance(value, dict):
        return {key: real_values(item, times) for key, item in value.items()}
    if isinstance(value, list):
        return [real_values(item, times) for item in value]
    if value == "<time>":
        return next(times)
    if value == "<duration>":
        return "1.500s"
    if value == "<measured>":
        return 2
    if isinstance(value, str):
        return _PLACEHOLDER_ID.sub(lambda m: str(1_000_000_000_000_000 + int(m.group(1))), value)
    return value


def _cycle(values: tuple[str, ...]) -> Iterator[str]:
    while True:
        yield from values


@dataclass(frozen=True)
class Recorded:
    route: tuple[str, str]
    answer: Answer
    body: Any
    where: str  # METHOD path, for the test's ID

    def id(self) -> str:
        return self.where


def recorded() -> list[Recorded]:
    exchanges = json.loads(CORPUS.read_text())["exchanges"]
    found = []
    for index, exchange in enumerate(exchanges):
        request, response = exchange["request"], exchange["response"]
        if not 200 <= response["status"] < 300:
            continue
        method, path = request["method"], request["path"].split("?")[0]
        matched = answer_of(method, path)
        if matched is not None:
            body = real_values(response.get("body", {}), _cycle(_TIMES))
            found.append(Recorded(*matched, body, f"{index}:{method} {path}"))
    return found


RECORDED = recorded()


def test_the_corpus_exercises_every_route_the_client_calls() -> None:
    seen = {item.route for item in RECORDED}
    every = {(method, pattern) for method, pattern, _ in [*ROUTES, *EXTENSION_ROUTES]}
    assert every - seen == NOT_RECORDED


# ====================================================================== the round trip
# The resources an Operation's response may hold, by the last part of its `@type`.
RESULTS: dict[str, type[WireModel]] = {
    model.__name__: model for model in (Dataset, PersistentResource, ModelDevelopmentCluster, Model)
}


def _read(model: type[WireModel], body: dict[str, Any]) -> None:
    read = model.from_server(body)
    assert read.to_wire() == body
    # the order of the keys too: the CLI prints `to_wire()` as the server's JSON
    assert json.dumps(read.to_wire()) == json.dumps(body)
    if isinstance(read, Operation) and read.response and "name" in read.response:
        result = read.result(RESULTS[read.response["@type"].rsplit(".", 1)[-1]])
        assert result is not None
        assert json.dumps(result.to_wire()) == json.dumps(
            {k: v for k, v in read.response.items() if k != "@type"}
        )


@pytest.mark.parametrize("item", [i for i in RECORDED if i.answer.extension is None], ids=Recorded.id)
def test_model_gives_back_the_recorded_body(item: Recorded) -> None:
    answer = item.answer
    if answer.model is None:
        assert item.body == {}  # google.protobuf.Empty, which the client drops
    elif answer.items:
        assert set(item.body) <= {answer.items, "nextPageToken"}
        for resource in item.body.get(answer.items, []):
            _read(answer.model, resource)
    else:
        _read(answer.model, item.body)


@pytest.mark.parametrize("item", [i for i in RECORDED if i.answer.extension is not None], ids=Recorded.id)
def test_extension_answer_is_all_in_its_typed_dict(item: Recorded) -> None:
    # Keys a TypedDict does not name are dropped: what comes out equal names every key that came in.
    assert TypeAdapter(item.answer.extension).validate_python(item.body) == item.body


def test_operation_result_is_the_resource_without_its_type() -> None:
    dataset = {"name": "projects/1/locations/l/datasets/2", "displayName": "d", "labels": {}}
    op = Operation.from_server(
        {"name": "op", "done": True, "response": {"@type": "type.googleapis.com/x.Dataset", **dataset}}
    )
    result = op.result(Dataset)
    assert result is not None and result.display_name == "d"
    assert result.to_wire() == dataset  # an empty map the server sent is given back too
    assert Operation.from_server({"name": "op"}).result(Dataset) is None
    failed = {"name": "op", "done": True, "error": {"code": 10, "message": "aborted"}}
    assert Operation.from_server(failed).result(Dataset) is None


# ====================================================================== lenient, ordered, and strict
NEWER = {
    "name": "projects/1/locations/l/customJobs/2",
    "futureField": {"anything": [1, 2]},
    "state": "JOB_STATE_RUNNING",
    "jobSpec": {
        "workerPoolSpecs": [
            {"replicaCount": "1", "machineSpec": {"machineType": "m", "futureKnob": True}, "futurePool": 1}
        ],
        "futureSpec": "x",
    },
    "error": {"code": 3, "message": "m", "futureStatus": 1},
    "displayName": "d",
}


def test_a_newer_servers_fields_are_dropped_at_every_depth() -> None:
    job = CustomJob.model_validate(NEWER, context=FROM_SERVER)
    assert job.job_spec is not None and job.job_spec.worker_pool_specs[0].machine_spec is not None
    assert job.job_spec.worker_pool_specs[0].machine_spec.machine_type == "m"
    assert job.state.name == "JOB_STATE_RUNNING" and job.error is not None and job.error.code == 3
    assert job.to_wire() == {
        "name": "projects/1/locations/l/customJobs/2",
        "state": "JOB_STATE_RUNNING",
        "jobSpec": {"workerPoolSpecs": [{"replicaCount": "1", "machineSpec": {"machineType": "m"}}]},
        "error": {"code": 3, "message": "m"},
        "displayName": "d",
    }
    assert list(job.to_wire()) == ["name", "state", "jobSpec", "error", "displayName"]  # as read


def test_the_servers_parsing_stays_strict() -> None:
    with pytest.raises(ValidationError, match="futureField"):
        CustomJob.model_validate(NEWER)
    with pytest.raises(ValidationError, match="futureKnob"):
        CustomJob.model_validate({"jobSpec": NEWER["jobSpec"] | {"futureSpec": None}})
    # and what it writes is canonical: defaults left out, in the fields' order
    job = CustomJob.model_validate({"labels": {}, "displayName": "d", "name": "n"})
    assert job.to_wire() == {"name": "n", "displayName": "d"}


def test_fields_set_after_reading_are_written_after_those_read() -> None:
    job = CustomJob.from_server({"displayName": "d", "name": "n"})
    job.labels = {"a": "b"}
    assert list(job.to_wire()) == ["displayName", "name", "labels"]


def test_a_model_read_from_a_server_equals_one_parsed_here() -> None:
    wire = {"name": "n", "jobSpec": {"workerPoolSpecs": [{"replicaCount": "1"}]}}
    assert CustomJob.from_server(wire) == CustomJob.model_validate(wire)
    assert CustomJob.from_server(wire) != CustomJob.model_validate({**wire, "name": "m"})


def test_a_default_value_the_server_sent_is_given_back() -> None:
    body = {"name": "n", "labels": {}, "dataItemCount": "0"}
    assert Dataset.from_server(body).to_wire() == body
