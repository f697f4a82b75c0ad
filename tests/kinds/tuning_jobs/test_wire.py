"""HyperparameterTuningJob wire models and validation rules, without a server.

The oracle is the official descriptors: our canonical output must parse strictly with
`json_format.Parse(..., ignore_unknown_fields=False)` and equal what `MessageToDict` writes for the same body.
Each validation rule is checked by the exact proto field paths it reports.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.cloud import aiplatform_v1, aiplatform_v1beta1
from google.protobuf import json_format

from trainworks.jobs.enums import JobState
from trainworks.kernel.errors import ApiError, FieldViolation
from trainworks.kernel.wire import input_dict
from trainworks.kernel.wire_errors import parse_body
from trainworks.kinds.tuning_jobs.validation import MAX_TRIAL_COUNT, validate_tuning_job
from trainworks.kinds.tuning_jobs.wire import (
    Algorithm,
    DiscreteValueSpec,
    GoalType,
    HyperparameterTuningJob,
    Measurement,
    MeasurementSelectionType,
    ObservationNoise,
    ParameterSpec,
    ParameterType,
    ScaleType,
    StudySpec,
    Trial,
    TrialState,
    trial_dict,
    walk_parameters,
)

Body = dict[str, Any]
P0 = "study_spec.parameters[0]"


# ------------------------------------------------------------------------------------------ helpers
def official(body: Body, cls: Any = aiplatform_v1.HyperparameterTuningJob) -> Body:
    """What the official descriptors make of `body`, written canonically (strict parse)."""
    pb = cls.pb()()
    json_format.Parse(json.dumps(body), pb, ignore_unknown_fields=False)
    return json_format.MessageToDict(pb)


def ours(body: Body) -> Body:
    return parse_body(HyperparameterTuningJob, body).to_wire()


def trial_job_spec() -> Body:
    return {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": "1",
                "containerSpec": {"imageUri": "python:3.11", "command": ["python", "-c", "pass"]},
            }
        ]
    }


def valid() -> Body:
    return {
        "displayName": "tune",
        "studySpec": {
            "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
            "parameters": [
                {"parameterId": "lr", "doubleValueSpec": {"minValue": 1e-4, "maxValue": 0.1}, "scaleType": 2},
                {"parameterId": "layers", "integerValueSpec": {"minValue": "1", "maxValue": "4"}},
                {"parameterId": "opt", "categoricalValueSpec": {"values": ["adam", "sgd"]}},
                {"parameterId": "batch", "discreteValueSpec": {"values": [16, 32, 64]}},
            ],
        },
        "maxTrialCount": 8,
        "parallelTrialCount": 2,
        "trialJobSpec": trial_job_spec(),
    }


def rich() -> Body:
    """Every user-settable and output-only field, in canonical JSON."""
    body = valid()
    body["studySpec"] = {
        "medianAutomatedStoppingSpec": {"useElapsedDuration": True},
        "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
        "parameters": [
            {
                "doubleValueSpec": {"minValue": 0.0, "maxValue": 0.1, "defaultValue": 0.0},
                "parameterId": "lr",
                "scaleType": "UNIT_LINEAR_SCALE",
            },
            {
                "integerValueSpec": {"minValue": "0", "maxValue": "4", "defaultValue": "0"},
                "parameterId": "layers",
                "scaleType": "UNIT_LINEAR_SCALE",
                "conditionalParameterSpecs": [
                    {
                        "parentIntValues": {"values": ["2", "3"]},
                        "parameterSpec": {
                            "discreteValueSpec": {"values": [0.1, 0.5, 2.5], "defaultValue": 0.5},
                            "parameterId": "dropout",
                            "scaleType": "UNIT_REVERSE_LOG_SCALE",
                        },
                    }
                ],
            },
            {
                "categoricalValueSpec": {"values": ["adam", "sgd"], "defaultValue": "adam"},
                "parameterId": "opt",
                "conditionalParameterSpecs": [
                    {
                        "parentCategoricalValues": {"values": ["sgd"]},
                        "parameterSpec": {
                            "doubleValueSpec": {"minValue": 0.0, "maxValue": 0.99},
                            "parameterId": "momentum",
                        },
                    }
                ],
            },
            {
                "discreteValueSpec": {"values": [16.0, 32.0, 64.0]},
                "parameterId": "batch",
                "conditionalParameterSpecs": [
                    {
                        "parentDiscreteValues": {"values": [64.0]},
                        "parameterSpec": {
                            "integerValueSpec": {"minValue": "1", "maxValue": "8"},
                            "parameterId": "accum",
                        },
                    }
                ],
            },
        ],
        "algorithm": "RANDOM_SEARCH",
        "measurementSelectionType": "BEST_MEASUREMENT",
    }
    body["maxFailedTrialCount"] = 3
    body["labels"] = {"team": "ml", "env": "dev"}
    body["encryptionSpec"] = {"kmsKeyName": "projects/p/locations/l/keyRings/r/cryptoKeys/k"}
    body["trialJobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": "gs://bucket/out/"}
    body["trialJobSpec"]["scheduling"] = {"timeout": "3600s"}
    body.update(
        {
            "name": "projects/123/locations/us-central1/hyperparameterTuningJobs/456",
            "state": "JOB_STATE_SUCCEEDED",
            "createTime": "2025-10-24T14:16:59.233332Z",
            "startTime": "2025-10-24T14:17:00Z",
            "endTime": "2025-10-24T15:00:00.500Z",
            "updateTime": "2025-10-24T15:00:00.500Z",
            "error": {"code": 1, "message": "cancelled"},
            "satisfiesPzs": True,
            "trials": [
                {
                    "id": "1",
                    "state": "SUCCEEDED",
                    "parameters": [
                        {"parameterId": "lr", "value": 0.01},
                        {"parameterId": "layers", "value": 2.0},
                        {"parameterId": "opt", "value": "sgd"},
                    ],
                    "finalMeasurement": {
                        "elapsedDuration": "12.500s",
                        "stepCount": "100",
                        "metrics": [{"metricId": "accuracy", "value": 0.91}],
                    },
                    "measurements": [
                        {"stepCount": "50", "metrics": [{"metricId": "accuracy", "value": 0.8}]},
                        {
                            "elapsedDuration": "12.500s",
                            "stepCount": "100",
                            "metrics": [{"metricId": "accuracy", "value": 0.91}],
                        },
                    ],
                    "startTime": "2025-10-24T14:17:01Z",
                    "endTime": "2025-10-24T14:30:00Z",
                    "customJob": "projects/123/locations/us-central1/customJobs/789",
                    "webAccessUris": {"workerpool0-0": "https://example.invalid/shell"},
                },
                {"id": "2", "state": "INFEASIBLE", "infeasibleReason": "no final measurement"},
            ],
        }
    )
    return body


def problems(body: Body) -> list[FieldViolation]:
    """Parse errors, or else the validation rules' violations."""
    try:
        job = parse_body(HyperparameterTuningJob, body)
    except ApiError as exc:
        return exc.violations
    return validate_tuning_job(job)


def fields(body: Body) -> list[str]:
    return [v.field for v in problems(body)]


def mutated(change: Callable[[Body], Any]) -> Body:
    body = valid()
    change(body)
    return body


def study(body: Body) -> Body:
    return body["studySpec"]  # type: ignore[no-any-return]


def param(body: Body, index: int = 0) -> Body:
    return study(body)["parameters"][index]  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------------------ round trips
def test_rich_example_is_canonical_and_parses_strictly() -> None:
    body = rich()
    out = ours(body)
    assert out == official(body)
    assert official(out) == out  # strict parse of our output, and a fixed point
    assert out["studySpec"]["parameters"][0]["doubleValueSpec"]["defaultValue"] == 0.0  # optional zero echoed
    assert out["studySpec"]["parameters"][1]["integerValueSpec"]["defaultValue"] == "0"


def test_snake_case_and_int_enums_give_the_same_canonical_output() -> None:
    body = {
        "display_name": "tune",
        "study_spec": {
            "decay_curve_stopping_spec": {},
            "metrics": [{"metric_id": "loss", "goal": 2}],
            "parameters": [
                {
                    "parameter_id": "x",
                    "scale_type": 3,
                    "integer_value_spec": {"min_value": 1, "max_value": "9", "default_value": 5},
                    "conditional_parameter_specs": [
                        {
                            "parent_int_values": {"values": [1, "2"]},
                            "parameter_spec": {
                                "parameter_id": "y",
                                "categorical_value_spec": {"values": ["a"]},
                            },
                        }
                    ],
                }
            ],
            "algorithm": 3,
            "measurement_selection_type": 2,
        },
        "max_trial_count": "4",
        "parallel_trial_count": 1.0,
        "max_failed_trial_count": 0,
        "trial_job_spec": {
            "worker_pool_specs": [
                {
                    "machine_spec": {"machine_type": "n1-standard-4"},
                    "replica_count": 1,
                    "container_spec": {"image_uri": "python:3.11"},
                }
            ]
        },
        "labels": {"Snake_Key": "v"},  # map keys are data, never renamed
    }
    out = ours(body)
    assert out == official(body)
    assert official(out) == out
    spec = out["studySpec"]
    assert spec["algorithm"] == "RANDOM_SEARCH"
    assert spec["measurementSelectionType"] == "BEST_MEASUREMENT"
    assert spec["metrics"] == [{"metricId": "loss", "goal": "MINIMIZE"}]
    assert spec["decayCurveStoppingSpec"] == {}  # an empty message member of a oneof is kept
    assert spec["parameters"][0]["integerValueSpec"] == {
        "minValue": "1",
        "maxValue": "9",
        "defaultValue": "5",
    }
    assert spec["parameters"][0]["conditionalParameterSpecs"][0]["parentIntValues"] == {"values": ["1", "2"]}
    assert out["maxTrialCount"] == 4 and out["parallelTrialCount"] == 1
    assert "maxFailedTrialCount" not in out
    assert out["labels"] == {"Snake_Key": "v"}


def test_the_sdk_request_shape_round_trips() -> None:
    """What aiplatform.HyperparameterTuningJob(...).run() sends: int enums, doubles as numbers."""
    body = valid()
    study(body).update({"algorithm": 0, "measurementSelectionType": 2})
    study(body)["metrics"][0]["goal"] = 1
    out = ours(body)
    assert out == official(body)
    assert "algorithm" not in out["studySpec"]


def test_optional_fields_keep_presence() -> None:
    body = valid()
    study(body)["studyStoppingConfig"] = {"minNumTrials": 0, "shouldStopAsap": False}
    study(body)["convexAutomatedStoppingSpec"] = {"updateAllStoppedTrials": False, "minMeasurementCount": "0"}
    study(body)["metrics"][0]["safetyConfig"] = {"safetyThreshold": 0, "desiredMinSafeTrialsFraction": 0}
    param(body, 1)["integerValueSpec"]["defaultValue"] = 0
    param(body, 2)["categoricalValueSpec"]["defaultValue"] = ""
    out = ours(body)
    assert out == official(body)
    assert out["studySpec"]["studyStoppingConfig"] == {"minNumTrials": 0, "shouldStopAsap": False}
    assert out["studySpec"]["convexAutomatedStoppingSpec"] == {"updateAllStoppedTrials": False}
    assert out["studySpec"]["metrics"][0]["safetyConfig"] == {"desiredMinSafeTrialsFraction": 0.0}
    assert out["studySpec"]["parameters"][1]["integerValueSpec"]["defaultValue"] == "0"
    assert out["studySpec"]["parameters"][2]["categoricalValueSpec"]["defaultValue"] == ""
    # And absent stays absent.
    assert "defaultValue" not in ours(valid())["studySpec"]["parameters"][0]["doubleValueSpec"]


def test_doubles_follow_the_proto_json_mapping() -> None:
    body = valid()
    param(body)["doubleValueSpec"] = {"minValue": "1e-4", "maxValue": "NaN", "defaultValue": "-Infinity"}
    out = ours(body)
    assert out == official(body)
    assert out["studySpec"]["parameters"][0]["doubleValueSpec"] == {
        "minValue": 0.0001,
        "maxValue": "NaN",
        "defaultValue": "-Infinity",
    }
    json.loads(json.dumps(out, allow_nan=False))  # never a bare NaN in the JSON text


@pytest.mark.parametrize("bad", [True, "abc", "1.5.2", [1], {"a": 1}, "inf"])
def test_bad_doubles_are_rejected_with_their_path(bad: Any) -> None:
    body = valid()
    param(body)["doubleValueSpec"]["minValue"] = bad
    assert fields(body) == [f"{P0}.double_value_spec.min_value"]


def test_int64_values_reject_fractions() -> None:
    body = valid()
    param(body, 1)["integerValueSpec"]["maxValue"] = "2.5"
    assert fields(body) == ["study_spec.parameters[1].integer_value_spec.max_value"]


def test_output_only_fields_are_stripped_by_input_dict() -> None:
    job = parse_body(HyperparameterTuningJob, rich())
    stored = input_dict(job)
    for key in ("name", "trials", "state", "createTime", "startTime", "endTime", "updateTime", "error"):
        assert key not in stored
    assert "satisfiesPzs" not in stored
    assert stored["displayName"] == "tune"
    assert stored["studySpec"] == ours(rich())["studySpec"]
    assert stored["labels"] == {"team": "ml", "env": "dev"}
    assert official(stored) == stored


def test_v1beta1_fields_parse_and_match_the_v1beta1_descriptors() -> None:
    body = valid()
    study(body)["convexStopConfig"] = {"maxNumSteps": "10", "useSeconds": True}
    study(body)["transferLearningConfig"] = {"disableTransferLearning": True}
    out = ours(body)
    assert out == official(body, aiplatform_v1beta1.HyperparameterTuningJob)


def test_field_numbers_and_names_match_the_official_descriptors() -> None:
    """Every field of the official v1 messages has a model field of the same proto name, and vice versa
    (apart from the v1beta1-only StudySpec fields)."""
    pairs = [
        (HyperparameterTuningJob, aiplatform_v1.HyperparameterTuningJob),
        (StudySpec, aiplatform_v1.StudySpec),
        (ParameterSpec, aiplatform_v1.StudySpec.ParameterSpec),
        (Trial, aiplatform_v1.Trial),
        (Measurement, aiplatform_v1.Measurement),
    ]
    v1beta1_only = {"convex_stop_config", "transfer_learning_config"}
    for model, proto in pairs:
        expected = {f.name: f.json_name for f in proto.pb().DESCRIPTOR.fields}
        got = {name: info.alias for name, info in model.model_fields.items() if name not in v1beta1_only}
        assert got == expected, model.__name__


def test_enum_numbers_match_the_official_descriptors() -> None:
    study_pb = aiplatform_v1.StudySpec.pb().DESCRIPTOR
    official_enums = {
        Algorithm: study_pb.enum_types_by_name["Algorithm"],
        ObservationNoise: study_pb.enum_types_by_name["ObservationNoise"],
        MeasurementSelectionType: study_pb.enum_types_by_name["MeasurementSelectionType"],
        GoalType: study_pb.nested_types_by_name["MetricSpec"].enum_types_by_name["GoalType"],
        ScaleType: study_pb.nested_types_by_name["ParameterSpec"].enum_types_by_name["ScaleType"],
        TrialState: aiplatform_v1.Trial.pb().DESCRIPTOR.enum_types_by_name["State"],
    }
    for ours_enum, descriptor in official_enums.items():
        assert {m.name: m.value for m in ours_enum} == {v.name: v.number for v in descriptor.values}


@pytest.mark.parametrize(
    ("where", "change", "path"),
    [
        ("param", lambda p: p.update(integerValueSpec={"minValue": 1, "maxValue": 2}), P0),
        (
            "cond",
            lambda c: c.update(parentIntValues={"values": [1]}, parentCategoricalValues={"values": ["a"]}),
            f"{P0}.conditional_parameter_specs[0]",
        ),
        (
            "study",
            lambda s: s.update(decayCurveStoppingSpec={}, medianAutomatedStoppingSpec={}),
            "study_spec",
        ),
        ("study", lambda s: s.update(convexAutomatedStoppingSpec={}, convexStopConfig={}), "study_spec"),
        (
            "study",
            lambda s: s.update(
                studyStoppingConfig={
                    "maximumRuntimeConstraint": {"maxDuration": "1s", "endTime": "2030-01-01T00:00:00Z"}
                }
            ),
            "study_spec.study_stopping_config.maximum_runtime_constraint",
        ),
    ],
)
def test_two_members_of_a_oneof_are_rejected(where: str, change: Callable[[Body], Any], path: str) -> None:
    body = valid()
    param(body)["conditionalParameterSpecs"] = [
        {"parentIntValues": {"values": [1]}, "parameterSpec": {"parameterId": "c"}}
    ]
    target = {"param": param(body), "cond": param(body)["conditionalParameterSpecs"][0], "study": study(body)}
    change(target[where])
    found = problems(body)
    assert [v.field for v in found] == [path]
    assert "only one field of the oneof" in found[0].description


def test_trial_dict_renders_canonical_trials() -> None:
    start = datetime(2025, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)
    out = trial_dict(
        "3",
        TrialState.SUCCEEDED,
        {"lr": 0.01, "layers": 2, "opt": "adam"},
        final_measurement={"stepCount": 20, "metrics": [{"metricId": "accuracy", "value": 0.9}]},
        measurements=[
            Measurement(step_count=20, metrics=[{"metric_id": "accuracy", "value": 0.9}]),  # type: ignore[list-item]
            {
                "stepCount": "10",
                "elapsedDuration": "1.5s",
                "metrics": [{"metricId": "accuracy", "value": 0.5}],
            },
        ],
        start_time=start,
        end_time=start + timedelta(minutes=1),
        custom_job="projects/1/locations/us-central1/customJobs/9",
    )
    assert out == official(out, aiplatform_v1.Trial)
    assert out["state"] == "SUCCEEDED"
    assert out["parameters"] == [
        {"parameterId": "lr", "value": 0.01},
        {"parameterId": "layers", "value": 2},
        {"parameterId": "opt", "value": "adam"},
    ]
    assert [m["stepCount"] for m in out["measurements"]] == ["10", "20"]  # sorted by step
    assert out["measurements"][0]["elapsedDuration"] == "1.500s"
    assert out["startTime"] == "2025-01-02T03:04:05.600Z"
    infeasible = trial_dict("4", TrialState.INFEASIBLE, {}, infeasible_reason="no metric reported")
    assert infeasible == {"id": "4", "state": "INFEASIBLE", "infeasibleReason": "no metric reported"}
    with pytest.raises(ValueError, match="cannot hold"):
        trial_dict("5", TrialState.ACTIVE, {"x": float("nan")})


def test_walk_parameters_and_helpers() -> None:
    job = parse_body(HyperparameterTuningJob, rich())
    assert job.study_spec is not None
    nodes = list(walk_parameters(job.study_spec.parameters))
    assert [(n.spec.parameter_id, n.path, n.parent_values) for n in nodes] == [
        ("lr", f"{P0}", None),
        ("layers", "study_spec.parameters[1]", None),
        ("dropout", "study_spec.parameters[1].conditional_parameter_specs[0].parameter_spec", (2, 3)),
        ("opt", "study_spec.parameters[2]", None),
        ("momentum", "study_spec.parameters[2].conditional_parameter_specs[0].parameter_spec", ("sgd",)),
        ("batch", "study_spec.parameters[3]", None),
        ("accum", "study_spec.parameters[3].conditional_parameter_specs[0].parameter_spec", (64.0,)),
    ]
    assert [n.spec.parameter_type for n in nodes[:2]] == [ParameterType.DOUBLE, ParameterType.INTEGER]
    assert nodes[2].parent is nodes[1].spec and nodes[2].depth == 1
    assert job.study_spec.selection == MeasurementSelectionType.BEST_MEASUREMENT
    assert StudySpec().selection == MeasurementSelectionType.LAST_MEASUREMENT
    assert job.study_spec.automated_stopping_spec is job.study_spec.median_automated_stopping_spec
    assert DiscreteValueSpec(values=[1.0, 2.0, 4.0]).nearest(3.1) == 4.0
    assert job.state == JobState.JOB_STATE_SUCCEEDED
    assert job.trials[0].final_measurement is not None
    assert job.trials[0].final_measurement.value_of("accuracy") == 0.91


# ------------------------------------------------------------------------------------------ validation
def test_the_valid_and_rich_jobs_pass() -> None:
    assert problems(valid()) == []
    assert problems(rich()) == []


CASES: list[tuple[str, Callable[[Body], Any], list[str]]] = [
    # the job
    ("display name required", lambda b: b.pop("displayName"), ["display_name"]),
    ("display name blank", lambda b: b.update(displayName="  "), ["display_name"]),
    ("display name too long", lambda b: b.update(displayName="x" * 129), ["display_name"]),
    ("study spec required", lambda b: b.pop("studySpec"), ["study_spec"]),
    ("max trials required", lambda b: b.pop("maxTrialCount"), ["max_trial_count"]),
    ("max trials negative", lambda b: b.update(maxTrialCount=-1), ["max_trial_count"]),
    ("max trials capped", lambda b: b.update(maxTrialCount=MAX_TRIAL_COUNT + 1), ["max_trial_count"]),
    ("parallel required", lambda b: b.pop("parallelTrialCount"), ["parallel_trial_count"]),
    ("parallel above max", lambda b: b.update(parallelTrialCount=9), ["parallel_trial_count"]),
    ("max failed negative", lambda b: b.update(maxFailedTrialCount=-1), ["max_failed_trial_count"]),
    ("int32 overflow", lambda b: b.update(maxTrialCount=2**31), ["max_trial_count"]),
    ("trial job spec required", lambda b: b.pop("trialJobSpec"), ["trial_job_spec"]),
    (
        "trial job spec pools",
        lambda b: b["trialJobSpec"].update(workerPoolSpecs=[]),
        ["trial_job_spec.worker_pool_specs"],
    ),
    (
        "trial job spec rules",
        lambda b: b["trialJobSpec"]["workerPoolSpecs"][0].update(replicaCount="2"),
        ["trial_job_spec.worker_pool_specs[0].replica_count"],
    ),
    (
        "trial job machine",
        lambda b: b["trialJobSpec"]["workerPoolSpecs"][0]["machineSpec"].update(machineType="nope-1"),
        ["trial_job_spec.worker_pool_specs[0].machine_spec.machine_type"],
    ),
    (
        "trial job persistent resource",
        lambda b: b["trialJobSpec"].update(persistentResourceId="pr"),
        ["trial_job_spec.persistent_resource_id"],
    ),
    ("labels", lambda b: b.update(labels={"Bad": "x"}), ['labels["Bad"]']),
    ("kms key", lambda b: b.update(encryptionSpec={}), ["encryption_spec.kms_key_name"]),
    # metrics
    ("metrics required", lambda b: study(b).pop("metrics"), ["study_spec.metrics"]),
    (
        "single metric",
        lambda b: study(b)["metrics"].append({"metricId": "loss", "goal": "MINIMIZE"}),
        ["study_spec.metrics"],
    ),
    (
        "unique metric",
        lambda b: study(b)["metrics"].append({"metricId": "accuracy", "goal": "MINIMIZE"}),
        ["study_spec.metrics", "study_spec.metrics[1].metric_id"],
    ),
    (
        "metric id required",
        lambda b: study(b)["metrics"][0].pop("metricId"),
        ["study_spec.metrics[0].metric_id"],
    ),
    (
        "metric id whitespace",
        lambda b: study(b)["metrics"][0].update(metricId="my metric"),
        ["study_spec.metrics[0].metric_id"],
    ),
    ("goal required", lambda b: study(b)["metrics"][0].pop("goal"), ["study_spec.metrics[0].goal"]),
    ("goal unknown", lambda b: study(b)["metrics"][0].update(goal="BIGGER"), ["study_spec.metrics[0].goal"]),
    (
        "safety metric",
        lambda b: study(b)["metrics"][0].update(safetyConfig={"safetyThreshold": 0.5}),
        ["study_spec.metrics[0].safety_config"],
    ),
    # parameters
    ("parameters required", lambda b: study(b).pop("parameters"), ["study_spec.parameters"]),
    ("parameter id required", lambda b: param(b).pop("parameterId"), [f"{P0}.parameter_id"]),
    (
        "parameter id whitespace",
        lambda b: param(b).update(parameterId="learning rate"),
        [f"{P0}.parameter_id"],
    ),
    (
        "parameter id unique",
        lambda b: param(b, 2).update(parameterId="lr"),
        ["study_spec.parameters[2].parameter_id"],
    ),
    (
        "parameter id unique across conditionals",
        lambda b: param(b, 2).update(
            conditionalParameterSpecs=[
                {
                    "parentCategoricalValues": {"values": ["sgd"]},
                    "parameterSpec": {
                        "parameterId": "layers",
                        "integerValueSpec": {"minValue": 1, "maxValue": 2},
                    },
                }
            ]
        ),
        ["study_spec.parameters[2].conditional_parameter_specs[0].parameter_spec.parameter_id"],
    ),
    ("value spec required", lambda b: param(b).pop("doubleValueSpec"), [P0]),
    # DOUBLE
    (
        "double min < max",
        lambda b: param(b)["doubleValueSpec"].update(minValue=0.5, maxValue=0.5),
        [f"{P0}.double_value_spec.min_value"],
    ),
    (
        "double bounds required",
        lambda b: param(b).update(doubleValueSpec={}),
        [f"{P0}.double_value_spec.min_value"],
    ),
    (
        "double finite",
        lambda b: param(b)["doubleValueSpec"].update(maxValue="Infinity"),
        [f"{P0}.double_value_spec.max_value"],
    ),
    (
        "double default in bounds",
        lambda b: param(b)["doubleValueSpec"].update(defaultValue=1.0),
        [f"{P0}.double_value_spec.default_value"],
    ),
    (
        "double default finite",
        lambda b: param(b)["doubleValueSpec"].update(defaultValue="NaN"),
        [f"{P0}.double_value_spec.default_value"],
    ),
    (
        "log scale needs positive double",
        lambda b: param(b)["doubleValueSpec"].update(minValue=0),
        [f"{P0}.scale_type"],
    ),
    (
        "reverse log scale needs positive double",
        lambda b: param(b).update(
            scaleType="UNIT_REVERSE_LOG_SCALE", doubleValueSpec={"minValue": -1, "maxValue": 1}
        ),
        [f"{P0}.scale_type"],
    ),
    ("unknown scale type", lambda b: param(b).update(scaleType=7), [f"{P0}.scale_type"]),
    # INTEGER
    (
        "integer min <= max",
        lambda b: param(b, 1)["integerValueSpec"].update(minValue="5"),
        ["study_spec.parameters[1].integer_value_spec.min_value"],
    ),
    (
        "integer default in bounds",
        lambda b: param(b, 1)["integerValueSpec"].update(defaultValue="0"),
        ["study_spec.parameters[1].integer_value_spec.default_value"],
    ),
    (
        "log scale needs positive integer",
        lambda b: param(b, 1).update(
            scaleType="UNIT_LOG_SCALE", integerValueSpec={"minValue": 0, "maxValue": 3}
        ),
        ["study_spec.parameters[1].scale_type"],
    ),
    # CATEGORICAL
    (
        "categorical values required",
        lambda b: param(b, 2)["categoricalValueSpec"].update(values=[]),
        ["study_spec.parameters[2].categorical_value_spec.values"],
    ),
    (
        "categorical values unique",
        lambda b: param(b, 2)["categoricalValueSpec"].update(values=["a", "b", "a"]),
        ["study_spec.parameters[2].categorical_value_spec.values[2]"],
    ),
    (
        "categorical default among values",
        lambda b: param(b, 2)["categoricalValueSpec"].update(defaultValue="rmsprop"),
        ["study_spec.parameters[2].categorical_value_spec.default_value"],
    ),
    (
        "categorical takes no scale",
        lambda b: param(b, 2).update(scaleType="UNIT_LINEAR_SCALE"),
        ["study_spec.parameters[2].scale_type"],
    ),
    # DISCRETE
    (
        "discrete values required",
        lambda b: param(b, 3)["discreteValueSpec"].update(values=[]),
        ["study_spec.parameters[3].discrete_value_spec.values"],
    ),
    (
        "discrete values increasing",
        lambda b: param(b, 3)["discreteValueSpec"].update(values=[16, 64, 32]),
        ["study_spec.parameters[3].discrete_value_spec.values[2]"],
    ),
    (
        "discrete values distinct",
        lambda b: param(b, 3)["discreteValueSpec"].update(values=[16, 16, 32]),
        ["study_spec.parameters[3].discrete_value_spec.values[1]"],
    ),
    (
        "discrete values 1e-10 apart",
        lambda b: param(b, 3)["discreteValueSpec"].update(values=[1.0, 1.0 + 1e-12]),
        ["study_spec.parameters[3].discrete_value_spec.values[1]"],
    ),
    (
        "discrete values finite",
        lambda b: param(b, 3)["discreteValueSpec"].update(values=[1, "Infinity"]),
        ["study_spec.parameters[3].discrete_value_spec.values[1]"],
    ),
    (
        "discrete at most 1000 values",
        lambda b: param(b, 3)["discreteValueSpec"].update(values=list(range(1001))),
        ["study_spec.parameters[3].discrete_value_spec.values"],
    ),
    (
        "discrete default finite",
        lambda b: param(b, 3)["discreteValueSpec"].update(defaultValue="NaN"),
        ["study_spec.parameters[3].discrete_value_spec.default_value"],
    ),
    (
        "log scale needs positive discrete",
        lambda b: param(b, 3).update(scaleType="UNIT_LOG_SCALE", discreteValueSpec={"values": [0, 1]}),
        ["study_spec.parameters[3].scale_type"],
    ),
    # conditional parameters
    (
        "double parent",
        lambda b: param(b).update(
            conditionalParameterSpecs=[
                {
                    "parentDiscreteValues": {"values": [0.01]},
                    "parameterSpec": {"parameterId": "c", "categoricalValueSpec": {"values": ["x"]}},
                }
            ]
        ),
        [f"{P0}.conditional_parameter_specs"],
    ),
    (
        "condition required",
        lambda b: param(b, 1).update(
            conditionalParameterSpecs=[
                {"parameterSpec": {"parameterId": "c", "categoricalValueSpec": {"values": ["x"]}}}
            ]
        ),
        ["study_spec.parameters[1].conditional_parameter_specs[0]"],
    ),
    (
        "condition kind matches the parent",
        lambda b: param(b, 1).update(
            conditionalParameterSpecs=[
                {
                    "parentCategoricalValues": {"values": ["2"]},
                    "parameterSpec": {"parameterId": "c", "categoricalValueSpec": {"values": ["x"]}},
                }
            ]
        ),
        ["study_spec.parameters[1].conditional_parameter_specs[0].parent_categorical_values"],
    ),
    (
        "condition values required",
        lambda b: param(b, 2).update(
            conditionalParameterSpecs=[
                {
                    "parentCategoricalValues": {},
                    "parameterSpec": {"parameterId": "c", "categoricalValueSpec": {"values": ["x"]}},
                }
            ]
        ),
        ["study_spec.parameters[2].conditional_parameter_specs[0].parent_categorical_values.values"],
    ),
    (
        "int condition within the parent's range",
        lambda b: param(b, 1).update(
            conditionalParameterSpecs=[
                {
                    "parentIntValues": {"values": ["2", "5"]},
                    "parameterSpec": {"parameterId": "c", "categoricalValueSpec": {"values": ["x"]}},
                }
            ]
        ),
        ["study_spec.parameters[1].conditional_parameter_specs[0].parent_int_values.values[1]"],
    ),
    (
        "categorical condition among the parent's values",
        lambda b: param(b, 2).update(
            conditionalParameterSpecs=[
                {
                    "parentCategoricalValues": {"values": ["rmsprop"]},
                    "parameterSpec": {"parameterId": "c", "categoricalValueSpec": {"values": ["x"]}},
                }
            ]
        ),
        ["study_spec.parameters[2].conditional_parameter_specs[0].parent_categorical_values.values[0]"],
    ),
    (
        "discrete condition among the parent's values",
        lambda b: param(b, 3).update(
            conditionalParameterSpecs=[
                {
                    "parentDiscreteValues": {"values": [32.0, 48.0]},
                    "parameterSpec": {"parameterId": "c", "categoricalValueSpec": {"values": ["x"]}},
                }
            ]
        ),
        ["study_spec.parameters[3].conditional_parameter_specs[0].parent_discrete_values.values[1]"],
    ),
    (
        "conditional parameter spec required",
        lambda b: param(b, 3).update(conditionalParameterSpecs=[{"parentDiscreteValues": {"values": [32]}}]),
        ["study_spec.parameters[3].conditional_parameter_specs[0].parameter_spec"],
    ),
    (
        "nested conditional spec validated",
        lambda b: param(b, 3).update(
            conditionalParameterSpecs=[
                {
                    "parentDiscreteValues": {"values": [32]},
                    "parameterSpec": {"parameterId": "c", "integerValueSpec": {"minValue": 3, "maxValue": 1}},
                }
            ]
        ),
        [
            "study_spec.parameters[3].conditional_parameter_specs[0].parameter_spec.integer_value_spec.min_value"
        ],
    ),
    # algorithm and study options
    (
        "grid search needs no DOUBLE",
        lambda b: study(b).update(algorithm="GRID_SEARCH"),
        [f"{P0}.double_value_spec"],
    ),
    (
        "grid search checks conditionals",
        lambda b: (
            study(b).update(algorithm=2, parameters=study(b)["parameters"][2:]),
            param(b).update(
                conditionalParameterSpecs=[
                    {
                        "parentCategoricalValues": {"values": ["sgd"]},
                        "parameterSpec": {
                            "parameterId": "m",
                            "doubleValueSpec": {"minValue": 0, "maxValue": 1},
                        },
                    }
                ]
            ),
        ),
        [f"{P0}.conditional_parameter_specs[0].parameter_spec.double_value_spec"],
    ),
    ("unknown algorithm", lambda b: study(b).update(algorithm=1), ["study_spec.algorithm"]),
    (
        "observation noise",
        lambda b: study(b).update(observationNoise="HIGH"),
        ["study_spec.observation_noise"],
    ),
    (
        "convexStopConfig",
        lambda b: study(b).update(convexStopConfig={"maxNumSteps": "10"}),
        ["study_spec.convex_stop_config"],
    ),
    (
        "transferLearningConfig",
        lambda b: study(b).update(transferLearningConfig={}),
        ["study_spec.transfer_learning_config"],
    ),
    (
        "studyStoppingConfig",
        lambda b: study(b).update(studyStoppingConfig={"maxNumTrials": 5}),
        ["study_spec.study_stopping_config"],
    ),
    (
        "convex counts not negative",
        lambda b: study(b).update(convexAutomatedStoppingSpec={"minStepCount": "-1"}),
        ["study_spec.convex_automated_stopping_spec.min_step_count"],
    ),
    (
        "convex min <= max steps",
        lambda b: study(b).update(convexAutomatedStoppingSpec={"minStepCount": "20", "maxStepCount": "10"}),
        ["study_spec.convex_automated_stopping_spec.min_step_count"],
    ),
    (
        "convex learning rate names a parameter",
        lambda b: study(b).update(convexAutomatedStoppingSpec={"learningRateParameterName": "learning_rate"}),
        ["study_spec.convex_automated_stopping_spec.learning_rate_parameter_name"],
    ),
    (
        "unknown field",
        lambda b: study(b).update(decayCurveAutomatedStoppingSpec={}),
        ["study_spec.decayCurveAutomatedStoppingSpec"],
    ),
]


@pytest.mark.parametrize(("change", "paths"), [(c, p) for _, c, p in CASES], ids=[n for n, _, _ in CASES])
def test_rule(change: Callable[[Body], Any], paths: list[str]) -> None:
    assert fields(mutated(change)) == paths


ACCEPTED: list[tuple[str, Callable[[Body], Any]]] = [
    ("fixed integer", lambda b: param(b, 1).update(integerValueSpec={"minValue": "3", "maxValue": "3"})),
    (
        "negative linear double",
        lambda b: param(b).update(scaleType=1, doubleValueSpec={"minValue": -1, "maxValue": 1}),
    ),
    ("discrete default rounds", lambda b: param(b, 3)["discreteValueSpec"].update(defaultValue=20)),
    (
        "grid search",
        lambda b: study(b).update(algorithm="GRID_SEARCH", parameters=study(b)["parameters"][1:]),
    ),
    ("median stopping", lambda b: study(b).update(medianAutomatedStoppingSpec={"useElapsedDuration": True})),
    ("decay curve stopping", lambda b: study(b).update(decayCurveStoppingSpec={})),
    (
        "convex stopping",
        lambda b: study(b).update(
            convexAutomatedStoppingSpec={
                "maxStepCount": "100",
                "minStepCount": "10",
                "learningRateParameterName": "lr",
            }
        ),
    ),
    ("max failed zero", lambda b: b.update(maxFailedTrialCount=0)),
    ("parallel equals max", lambda b: b.update(parallelTrialCount=8)),
    ("max trials at the cap", lambda b: b.update(maxTrialCount=MAX_TRIAL_COUNT)),
    ("measurement selection", lambda b: study(b).update(measurementSelectionType="LAST_MEASUREMENT")),
    ("output-only fields are ignored", lambda b: b.update(state="JOB_STATE_FAILED", trials=[{"id": "1"}])),
]


@pytest.mark.parametrize("change", [c for _, c in ACCEPTED], ids=[n for n, _ in ACCEPTED])
def test_accepted(change: Callable[[Body], Any]) -> None:
    assert problems(mutated(change)) == []


def test_every_violation_is_reported_at_once() -> None:
    body = valid()
    body["displayName"] = ""
    study(body)["metrics"][0]["goal"] = 0
    param(body)["doubleValueSpec"]["minValue"] = 1
    body["parallelTrialCount"] = 0
    assert fields(body) == [
        "display_name",
        "study_spec.metrics[0].goal",
        f"{P0}.double_value_spec.min_value",
        "parallel_trial_count",
    ]


def test_messages_are_clear() -> None:
    def message(change: Callable[[Body], Any]) -> str:
        return problems(mutated(change))[0].description

    assert "single metric" in message(lambda b: study(b)["metrics"].append({"metricId": "m", "goal": 1}))
    assert "Vizier" in message(lambda b: study(b).update(observationNoise="LOW"))
    assert "not supported" in message(lambda b: study(b).update(studyStoppingConfig={}))
    assert "convex_automated_stopping_spec" in message(lambda b: study(b).update(convexStopConfig={}))
    assert "GRID_SEARCH" in message(lambda b: study(b).update(algorithm="GRID_SEARCH"))
    assert "parent_int_values" in message(
        lambda b: param(b, 1).update(
            conditionalParameterSpecs=[
                {
                    "parentDiscreteValues": {"values": [2]},
                    "parameterSpec": {"parameterId": "c", "categoricalValueSpec": {"values": ["x"]}},
                }
            ]
        )
    )


def test_deep_conditional_nesting_is_validated_without_recursion() -> None:
    body = valid()
    leaf: Body = {"parameterId": "p0", "categoricalValueSpec": {"values": ["a"]}}
    study(body)["parameters"] = [leaf]
    for depth in range(1, 100):
        child: Body = {"parameterId": f"p{depth}", "categoricalValueSpec": {"values": ["a"]}}
        leaf["conditionalParameterSpecs"] = [
            {"parentCategoricalValues": {"values": ["a"]}, "parameterSpec": child}
        ]
        leaf = child
    assert problems(body) == []
    leaf["parameterId"] = "p0"  # the deepest one repeats the top-level ID
    [violation] = problems(body)
    assert violation.field == P0 + ".conditional_parameter_specs[0].parameter_spec" * 99 + ".parameter_id"
