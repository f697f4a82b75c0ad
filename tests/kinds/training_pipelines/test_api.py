"""TrainingPipelines through the official PipelineServiceClient against a real server: create, get, list
(filters and paging), cancel, delete (LRO), validation, and restart safety of the backing CustomJob."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1
from google.longrunning import operations_pb2
from google.protobuf import json_format

from tests.support import command_forks
from tests.support.server import ServerProcess, wait_for, wait_job

CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
TUNING_TASK = (
    "gs://google-cloud-aiplatform/schema/trainingjob/definition/hyperparameter_tuning_task_1.0.0.yaml"
)
PIPELINE_TERMINAL = {"PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED"}

# Waits for a gate file (when given) so a test can hold the backing job in RUNNING; reports a metric as a
# tuning trial.
SCRIPT = """
import argparse, os, pathlib, time
import hypertune
parser = argparse.ArgumentParser()
parser.add_argument("--gate", default="")
parser.add_argument("--x", type=float, default=0.0)
args, _ = parser.parse_known_args()
while args.gate and not pathlib.Path(args.gate).exists():
    time.sleep(0.05)
if os.environ.get("CLOUD_ML_TRIAL_ID"):
    reporter = hypertune.HyperTune()
    reporter.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="score", metric_value=args.x)
print("trained", os.environ.get("AIP_MODEL_DIR"), flush=True)
"""


def strict(data: Any, message: Any) -> Any:
    pb = message.pb()() if hasattr(message, "pb") else message()
    json_format.Parse(data if isinstance(data, str) else json.dumps(data), pb, ignore_unknown_fields=False)
    return pb


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pipeline") / "train.py"
    path.write_text(SCRIPT)
    return path


def client_for(server: ServerProcess) -> aiplatform_v1.PipelineServiceClient:
    return aiplatform_v1.PipelineServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": server.url},
    )


@pytest.fixture(scope="module")
def pipelines(server: ServerProcess) -> Iterator[aiplatform_v1.PipelineServiceClient]:
    yield client_for(server)


def custom_inputs(script: Path, *args: str, snake: bool = False) -> dict[str, Any]:
    if snake:  # as the high-level SDK sends them
        return {
            "worker_pool_specs": [
                {
                    "machine_spec": {"machine_type": "n1-standard-4"},
                    "replica_count": 1,
                    "container_spec": {
                        "image_uri": "python:3.11",
                        "command": [sys.executable, str(script), *args],
                    },
                }
            ],
            "base_output_directory": {"output_uri_prefix": "gs://pipeline-out/snake"},
        }
    return {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": "1",
                "containerSpec": {"imageUri": "python:3.11", "command": [sys.executable, str(script), *args]},
            }
        ],
        "baseOutputDirectory": {"outputUriPrefix": "gs://pipeline-out/camel"},
    }


def new_pipeline(display_name: str, inputs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "display_name": display_name,
        "training_task_definition": CUSTOM_TASK,
        "training_task_inputs": inputs,
        **extra,
    }


def wire_get(server: ServerProcess, name: str) -> dict[str, Any]:
    with server.client() as client:
        response = client.get(f"/v1/{name}")
    assert response.status_code == 200, response.text
    strict(response.text, aiplatform_v1.TrainingPipeline)
    return response.json()  # type: ignore[no-any-return]


def wait_pipeline(server: ServerProcess, name: str, states: set[str] | None = None) -> dict[str, Any]:
    wanted = states or PIPELINE_TERMINAL

    def check() -> dict[str, Any] | None:
        got = wire_get(server, name)
        return got if got["state"] in wanted else None

    return wait_for(check, timeout=120, what=f"{name} to reach {sorted(wanted)}")  # type: ignore[no-any-return]


def test_custom_task_runs_its_backing_custom_job(
    server: ServerProcess, pipelines: aiplatform_v1.PipelineServiceClient, script: Path
) -> None:
    created = pipelines.create_training_pipeline(
        parent=server.parent,
        training_pipeline=new_pipeline("plain", custom_inputs(script), labels={"team": "a"}),
    )
    assert created.state == aiplatform_v1.PipelineState.PIPELINE_STATE_QUEUED
    assert created.name.startswith("projects/") and "/trainingPipelines/" in created.name
    done = wait_pipeline(server, created.name)
    assert done["state"] == "PIPELINE_STATE_SUCCEEDED", done
    backing = done["trainingTaskMetadata"]["backingCustomJob"]
    assert "startTime" in done and "endTime" in done and "error" not in done
    assert done["trainingTaskInputs"]["baseOutputDirectory"] == {"outputUriPrefix": "gs://pipeline-out/camel"}
    with server.client() as client:
        job = wait_job(client, backing)
    assert job["state"] == "JOB_STATE_SUCCEEDED"
    assert job["labels"] == {"team": "a", "trainworks-training-pipeline": created.name.rsplit("/", 1)[-1]}
    got = pipelines.get_training_pipeline(name=created.name)
    assert got.training_task_metadata["backingCustomJob"] == backing


def test_snake_case_inputs_are_accepted_and_echoed_canonically(
    server: ServerProcess, pipelines: aiplatform_v1.PipelineServiceClient, script: Path
) -> None:
    created = pipelines.create_training_pipeline(
        parent=server.parent, training_pipeline=new_pipeline("snake", custom_inputs(script, snake=True))
    )
    done = wait_pipeline(server, created.name)
    assert done["state"] == "PIPELINE_STATE_SUCCEEDED", done
    inputs = done["trainingTaskInputs"]
    assert inputs["workerPoolSpecs"][0]["containerSpec"]["imageUri"] == "python:3.11"
    assert inputs["baseOutputDirectory"] == {"outputUriPrefix": "gs://pipeline-out/snake"}


def test_list_filters_by_definition_and_pages(
    server: ServerProcess, pipelines: aiplatform_v1.PipelineServiceClient, script: Path
) -> None:
    tuning_inputs = {
        "studySpec": {
            "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}],
        },
        "maxTrialCount": 1,
        "parallelTrialCount": 1,
        "trialJobSpec": custom_inputs(script),
    }
    names = [
        pipelines.create_training_pipeline(
            parent=server.parent,
            training_pipeline={
                "display_name": f"listed-{i}",
                "training_task_definition": TUNING_TASK if i == 2 else CUSTOM_TASK,
                "training_task_inputs": tuning_inputs if i == 2 else custom_inputs(script),
                "labels": {"batch": "listed"},
            },
        ).name
        for i in range(3)
    ]
    custom = f'labels.batch=listed AND training_task_definition="{CUSTOM_TASK}"'
    pager = pipelines.list_training_pipelines(
        request={"parent": server.parent, "filter": custom, "page_size": 1}
    )
    listed = [p.name for p in pager]
    assert listed == [names[1], names[0]]  # newest first, one per page
    tuning = pipelines.list_training_pipelines(
        request={
            "parent": server.parent,
            "filter": 'labels.batch=listed AND trainingTaskDefinition:"*tuning*"',
        }
    )
    assert [p.name for p in tuning] == [names[2]]
    other = pipelines.list_training_pipelines(
        request={
            "parent": server.parent,
            "filter": f'labels.batch=listed AND training_task_definition!="{CUSTOM_TASK}"',
        }
    )
    assert [p.name for p in other] == [names[2]]
    with server.client() as client:
        page = client.get(
            f"/v1/{server.parent}/trainingPipelines", params={"filter": "labels.batch=listed", "pageSize": 2}
        )
        strict(page.text, aiplatform_v1.ListTrainingPipelinesResponse)
        assert len(page.json()["trainingPipelines"]) == 2 and page.json()["nextPageToken"]
        bad = client.get(
            f"/v1/{server.parent}/trainingPipelines", params={"filter": 'state="JOB_STATE_RUNNING"'}
        )
        assert bad.status_code == 400 and "PIPELINE_STATE_RUNNING" in bad.json()["error"]["message"]
    tuned = wait_pipeline(server, names[2])
    assert tuned["state"] == "PIPELINE_STATE_SUCCEEDED", tuned
    assert "/hyperparameterTuningJobs/" in tuned["trainingTaskMetadata"]["backingHyperparameterTuningJob"]
    succeeded = pipelines.list_training_pipelines(
        request={
            "parent": server.parent,
            "filter": 'labels.batch=listed AND state="PIPELINE_STATE_SUCCEEDED"',
        }
    )
    assert names[2] in [p.name for p in succeeded]


def violations(error: exceptions.GoogleAPICallError) -> list[str]:
    details = error.response.json()["error"]["details"]  # type: ignore[union-attr]
    return [v["field"] for d in details for v in d.get("fieldViolations", [])]


def test_unknown_definition_and_bad_inputs_are_rejected_naming_the_field(
    server: ServerProcess, pipelines: aiplatform_v1.PipelineServiceClient, script: Path
) -> None:
    unknown = new_pipeline("bad", custom_inputs(script))
    unknown["training_task_definition"] = (
        "gs://google-cloud-aiplatform/schema/trainingjob/definition/automl_tables_1.0.0.yaml"
    )
    with pytest.raises(exceptions.BadRequest) as caught:
        pipelines.create_training_pipeline(parent=server.parent, training_pipeline=unknown)
    assert violations(caught.value) == ["training_pipeline.training_task_definition"]
    assert "custom_task_1.0.0.yaml" in caught.value.message

    inputs = custom_inputs(script)
    inputs["workerPoolSpecs"][0]["replicaCount"] = "0"
    inputs["workerPoolSpecs"][0]["containerSpec"]["imageUri"] = ""
    with pytest.raises(exceptions.BadRequest) as caught:
        pipelines.create_training_pipeline(
            parent=server.parent, training_pipeline=new_pipeline("bad", inputs)
        )
    fields = violations(caught.value)
    assert fields and all(
        f.startswith("training_pipeline.training_task_inputs.worker_pool_specs[0]") for f in fields
    )

    with server.client() as client:
        typo = client.post(
            f"/v1/{server.parent}/trainingPipelines",
            json={**new_pipeline("bad", {**custom_inputs(script), "workerPools": []}), "display_name": "x"},
        )
        assert typo.status_code == 400
        assert typo.json()["error"]["details"][0]["fieldViolations"][0]["field"].startswith(
            "training_pipeline.training_task_inputs"
        )
        no_model_dir = client.post(
            f"/v1/{server.parent}/trainingPipelines",
            json={
                "displayName": "m",
                "trainingTaskDefinition": CUSTOM_TASK,
                "trainingTaskInputs": {"workerPoolSpecs": custom_inputs(script)["workerPoolSpecs"]},
                "modelToUpload": {"displayName": "m"},
            },
        )
        assert no_model_dir.status_code == 400
        assert no_model_dir.json()["error"]["details"][0]["fieldViolations"][0]["field"] == (
            "training_pipeline.model_to_upload.artifact_uri"
        )
        missing = client.post(
            f"/v1/{server.parent}/trainingPipelines", json={"trainingTaskDefinition": CUSTOM_TASK}
        )
        fields = [v["field"] for v in missing.json()["error"]["details"][0]["fieldViolations"]]
        assert fields == ["training_pipeline.display_name", "training_pipeline.training_task_inputs"]
        assert client.get(f"/v1/{server.parent}/trainingPipelines/123").status_code == 404


def test_cancel_then_delete_through_the_lro(
    server: ServerProcess, pipelines: aiplatform_v1.PipelineServiceClient, script: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "never"
    created = pipelines.create_training_pipeline(
        parent=server.parent,
        training_pipeline=new_pipeline("cancelled", custom_inputs(script, f"--gate={gate}")),
    )
    running = wait_pipeline(server, created.name, {"PIPELINE_STATE_RUNNING"})
    backing = running["trainingTaskMetadata"]["backingCustomJob"]
    with server.client() as client:
        wait_job(client, backing, {"JOB_STATE_RUNNING"})
    with pytest.raises(exceptions.BadRequest):  # only finished pipelines can be deleted
        pipelines.delete_training_pipeline(name=created.name)
    pipelines.cancel_training_pipeline(name=created.name)
    done = wait_pipeline(server, created.name)
    assert done["state"] == "PIPELINE_STATE_CANCELLED"
    assert done["error"]["code"] == 1
    with server.client() as client:
        assert wait_job(client, backing)["state"] == "JOB_STATE_CANCELLED"
    with pytest.raises(exceptions.BadRequest):  # cancelling a finished pipeline is FAILED_PRECONDITION
        pipelines.cancel_training_pipeline(name=created.name)
    operation = pipelines.delete_training_pipeline(name=created.name)
    strict(json_format.MessageToJson(operation.operation), operations_pb2.Operation)
    assert operation.metadata is not None
    operation.result(timeout=60)
    with pytest.raises(exceptions.NotFound):
        pipelines.get_training_pipeline(name=created.name)


def test_restart_while_the_backing_job_runs_keeps_one_backing_job(
    fresh_server: ServerProcess, script: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    pipelines = client_for(fresh_server)
    created = pipelines.create_training_pipeline(
        parent=fresh_server.parent,
        training_pipeline=new_pipeline("durable", custom_inputs(script, f"--gate={gate}")),
    )
    running = wait_pipeline(fresh_server, created.name, {"PIPELINE_STATE_RUNNING"})
    backing = running["trainingTaskMetadata"]["backingCustomJob"]
    with fresh_server.client() as client:
        wait_job(client, backing, {"JOB_STATE_RUNNING"})
    fresh_server.stop(signal.SIGKILL)
    fresh_server.start()
    gate.write_text("go")
    done = wait_pipeline(fresh_server, created.name)
    assert done["state"] == "PIPELINE_STATE_SUCCEEDED", done
    assert done["trainingTaskMetadata"]["backingCustomJob"] == backing
    pipeline_id = created.name.rsplit("/", 1)[-1]
    with fresh_server.client() as client:
        jobs = client.get(
            f"/v1/{fresh_server.parent}/customJobs",
            params={"filter": f"labels.trainworks-training-pipeline={pipeline_id}"},
        ).json()["customJobs"]
    assert [j["name"] for j in jobs] == [backing]


def test_cli_create_wait_describe_list_delete(server: ServerProcess, script: Path, tmp_path: Path) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        "display_name: from-yaml\n"
        f"training_task_definition: {CUSTOM_TASK}\n"
        "training_task_inputs:\n"
        "  worker_pool_specs:\n"
        "    - machine_spec: {machine_type: n1-standard-4}\n"
        "      replica_count: 1\n"
        f"      container_spec: {{image_uri: 'python:3.11', command: ['{sys.executable}', '{script}']}}\n"
    )
    common = ["--region", "us-central1", "--project", "test-project", "--endpoint", server.url]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return command_forks.run_cli(["training-pipelines", *args, *common], timeout=120)

    created = cli("create", "--config", str(config), "--display-name", "cli-pipe", "--format", "json")
    assert created.returncode == 0, created.stderr
    name = json.loads(created.stdout)["name"]
    waited = cli("wait", name.rsplit("/", 1)[-1], "--format", "json")
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout)["state"] == "PIPELINE_STATE_SUCCEEDED"
    described = cli("describe", name)
    assert "backingCustomJob: projects/" in described.stderr + described.stdout
    listed = cli("list", "--filter", 'display_name="cli-pipe"', "--format", "json")
    assert [p["name"] for p in json.loads(listed.stdout)] == [name]
    deleted = cli("delete", name)
    assert deleted.returncode == 0, deleted.stderr
    assert cli("describe", name).returncode != 0
    bad = cli("describe", "projects/p/locations/l/customJobs/1")
    assert bad.returncode != 0 and "TrainingPipeline name" in bad.stderr


def test_failures_of_the_job_and_of_the_model_upload_fail_the_pipeline(
    server: ServerProcess, pipelines: aiplatform_v1.PipelineServiceClient, script: Path, tmp_path: Path
) -> None:
    crashing = tmp_path / "crash.py"
    crashing.write_text("import sys\nsys.exit(3)\n")
    broken = pipelines.create_training_pipeline(
        parent=server.parent, training_pipeline=new_pipeline("crash", custom_inputs(crashing))
    )
    failed = wait_pipeline(server, broken.name)
    assert failed["state"] == "PIPELINE_STATE_FAILED"
    with server.client() as client:
        job = client.get(f"/v1/{failed['trainingTaskMetadata']['backingCustomJob']}").json()
    assert job["state"] == "JOB_STATE_FAILED" and failed["error"] == job["error"]

    # The job succeeds but leaves AIP_MODEL_DIR empty: the registry refuses, naming the artifact.
    no_model = pipelines.create_training_pipeline(
        parent=server.parent,
        training_pipeline=new_pipeline(
            "no-model", custom_inputs(script), model_to_upload={"display_name": "m"}
        ),
    )
    failed = wait_pipeline(server, no_model.name)
    assert failed["state"] == "PIPELINE_STATE_FAILED", failed
    assert failed["error"]["code"] == 3 and "gs://pipeline-out/camel/model/" in failed["error"]["message"]
    assert "name" not in failed["modelToUpload"]
