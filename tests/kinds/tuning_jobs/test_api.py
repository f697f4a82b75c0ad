"""Hyperparameter tuning through a real server: trials are CustomJobs reporting with cloudml-hypertune."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.cloud import aiplatform_v1
from google.protobuf import json_format

from tests.support.logs import replica_output
from tests.support.server import ServerProcess, wait_for

TRIAL = """
import argparse, json, os, time
import hypertune
parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float, required=True)
parser.add_argument("--kind", default="plain")
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--pause", type=float, default=0.0)
args, _ = parser.parse_known_args()
spec = json.loads(os.environ["CLUSTER_SPEC"])
print(json.dumps({"trial": os.environ.get("CLOUD_ML_TRIAL_ID"), "spec_trial": spec["task"]["trial"],
                  "model_dir": os.environ.get("AIP_MODEL_DIR"), "x": args.x}), flush=True)
reporter = hypertune.HyperTune()
if args.kind == "bad":  # a slow, hopeless trial: early stopping should end it long before its last step
    args.steps, args.pause = 600, 0.05
for step in range(1, args.steps + 1):
    score = -(args.x - 1.0) ** 2 + step * 0.01
    if args.kind == "bad":
        score -= 100.0
    reporter.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="score", metric_value=score,
                                                 global_step=step)
    time.sleep(args.pause)
"""

TERMINAL = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"}


@pytest.fixture(scope="module")
def trial_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trial") / "trial.py"
    path.write_text(TRIAL)
    return path


def tuning_body(
    script: Path,
    trials: int = 4,
    parallel: int = 2,
    extra_args: list[str] | None = None,
    parameters: list[dict[str, Any]] | None = None,
    **study: Any,
) -> dict[str, Any]:
    container = {
        "imageUri": "python:3.11",
        "command": [sys.executable, str(script)],
        "args": extra_args or [],
    }
    return {
        "displayName": "tune",
        "studySpec": {
            "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
            "parameters": parameters
            or [
                {
                    "parameterId": "x",
                    "doubleValueSpec": {"minValue": -3, "maxValue": 3},
                    "scaleType": "UNIT_LINEAR_SCALE",
                }
            ],
            **study,
        },
        "maxTrialCount": trials,
        "parallelTrialCount": parallel,
        "trialJobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": container,
                }
            ],
            "baseOutputDirectory": {"outputUriPrefix": "gs://tune-bucket/study"},
        },
    }


def create(client: httpx.Client, server: ServerProcess, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"/v1/{server.parent}/hyperparameterTuningJobs", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def wait_tuning(client: httpx.Client, name: str, timeout: float = 180) -> dict[str, Any]:
    return wait_for(
        lambda: (j := client.get(f"/v1/{name}").json()).get("state") in TERMINAL and j,
        timeout=timeout,
        what=f"{name} to finish",
    )


def strict(job: dict[str, Any]) -> None:
    json_format.Parse(
        json.dumps(job), aiplatform_v1.HyperparameterTuningJob.pb()(), ignore_unknown_fields=False
    )


def first_line(server: ServerProcess, custom_job: str) -> dict[str, Any]:
    run_dir = server.home / "jobs" / custom_job.rsplit("/", 1)[-1] / "workerpool0-0"
    return json.loads(replica_output(run_dir).splitlines()[0])


def test_tuning_job_runs_trials_as_custom_jobs(server: ServerProcess, trial_script: Path) -> None:
    with server.client() as client:
        created = create(client, server, tuning_body(trial_script, trials=4, parallel=2))
        strict(created)
        done = wait_tuning(client, created["name"])
        listed = client.get(f"/v1/{server.parent}/hyperparameterTuningJobs").json()
    strict(done)
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    trials = done["trials"]
    assert [t["id"] for t in trials] == ["1", "2", "3", "4"]
    for trial in trials:
        assert trial["state"] == "SUCCEEDED"
        x = trial["parameters"][0]["value"]
        assert trial["parameters"][0]["parameterId"] == "x" and -3 <= x <= 3
        final = trial["finalMeasurement"]
        assert final["stepCount"] == "3"
        assert abs(final["metrics"][0]["value"] - (-((x - 1.0) ** 2) + 0.03)) < 1e-6
        seen = first_line(server, trial["customJob"])
        assert seen["trial"] == trial["id"] and seen["spec_trial"] == trial["id"]
        assert seen["model_dir"] == f"gs://tune-bucket/study/{trial['id']}/model/"
        assert abs(seen["x"] - x) < 1e-9
    assert all("trials" not in j for j in listed["hyperparameterTuningJobs"])


def test_trial_without_measurement_is_infeasible_and_failed_budget_fails_job(
    server: ServerProcess, trial_script: Path
) -> None:
    body = tuning_body(trial_script, trials=3, parallel=1, extra_args=["--steps", "0"])
    with server.client() as client:
        done = wait_tuning(client, create(client, server, body)["name"])
    assert done["state"] == "JOB_STATE_FAILED"
    assert {t["state"] for t in done["trials"]} == {"INFEASIBLE"}
    assert "no measurement of score" in done["trials"][0]["infeasibleReason"]


def test_cancel_stops_running_trials(server: ServerProcess, trial_script: Path) -> None:
    body = tuning_body(trial_script, trials=4, parallel=2, extra_args=["--steps", "1000", "--pause", "0.05"])
    with server.client() as client:
        name = create(client, server, body)["name"]
        wait_for(
            lambda: (
                len([t for t in client.get(f"/v1/{name}").json().get("trials", []) if t["state"] == "ACTIVE"])
                == 2
            ),
            what="two active trials",
        )
        assert client.post(f"/v1/{name}:cancel", json={}).status_code == 200
        done = wait_tuning(client, name)
        assert done["state"] == "JOB_STATE_CANCELLED" and done["error"]["code"] == 1
        for trial in done["trials"]:
            child = client.get(f"/v1/{trial['customJob']}").json()
            assert child["state"] == "JOB_STATE_CANCELLED"


def test_restart_mid_study_loses_and_duplicates_no_trial(tmp_path: Path, trial_script: Path) -> None:
    server = ServerProcess(home=tmp_path / "home").start()
    try:
        body = tuning_body(trial_script, trials=4, parallel=2, extra_args=["--pause", "0.3"])
        with server.client() as client:
            name = create(client, server, body)["name"]
            wait_for(lambda: len(client.get(f"/v1/{name}").json().get("trials", [])) >= 2, what="two trials")
        server.stop(signal.SIGKILL)
        server.start()
        with server.client() as client:
            done = wait_tuning(client, name)
        assert done["state"] == "JOB_STATE_SUCCEEDED", done
        assert [t["id"] for t in done["trials"]] == ["1", "2", "3", "4"]
        assert len({t["customJob"] for t in done["trials"]}) == 4
        with server.client() as client:
            children = client.get(
                f"/v1/{server.parent}/customJobs", params={"filter": "labels.trainworks-tuning-job:*"}
            ).json()["customJobs"]
        assert len(children) == 4
    finally:
        server.stop()


def test_validation_names_the_field(server: ServerProcess, trial_script: Path) -> None:
    body = tuning_body(trial_script)
    body["studySpec"]["metrics"].append({"metricId": "other", "goal": "MINIMIZE"})
    with server.client() as client:
        response = client.post(f"/v1/{server.parent}/hyperparameterTuningJobs", json=body)
    assert response.status_code == 400
    fields = [v["field"] for v in response.json()["error"]["details"][0]["fieldViolations"]]
    assert any(f.startswith("study_spec.metrics") for f in fields)


@pytest.fixture
def sdk(server: ServerProcess) -> Iterator[Any]:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from google.cloud.aiplatform import jobs

    aiplatform.init(
        project="test-project",
        location="us-central1",
        api_endpoint=server.url,
        api_transport="rest",
        credentials=AnonymousCredentials(),
        staging_bucket="gs://sdk-bucket",
    )
    saved, jobs._JOB_WAIT_TIME = jobs._JOB_WAIT_TIME, 0.1
    yield aiplatform
    jobs._JOB_WAIT_TIME = saved


def test_official_sdk_hyperparameter_tuning_job_runs(sdk: Any, trial_script: Path) -> None:
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    custom_job = sdk.CustomJob(
        display_name="sdk-trial",
        worker_pool_specs=[
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "container_spec": {
                    "image_uri": "python:3.11",
                    "command": [sys.executable, str(trial_script)],
                },
            }
        ],
    )
    job = sdk.HyperparameterTuningJob(
        display_name="sdk-tune",
        custom_job=custom_job,
        metric_spec={"score": "maximize"},
        parameter_spec={
            "x": hpt.DoubleParameterSpec(min=-3, max=3, scale="linear"),
            "kind": hpt.CategoricalParameterSpec(values=["plain", "fancy"]),
        },
        max_trial_count=3,
        parallel_trial_count=2,
        search_algorithm="random",
    )
    job.run()
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    assert len(job.trials) == 3 and all(
        t.final_measurement.metrics[0].metric_id == "score" for t in job.trials
    )


def test_zero_bounds_survive_storage(server: ServerProcess, trial_script: Path) -> None:
    """Canonical JSON drops a bound of 0; the study must still read it as 0."""
    parameters = [{"parameterId": "x", "doubleValueSpec": {"minValue": 0.0, "maxValue": 2.0}}]
    body = tuning_body(trial_script, trials=2, parallel=2, parameters=parameters, algorithm="RANDOM_SEARCH")
    with server.client() as client:
        done = wait_tuning(client, create(client, server, body)["name"])
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    assert all(0.0 <= t["parameters"][0]["value"] <= 2.0 for t in done["trials"])


def test_median_rule_stops_a_hopeless_trial(server: ServerProcess, trial_script: Path) -> None:
    parameters = [
        {"parameterId": "x", "discreteValueSpec": {"values": [1.0]}},
        {"parameterId": "kind", "categoricalValueSpec": {"values": ["good-a", "good-b", "good-c", "bad"]}},
    ]
    body = tuning_body(
        trial_script,
        trials=4,
        parallel=1,
        parameters=parameters,
        algorithm="GRID_SEARCH",
        medianAutomatedStoppingSpec={},
    )
    with server.client() as client:
        done = wait_tuning(client, create(client, server, body)["name"], timeout=120)
        assert done["state"] == "JOB_STATE_SUCCEEDED", done
        bad = [t for t in done["trials"] if t["parameters"][1]["value"] == "bad"]
        assert len(bad) == 1 and bad[0]["state"] == "SUCCEEDED"
        assert int(bad[0]["finalMeasurement"]["stepCount"]) < 600  # stopped, not run to its end
        assert client.get(f"/v1/{bad[0]['customJob']}").json()["state"] == "JOB_STATE_CANCELLED"
