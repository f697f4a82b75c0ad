"""The training-pipeline controller acts on events, not on every active pipeline each pass: the change feed
names a pipeline when its own row changes or its backing job does; a pipeline whose backing job waits (QUEUED
for capacity) costs nothing while it waits.

The server's services and controllers (wiring.py) run in this process and the test takes the pipeline
controller's passes one at a time, counting which pipelines each pass looked at."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.feed_looks import (
    STOCKED_OUT,
    Looks,
    assert_idle,
    assert_resync_reads_all,
    stocked_out_services,
)
from tests.support.jobs import python_pool
from tests.support.server import PROJECT
from trainworks.jobs.enums import JobState
from trainworks.kinds.training_pipelines.controller import TrainingPipelineController
from trainworks.wiring import Services

CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    with stocked_out_services(tmp_path) as built:
        yield built


def controller(services: Services) -> TrainingPipelineController:
    assert services.pipeline_controller is not None
    return services.pipeline_controller


def create(services: Services) -> int:
    """A custom-task pipeline in the stocked-out region: its backing CustomJob waits QUEUED."""
    assert services.training_pipelines is not None
    body = {
        "displayName": "waits",
        "trainingTaskDefinition": CUSTOM_TASK,
        "trainingTaskInputs": {"workerPoolSpecs": [python_pool("pass")]},
    }
    created = services.training_pipelines.create(PROJECT, STOCKED_OUT, body)
    return int(created["name"].rsplit("/", 1)[-1])


def backing(services: Services, pipeline_id: int) -> int:
    row = controller(services).store.get(pipeline_id)
    assert row is not None and row.backing_id is not None
    return row.backing_id


def state(services: Services, job_id: int) -> JobState:
    row = services.custom_jobs.job_row(job_id)
    assert row is not None
    return JobState(row.state)


def waiting(services: Services, looks: Looks) -> list[int]:
    """Two running pipelines whose backing jobs wait QUEUED; no pass has anything left to do."""
    pipelines = [create(services), create(services)]
    looks.passes(2)  # the first reads everything and creates the backing jobs; the next follows them
    services.controller.reconcile_once()  # the CustomJob controller's first look: they wait for capacity
    looks.passes()  # that looks at them once more
    for pipeline in pipelines:
        assert state(services, backing(services, pipeline)) == JobState.JOB_STATE_QUEUED
    return pipelines


def test_pipelines_whose_jobs_wait_are_not_looked_at(services: Services) -> None:
    looks = Looks(controller(services))
    waiting(services, looks)
    assert looks.full_reads == 1  # the first pass only
    assert_idle(looks)


def test_a_backing_jobs_change_names_its_pipeline_only(services: Services) -> None:
    looks = Looks(controller(services))
    first, second = waiting(services, looks)
    services.custom_jobs.cancel(PROJECT, STOCKED_OUT, str(backing(services, second)))
    assert looks.passes() == [second]
    services.controller.reconcile_once()  # the CustomJob controller ends it
    assert state(services, backing(services, second)) == JobState.JOB_STATE_CANCELLED
    assert looks.passes() == [second]  # its end names the pipeline, which ends with it
    row = controller(services).store.get(second)
    assert row is not None and row.state == JobState.JOB_STATE_CANCELLED
    assert first not in looks.rows


def test_a_cancelled_pipeline_cancels_its_job_and_ends_with_it(services: Services) -> None:
    looks = Looks(controller(services))
    first, _second = waiting(services, looks)
    assert services.training_pipelines is not None
    services.training_pipelines.cancel(PROJECT, STOCKED_OUT, str(first))
    assert looks.passes() == [first]  # it cancels its backing job
    assert state(services, backing(services, first)) == JobState.JOB_STATE_CANCELLING
    services.controller.reconcile_once()
    assert looks.passes() == [first]
    row = controller(services).store.get(first)
    assert row is not None and row.state == JobState.JOB_STATE_CANCELLED
    assert looks.passes() == []


def test_the_slow_resync_reads_every_active_pipeline(services: Services) -> None:
    looks = Looks(controller(services))
    assert_resync_reads_all(looks, waiting(services, looks))
