"""The tuning-job controller acts on events, not on every active tuning job each pass: the change feed names a
tuning job when its own row changes or one of its trials' CustomJobs does; a job with a trial running is
looked at for its reports; a job whose trials all wait (QUEUED for capacity) costs nothing while they wait.

The server's services and controllers (wiring.py) run in this process and the test takes the tuning
controller's passes one at a time, counting which tuning jobs each pass looked at."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
from trainworks.kinds.tuning_jobs.controller import TuningJobController
from trainworks.wiring import Services

TRIALS = 3


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    with stocked_out_services(tmp_path) as built:
        yield built


def create(services: Services) -> int:
    """A tuning job of TRIALS parallel trials in the stocked-out region: their CustomJobs wait QUEUED."""
    body: dict[str, Any] = {
        "displayName": "waits",
        "studySpec": {
            "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}],
        },
        "maxTrialCount": TRIALS,
        "parallelTrialCount": TRIALS,
        "trialJobSpec": {"workerPoolSpecs": [python_pool("pass")]},
    }
    created = services.tuning_jobs.create(PROJECT, STOCKED_OUT, body)
    return int(created["name"].rsplit("/", 1)[-1])


def tuning(services: Services) -> TuningJobController:
    assert services.tuning_controller is not None
    return services.tuning_controller


def children(services: Services, job_id: int) -> list[int]:
    return [t.custom_job_id for t in tuning(services).store.trials(job_id) if t.custom_job_id]


def states(services: Services, job_ids: list[int]) -> set[JobState]:
    rows = [services.custom_jobs.job_row(job_id) for job_id in job_ids]
    return {JobState(row.state) for row in rows if row is not None}


def waiting(services: Services, looks: Looks) -> list[int]:
    """Two tuning jobs whose trials have all been started and wait QUEUED; no pass has anything left to do."""
    jobs = [create(services), create(services)]
    looks.passes(4)  # the first reads everything; then trials are recorded, then started
    for job_id in jobs:
        assert len(children(services, job_id)) == TRIALS
        assert states(services, children(services, job_id)) == {JobState.JOB_STATE_QUEUED}
    services.controller.reconcile_once()  # the CustomJob controller's first look: they wait for capacity
    looks.passes()  # the trials' CustomJobs were created and looked at: that names their tuning jobs again
    return jobs


def test_tuning_jobs_whose_trials_wait_are_not_looked_at(services: Services) -> None:
    looks = Looks(tuning(services))
    waiting(services, looks)
    assert looks.full_reads == 1  # the first pass only
    assert_idle(looks)


def test_a_trials_customjob_change_names_its_tuning_job_only(services: Services) -> None:
    looks = Looks(tuning(services))
    first, second = waiting(services, looks)
    services.custom_jobs.cancel(PROJECT, STOCKED_OUT, str(children(services, second)[0]))
    assert looks.passes() == [second]


def test_a_tuning_jobs_own_change_names_it_and_its_trials_are_stopped(services: Services) -> None:
    looks = Looks(tuning(services))
    first, second = waiting(services, looks)
    services.tuning_jobs.cancel(PROJECT, STOCKED_OUT, str(first))
    assert looks.passes() == [first]  # it cancels its trials' CustomJobs
    trials = children(services, first)
    assert states(services, trials) == {JobState.JOB_STATE_CANCELLING}
    services.controller.reconcile_once()  # the CustomJob controller ends them (QUEUED: nothing to stop)
    assert states(services, trials) == {JobState.JOB_STATE_CANCELLED}
    assert looks.passes() == [first]  # the trials' ends name it: it ends too
    row = tuning(services).store.get(first)
    assert row is not None and row.state == JobState.JOB_STATE_CANCELLED
    assert second not in looks.rows


def test_the_slow_resync_reads_every_active_job(services: Services) -> None:
    looks = Looks(tuning(services))
    assert_resync_reads_all(looks, waiting(services, looks))


def test_a_failed_look_is_taken_again(services: Services) -> None:
    looks = Looks(tuning(services))
    first, _second = waiting(services, looks)
    controller = tuning(services)
    trials = controller.store.trials

    def failing(job_id: int) -> Any:
        raise RuntimeError("the database went away")

    trial = children(services, first)[0]
    controller.store.trials = failing  # type: ignore[method-assign]
    services.custom_jobs.cancel(PROJECT, STOCKED_OUT, str(trial))
    assert looks.passes() == [first]  # it failed: its change is read, but it is not forgotten
    controller.store.trials = trials  # type: ignore[method-assign]
    assert looks.passes() == [first]
    assert looks.passes() == []
