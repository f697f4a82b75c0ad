"""hyperparameterTuningJobs over gRPC: the official JobServiceClient on its gRPC transport (an insecure
loopback channel) against a real server: a small study run to success, get, list with filter and paging,
cancel, delete as an LRO, v1beta1, NOT_FOUND and INVALID_ARGUMENT with field violations; the same job and
the same error as REST."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.api_core import exceptions
from google.cloud import aiplatform_v1, aiplatform_v1beta1
from google.protobuf import empty_pb2, json_format

from tests.kinds.tuning_jobs.test_api import TERMINAL, TRIAL, tuning_body
from tests.support.jobs import wait_for_state
from tests.support.rpc import assert_as_rest, fields, gapic, grpc_fixtures, not_found
from tests.support.server import ServerProcess

JobState = aiplatform_v1.JobState


served, server, client = grpc_fixtures("tuning-grpc", aiplatform_v1.JobServiceClient)


@pytest.fixture(scope="module")
def trial_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trial") / "trial.py"
    path.write_text(TRIAL)
    return path


def study(script: Path, labels: dict[str, str] | None = None, **options: Any) -> Any:
    """A HyperparameterTuningJob of tests/kinds/tuning_jobs' REST body."""
    body = tuning_body(script, **options)
    body["labels"] = labels or {}
    return aiplatform_v1.HyperparameterTuningJob.wrap(
        json_format.ParseDict(body, aiplatform_v1.HyperparameterTuningJob.pb()())
    )


def wait_done(client: Any, name: str) -> Any:
    return wait_for_state(client.get_hyperparameter_tuning_job, name, TERMINAL, timeout=180)


def test_a_study_runs_to_success(
    client: aiplatform_v1.JobServiceClient, server: ServerProcess, trial_script: Path
) -> None:
    created = client.create_hyperparameter_tuning_job(
        parent=server.parent, hyperparameter_tuning_job=study(trial_script, trials=2, parallel=2)
    )
    assert f"/locations/{server.parent.rsplit('/', 1)[-1]}/hyperparameterTuningJobs/" in created.name
    assert created.state == JobState.JOB_STATE_QUEUED and created.max_trial_count == 2
    done = wait_done(client, created.name)
    assert done.state == JobState.JOB_STATE_SUCCEEDED, done.error
    assert [t.id for t in done.trials] == ["1", "2"]
    assert all(t.final_measurement.metrics[0].metric_id == "score" for t in done.trials)

    with server.client() as http:
        rest = http.get(f"/v1/{created.name}").json()
    assert json_format.MessageToDict(aiplatform_v1.HyperparameterTuningJob.pb(done)) == rest

    operation = client.delete_hyperparameter_tuning_job(name=created.name)
    assert isinstance(operation.result(timeout=60), empty_pb2.Empty)
    assert isinstance(operation.metadata, aiplatform_v1.DeleteOperationMetadata)
    with pytest.raises(exceptions.NotFound):
        client.get_hyperparameter_tuning_job(name=created.name)


def test_list_filters_and_pages(
    client: aiplatform_v1.JobServiceClient, server: ServerProcess, trial_script: Path
) -> None:
    batch = uuid.uuid4().hex[:8]
    long = ["--steps", "1000", "--pause", "0.05"]
    names = [
        client.create_hyperparameter_tuning_job(
            parent=server.parent,
            hyperparameter_tuning_job=study(
                trial_script, {"batch": batch}, trials=1, parallel=1, extra_args=long
            ),
        ).name
        for _ in range(3)
    ]
    request = {"parent": server.parent, "filter": f"labels.batch={batch}", "page_size": 2}
    pages = list(client.list_hyperparameter_tuning_jobs(request=request).pages)
    assert [[j.name for j in p.hyperparameter_tuning_jobs] for p in pages] == [names[:0:-1], names[:1]]
    assert all(not j.trials for p in pages for j in p.hyperparameter_tuning_jobs)  # as REST lists them

    # Cancel: every one ends CANCELLED.
    for name in names:
        assert client.cancel_hyperparameter_tuning_job(name=name) is None
    for name in names:
        cancelled = wait_done(client, name)
        assert cancelled.state == JobState.JOB_STATE_CANCELLED and cancelled.error.code == 1


def test_v1beta1(served: tuple[ServerProcess, grpc.Channel], trial_script: Path) -> None:
    server, channel = served
    beta = gapic(aiplatform_v1beta1.JobServiceClient, channel)
    body = tuning_body(trial_script, trials=1, parallel=1)
    job = aiplatform_v1beta1.HyperparameterTuningJob.wrap(
        json_format.ParseDict(body, aiplatform_v1beta1.HyperparameterTuningJob.pb()())
    )
    created = beta.create_hyperparameter_tuning_job(parent=server.parent, hyperparameter_tuning_job=job)
    assert [j.name for j in beta.list_hyperparameter_tuning_jobs(parent=server.parent)].count(
        created.name
    ) == 1
    assert beta.cancel_hyperparameter_tuning_job(name=created.name) is None
    assert wait_done(beta, created.name).state.name in TERMINAL


def test_not_found(client: aiplatform_v1.JobServiceClient, server: ServerProcess) -> None:
    unknown = f"{server.parent}/hyperparameterTuningJobs/123456789"
    calls = (
        client.get_hyperparameter_tuning_job,
        client.cancel_hyperparameter_tuning_job,
        client.delete_hyperparameter_tuning_job,
    )
    for error in not_found(calls, unknown):
        assert error.message.endswith("/hyperparameterTuningJobs/123456789 not found.")


def test_invalid_argument_names_the_field(
    client: aiplatform_v1.JobServiceClient, server: ServerProcess, trial_script: Path
) -> None:
    body = tuning_body(trial_script)
    body["studySpec"]["metrics"].append({"metricId": "other", "goal": "MINIMIZE"})
    job = aiplatform_v1.HyperparameterTuningJob.wrap(
        json_format.ParseDict(body, aiplatform_v1.HyperparameterTuningJob.pb()())
    )
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.create_hyperparameter_tuning_job(parent=server.parent, hyperparameter_tuning_job=job)
    assert any(f.startswith("study_spec.metrics") for f in fields(caught.value))
    with server.client() as http:
        rest = http.post(f"/v1/{server.parent}/hyperparameterTuningJobs", json=body).json()["error"]
    assert_as_rest(caught.value, rest)
