"""The rules a TrainingPipeline must satisfy before it is stored. Pure: returns field violations and the
task inputs in canonical form.

The task inputs are checked by the rules of the job that will run them: a CustomJobSpec (custom task) or a
HyperparameterTuningJob's fields (tuning task), with every field path under
`training_pipeline.training_task_inputs`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainworks.kernel.errors import ApiError, FieldViolation
from trainworks.kernel.wire import input_dict
from trainworks.kernel.wire_errors import parse_body
from trainworks.kinds.custom_jobs.validation import (
    PersistentResourceCheck,
    check_display_name,
    check_encryption_spec,
    check_job_spec,
    check_labels,
)
from trainworks.kinds.custom_jobs.wire import CustomJobSpec
from trainworks.kinds.training_pipelines.wire import TASK_DEFINITIONS, TrainingPipeline
from trainworks.kinds.tuning_jobs.validation import validate_tuning_job
from trainworks.kinds.tuning_jobs.wire import HyperparameterTuningJob

ROOT = "training_pipeline"
INPUTS = f"{ROOT}.training_task_inputs"
REQUIRED = "Required field is not set."
TUNING_INPUT_KEYS = {
    "studySpec": "study_spec",
    "maxTrialCount": "max_trial_count",
    "parallelTrialCount": "parallel_trial_count",
    "maxFailedTrialCount": "max_failed_trial_count",
    "trialJobSpec": "trial_job_spec",
}
_MODEL_ID = re.compile(r"^[a-z_][a-z0-9_-]{0,62}$")
_MODEL_NAME = re.compile(r"^projects/([^/]+)/locations/([^/]+)/models/([^/@]+)$")


@dataclass
class CheckedPipeline:
    """What validation learnt: the task kind ("custom" or "tuning"), the inputs in canonical camelCase, and
    every violation (empty when the pipeline may be stored)."""

    kind: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)
    violations: list[FieldViolation] = field(default_factory=list)


def _parsed(model: type[Any], body: Any, prefix: str, out: list[FieldViolation]) -> Any:
    try:
        return parse_body(model, body, prefix)
    except ApiError as exc:
        out += exc.violations or [FieldViolation(prefix, exc.message)]
        return None


def _custom_inputs(
    inputs: dict[str, Any], check: PersistentResourceCheck | None, result: CheckedPipeline
) -> None:
    spec = _parsed(CustomJobSpec, inputs, INPUTS, result.violations)
    if spec is None:
        return
    result.violations += check_job_spec(spec, INPUTS, check)
    result.inputs = spec.to_wire()


def _tuning_inputs(
    display_name: str,
    inputs: dict[str, Any],
    check: PersistentResourceCheck | None,
    result: CheckedPipeline,
) -> None:
    known = set(TUNING_INPUT_KEYS) | set(TUNING_INPUT_KEYS.values())
    for key in inputs:
        if key not in known:
            allowed = ", ".join(TUNING_INPUT_KEYS)
            result.violations.append(
                FieldViolation(
                    f"{INPUTS}.{key}", f"unknown field of the tuning task inputs; expected {allowed}"
                )
            )
    if result.violations:
        return
    job = _parsed(
        HyperparameterTuningJob,
        {**inputs, "displayName": display_name or "pipeline"},
        INPUTS,
        result.violations,
    )
    if job is None:
        return
    for violation in validate_tuning_job(job, check):
        name = violation.field
        if name.startswith(("display_name", "labels", "encryption_spec")):
            continue  # the pipeline's own fields, checked as such
        where = name if name.startswith(INPUTS) else f"{INPUTS}.{name}"
        result.violations.append(FieldViolation(where, violation.description))
    canonical = input_dict(job)
    result.inputs = {key: canonical[key] for key in TUNING_INPUT_KEYS if key in canonical}


def _base_output(kind: str, inputs: dict[str, Any]) -> str:
    spec = inputs if kind == "custom" else inputs.get("trialJobSpec") or {}
    return str((spec.get("baseOutputDirectory") or {}).get("outputUriPrefix") or "")


def _check_model(
    pipeline: TrainingPipeline, result: CheckedPipeline, same_parent: Callable[[str, str], bool]
) -> None:
    out = result.violations
    model = pipeline.model_to_upload
    if model is None:
        for name, value in (("model_id", pipeline.model_id), ("parent_model", pipeline.parent_model)):
            if value:
                out.append(FieldViolation(f"{ROOT}.{name}", "may only be set together with model_to_upload"))
        return
    display = model.get("displayName", model.get("display_name"))
    if not isinstance(display, str) or not display.strip():
        out.append(FieldViolation(f"{ROOT}.model_to_upload.display_name", REQUIRED))
    artifact = model.get("artifactUri", model.get("artifact_uri"))
    if artifact is not None and not isinstance(artifact, str):
        out.append(FieldViolation(f"{ROOT}.model_to_upload.artifact_uri", "expected a string"))
    elif not artifact and result.kind and not _base_output(result.kind, result.inputs):
        where = "base_output_directory" if result.kind == "custom" else "trial_job_spec.base_output_directory"
        out.append(
            FieldViolation(
                f"{ROOT}.model_to_upload.artifact_uri",
                f"not set, and {INPUTS}.{where} is not set either: the model's artifacts are taken from "
                "artifact_uri, or else from the training job's AIP_MODEL_DIR under its base output directory",
            )
        )
    if pipeline.model_id and pipeline.parent_model:
        out.append(FieldViolation(f"{ROOT}.model_id", "may not be set together with parent_model"))
    if pipeline.model_id and not _MODEL_ID.fullmatch(pipeline.model_id):
        out.append(
            FieldViolation(
                f"{ROOT}.model_id",
                "must be 1 to 63 characters of [a-z0-9_-], not starting with a digit or a hyphen",
            )
        )
    if pipeline.parent_model:
        match = _MODEL_NAME.match(pipeline.parent_model)
        if match is None:
            out.append(
                FieldViolation(
                    f"{ROOT}.parent_model",
                    "must be a model name: projects/{project}/locations/{location}/models/{model}",
                )
            )
        elif not same_parent(match.group(1), match.group(2)):
            out.append(
                FieldViolation(
                    f"{ROOT}.parent_model", "must be in the same project and location as the pipeline"
                )
            )


def validate_training_pipeline(
    pipeline: TrainingPipeline,
    persistent_resources: PersistentResourceCheck | None = None,
    same_parent: Callable[[str, str], bool] = lambda project, location: True,
) -> CheckedPipeline:
    """Every violation of the TrainingPipeline rules (the input data config is the datasets' to check)."""
    result = CheckedPipeline()
    out = result.violations
    out += check_display_name(pipeline.display_name, f"{ROOT}.display_name")
    definition = pipeline.training_task_definition
    if not definition:
        out.append(FieldViolation(f"{ROOT}.training_task_definition", REQUIRED))
    elif definition not in TASK_DEFINITIONS:
        supported = ", ".join(TASK_DEFINITIONS)
        out.append(
            FieldViolation(
                f"{ROOT}.training_task_definition",
                f"unsupported training task definition {definition!r}; supported: {supported}",
            )
        )
    else:
        result.kind = TASK_DEFINITIONS[definition]
    inputs = pipeline.training_task_inputs
    if inputs is None:
        out.append(FieldViolation(INPUTS, REQUIRED))
    elif not isinstance(inputs, dict):
        out.append(FieldViolation(INPUTS, "expected a JSON object"))
    elif result.kind == "custom":
        _custom_inputs(inputs, persistent_resources, result)
    elif result.kind == "tuning":
        _tuning_inputs(pipeline.display_name, inputs, persistent_resources, result)
    _check_model(pipeline, result, same_parent)
    out += check_labels(pipeline.labels, f"{ROOT}.labels")
    out += check_encryption_spec(pipeline.encryption_spec, f"{ROOT}.encryption_spec")
    if pipeline.input_data_config is not None and not pipeline.input_data_config.dataset_id:
        out.append(FieldViolation(f"{ROOT}.input_data_config.dataset_id", REQUIRED))
    return result


__all__ = ["CheckedPipeline", "TUNING_INPUT_KEYS", "validate_training_pipeline"]
