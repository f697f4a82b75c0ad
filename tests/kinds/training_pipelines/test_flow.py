"""The Vertex flow end to end against a real server: a tabular dataset from a CSV in a bucket, a pipeline
that exports it with a fraction split and trains a real scikit-learn model on the training shards, the model
registered as version 1, retrained by a second pipeline into version 2 (parentModel), and a tuning pipeline
that registers the best trial's model. Checked with the official Dataset, Pipeline and Model clients."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import joblib
import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1
from google.protobuf import json_format, struct_pb2

from tests.support.server import ServerProcess, wait_for

CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
TUNING_TASK = (
    "gs://google-cloud-aiplatform/schema/trainingjob/definition/hyperparameter_tuning_task_1.0.0.yaml"
)
TABULAR = "gs://google-cloud-aiplatform/schema/dataset/metadata/tabular_1.0.0.yaml"
BUCKET = "flow"
ROWS = 100

TRAIN = """
import argparse, csv, glob, json, math, os
import joblib
from sklearn.linear_model import LogisticRegression

def local(uri):  # gs://b/k is /gcs/b/k inside a replica
    return "/gcs/" + uri[len("gs://"):]

parser = argparse.ArgumentParser()
parser.add_argument("--c", type=float, default=1.0)
args, _ = parser.parse_known_args()
assert os.environ["AIP_DATA_FORMAT"] == "csv"
counts, ids = {}, {}
rows = []
for split in ("training", "validation", "test"):
    ids[split] = []
    for shard in sorted(glob.glob(local(os.environ[f"AIP_{split.upper()}_DATA_URI"]))):
        with open(shard, newline="") as handle:
            for row in csv.DictReader(handle):
                ids[split].append(int(row["id"]))
                if split == "training":
                    rows.append(row)
    counts[split] = len(ids[split])
model = LogisticRegression(C=args.c).fit(
    [[float(r["x1"]), float(r["x2"])] for r in rows], [int(r["label"]) for r in rows]
)
out = local(os.environ["AIP_MODEL_DIR"])
os.makedirs(out, exist_ok=True)
joblib.dump(model, os.path.join(out, "model.joblib"))
with open(os.path.join(out, "run.json"), "w") as handle:
    trial = os.environ.get("CLOUD_ML_TRIAL_ID")
    json.dump({"counts": counts, "ids": ids, "trial": trial, "c": args.c}, handle)
if os.environ.get("CLOUD_ML_TRIAL_ID"):
    import hypertune
    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="score", metric_value=-math.log10(args.c) ** 2
    )
"""


def strict(data: Any, message: Any) -> Any:
    pb = message.pb()()
    json_format.Parse(data if isinstance(data, str) else json.dumps(data), pb, ignore_unknown_fields=False)
    return pb


def options(server: ServerProcess) -> dict[str, Any]:
    return {
        "transport": "rest",
        "credentials": AnonymousCredentials(),
        "client_options": {"api_endpoint": server.url},
    }


@pytest.fixture(scope="module")
def flow(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The CSV in a bucket, the training script and a tabular dataset made from the CSV."""
    script = tmp_path_factory.mktemp("flow") / "train.py"
    script.write_text(TRAIN)
    source = server.home / "buckets" / BUCKET / "raw" / "points.csv"
    source.parent.mkdir(parents=True, exist_ok=True)
    with source.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "x1", "x2", "label"])
        for i in range(ROWS):
            x1, x2 = (i * 37 % 100) / 10.0, (i * 53 % 100) / 10.0
            writer.writerow([i, x1, x2, int(x1 + x2 > 10)])
    metadata = struct_pb2.Value()
    json_format.ParseDict(
        {"inputConfig": {"gcsSource": {"uri": [f"gs://{BUCKET}/raw/points.csv"]}}}, metadata
    )
    datasets = aiplatform_v1.DatasetServiceClient(**options(server))
    dataset = datasets.create_dataset(
        parent=server.parent,
        dataset=aiplatform_v1.Dataset(display_name="points", metadata_schema_uri=TABULAR, metadata=metadata),
    ).result(timeout=60)
    yield {"script": script, "dataset_id": dataset.name.rsplit("/", 1)[-1]}


def worker_pool(script: Path) -> list[dict[str, Any]]:
    return [
        {
            "machineSpec": {"machineType": "n1-standard-4"},
            "replicaCount": "1",
            "containerSpec": {"imageUri": "python:3.11", "command": [sys.executable, str(script)]},
        }
    ]


def data_config(flow: dict[str, Any], destination: str) -> dict[str, Any]:
    return {
        "dataset_id": flow["dataset_id"],
        "fraction_split": {"training_fraction": 0.6, "validation_fraction": 0.2, "test_fraction": 0.2},
        "gcs_destination": {"output_uri_prefix": f"gs://{BUCKET}/{destination}"},
    }


def run_pipeline(server: ServerProcess, body: dict[str, Any]) -> dict[str, Any]:
    pipelines = aiplatform_v1.PipelineServiceClient(**options(server))
    created = pipelines.create_training_pipeline(parent=server.parent, training_pipeline=body)

    def finished() -> dict[str, Any] | None:
        with server.client() as client:
            response = client.get(f"/v1/{created.name}")
        strict(response.text, aiplatform_v1.TrainingPipeline)
        got: dict[str, Any] = response.json()
        return got if got["state"] in {"PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED"} else None

    done: dict[str, Any] = wait_for(finished, timeout=180, what=f"{created.name} to finish")
    assert done["state"] == "PIPELINE_STATE_SUCCEEDED", done
    return done


def registry_copy(server: ServerProcess, model_name: str) -> Path:
    """The registry's own copy of the model's only version (under the server's home)."""
    model_id = model_name.rsplit("/", 1)[-1]
    copies = list((server.home / "registry").glob(f"*/*/{model_id}/*/model.joblib"))
    assert len(copies) == 1, copies
    return copies[0].parent


def bucket_dir(server: ServerProcess, uri: str) -> Path:
    return server.home / "buckets" / uri.removeprefix("gs://")


def test_train_register_and_retrain_as_version_2(server: ServerProcess, flow: dict[str, Any]) -> None:
    first = run_pipeline(
        server,
        {
            "display_name": "points-v1",
            "input_data_config": data_config(flow, "exports"),
            "training_task_definition": CUSTOM_TASK,
            "training_task_inputs": {
                "workerPoolSpecs": worker_pool(flow["script"]),
                "baseOutputDirectory": {"outputUriPrefix": f"gs://{BUCKET}/run1"},
            },
            "model_to_upload": {"display_name": "points-model", "labels": {"stage": "one"}},
            "model_id": "points",
        },
    )
    model = first["modelToUpload"]
    assert model["versionId"] == "1" and model["name"].endswith("/models/points")

    # The export: sharded CSV under dataset-<id>-<type>-<timestamp>/, splits disjoint and 60/20/20.
    run = json.loads((bucket_dir(server, f"gs://{BUCKET}/run1/model/") / "run.json").read_text())
    assert run["counts"] == {"training": 60, "validation": 20, "test": 20}
    ids = [set(run["ids"][s]) for s in ("training", "validation", "test")]
    assert set().union(*ids) == set(range(ROWS)) and sum(len(s) for s in ids) == ROWS
    exports = list((server.home / "buckets" / BUCKET / "exports").iterdir())
    assert len(exports) == 1 and exports[0].name.startswith(f"dataset-{flow['dataset_id']}-")
    assert sorted(p.name.split("-")[0] for p in exports[0].iterdir()) >= ["test", "training", "validation"]

    models = aiplatform_v1.ModelServiceClient(**options(server))
    registered = models.get_model(name=model["name"])
    assert registered.version_id == "1"
    assert registered.training_pipeline == first["name"]
    assert registered.artifact_uri == f"gs://{BUCKET}/run1/model/"
    trained = joblib.load(registry_copy(server, model["name"]) / "model.joblib")
    assert trained.predict([[9.0, 9.0], [0.5, 0.5]]).tolist() == [1, 0]

    second = run_pipeline(
        server,
        {
            "display_name": "points-v2",
            "input_data_config": data_config(flow, "exports2"),
            "training_task_definition": CUSTOM_TASK,
            "training_task_inputs": {
                "workerPoolSpecs": worker_pool(flow["script"]),
                "baseOutputDirectory": {"outputUriPrefix": f"gs://{BUCKET}/run2"},
            },
            "model_to_upload": {"display_name": "points-model"},
            "parent_model": model["name"],
        },
    )
    assert second["modelToUpload"]["name"] == model["name"]
    assert second["modelToUpload"]["versionId"] == "2"
    versions = models.list_model_versions(name=model["name"])
    assert sorted(v.version_id for v in versions) == ["1", "2"]
    assert models.get_model(name=f"{model['name']}@2").training_pipeline == second["name"]


def test_tuning_pipeline_registers_the_best_trials_model(server: ServerProcess, flow: dict[str, Any]) -> None:
    done = run_pipeline(
        server,
        {
            "display_name": "points-tuned",
            "input_data_config": data_config(flow, "exports-tune"),
            "training_task_definition": TUNING_TASK,
            "training_task_inputs": {
                "studySpec": {
                    "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
                    "parameters": [{"parameterId": "c", "discreteValueSpec": {"values": [0.1, 1.0, 10.0]}}],
                    "algorithm": "GRID_SEARCH",
                },
                "maxTrialCount": 3,
                "parallelTrialCount": 3,
                "trialJobSpec": {
                    "workerPoolSpecs": worker_pool(flow["script"]),
                    "baseOutputDirectory": {"outputUriPrefix": f"gs://{BUCKET}/tune"},
                },
            },
            "model_to_upload": {"display_name": "points-tuned"},
        },
    )
    tuning_name = done["trainingTaskMetadata"]["backingHyperparameterTuningJob"]
    with server.client() as client:
        tuning = client.get(f"/v1/{tuning_name}").json()
    assert tuning["state"] == "JOB_STATE_SUCCEEDED"
    best = next(t for t in tuning["trials"] if t["parameters"][0]["value"] == 1.0)
    models = aiplatform_v1.ModelServiceClient(**options(server))
    registered = models.get_model(name=done["modelToUpload"]["name"])
    assert registered.version_id == "1"
    assert registered.artifact_uri == f"gs://{BUCKET}/tune/{best['id']}/model/"
    copy = registry_copy(server, registered.name)
    assert json.loads((copy / "run.json").read_text())["trial"] == best["id"]


def test_high_level_sdk_custom_container_training_job_with_a_dataset(
    server: ServerProcess, flow: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.cloud import aiplatform
    from google.cloud.aiplatform import training_jobs

    monkeypatch.setattr(training_jobs, "_JOB_WAIT_TIME", 0.2)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
    aiplatform.init(
        project="test-project",
        location="us-central1",
        api_endpoint=server.url,
        api_transport="rest",
        credentials=AnonymousCredentials(),
        staging_bucket=f"gs://{BUCKET}",
    )
    job = aiplatform.CustomContainerTrainingJob(
        display_name="sdk-points",
        container_uri="python:3.11",
        command=[sys.executable, str(flow["script"])],
        model_serving_container_image_uri="python:3.11",
    )
    model = job.run(
        dataset=aiplatform.TabularDataset(flow["dataset_id"]),
        training_fraction_split=0.6,
        validation_fraction_split=0.2,
        test_fraction_split=0.2,
        replica_count=1,
        machine_type="n1-standard-4",
        base_output_dir=f"gs://{BUCKET}/sdk",
        sync=True,
    )
    assert job.state.name == "PIPELINE_STATE_SUCCEEDED"
    assert model.version_id == "1"
    assert model.gca_resource.training_pipeline == job.resource_name
    run = json.loads((bucket_dir(server, model.uri) / "run.json").read_text())
    assert run["counts"] == {"training": 60, "validation": 20, "test": 20}
