"""The rules a HyperparameterTuningJob must satisfy before it is stored. Pure: returns field violations.

Paths are proto field paths (`study_spec.parameters[0].double_value_spec.min_value`). The rules follow the
proto comments of google.cloud.aiplatform.v1.StudySpec; where Vertex leaves a choice open, Trainworks chooses:

* A tuning job has exactly one metric (no multi-objective studies) and so no safety metric
  (`MetricSpec.safety_config` needs a separate objective metric).
* Parameter IDs are unique across the whole study, conditional parameters included. (The proto also lets two
  conditional siblings share a name when their parent conditions are disjoint; Trainworks does not.)
* DOUBLE needs min_value < max_value; INTEGER needs min_value <= max_value (a fixed integer is allowed).
* `defaultValue` (Vizier only on Vertex) is accepted and must be feasible: within the bounds for DOUBLE and
  INTEGER, one of the values for CATEGORICAL, and finite for DISCRETE (Vertex rounds a DISCRETE default to the
  nearest value; see `DiscreteValueSpec.nearest`).
* UNIT_LOG_SCALE and UNIT_REVERSE_LOG_SCALE need a strictly positive feasible space; CATEGORICAL parameters
  take no scale type.
* `observationNoise` and the v1beta1 `transferLearningConfig` are Vertex AI Vizier features and rejected; the
  deprecated v1beta1 `convexStopConfig` is rejected in favour of `convexAutomatedStoppingSpec`.
* `studyStoppingConfig` (Vizier's study-level stopping conditions) is rejected as unsupported: a tuning job is
  bounded by `maxTrialCount`, and trials are stopped early by an `automated_stopping_spec`.
* `maxTrialCount` is 1 to MAX_TRIAL_COUNT (1000), `parallelTrialCount` is 1 to `maxTrialCount`, and
  `maxFailedTrialCount` is at least 0 (0: the service decides).
"""

from __future__ import annotations

import math

from trainworks.kernel.errors import FieldViolation
from trainworks.kinds.custom_jobs.validation import (
    PersistentResourceCheck,
    check_display_name,
    check_encryption_spec,
    check_job_labels,
    check_job_spec,
)
from trainworks.kinds.tuning_jobs.wire import (
    Algorithm,
    ConditionalParameterSpec,
    ConvexAutomatedStoppingSpec,
    GoalType,
    HyperparameterTuningJob,
    ObservationNoise,
    ParameterSpec,
    ParameterType,
    ScaleType,
    StudySpec,
    walk_parameters,
)

REQUIRED = "Required field is not set."
MAX_TRIAL_COUNT = 1000
MAX_DISCRETE_VALUES = 1000
DISCRETE_EPSILON = 1e-10  # DiscreteValueSpec values are "at least 1e-10 apart"; conditions match within it
_LOG_SCALES = (ScaleType.UNIT_LOG_SCALE, ScaleType.UNIT_REVERSE_LOG_SCALE)
_CONDITION_FIELD = {
    ParameterType.DISCRETE: "parent_discrete_values",
    ParameterType.INTEGER: "parent_int_values",
    ParameterType.CATEGORICAL: "parent_categorical_values",
}


def _has_space(text: str) -> bool:
    return any(ch.isspace() for ch in text)


def _num(value: float) -> str:
    return repr(value) if math.isfinite(value) else str(value)


def _check_id(value: str, field: str, path: str, seen: dict[str, str], why: str = "") -> list[FieldViolation]:
    """A metric or parameter ID: set, without whitespace, and not already in `seen` (ID -> the path of the
    message that uses it), where it is added when it is new."""
    where = f"{path}.{field}"
    if not value:
        return [FieldViolation(where, REQUIRED)]
    if _has_space(value):
        return [FieldViolation(where, f"{value!r} must not contain whitespace")]
    if value in seen:
        return [FieldViolation(where, f"{field} {value!r} is already used by {seen[value]}{why}")]
    seen[value] = path
    return []


# ---------------------------------------------------------------- metrics
def _check_metrics(spec: StudySpec) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    if not spec.metrics:
        return [FieldViolation("study_spec.metrics", f"{REQUIRED} A tuning job needs exactly one metric.")]
    if len(spec.metrics) > 1:
        out.append(
            FieldViolation(
                "study_spec.metrics",
                f"hyperparameter tuning jobs support a single metric, got {len(spec.metrics)} "
                "(multi-objective studies are not supported)",
            )
        )
    seen: dict[str, str] = {}
    for i, metric in enumerate(spec.metrics):
        path = f"study_spec.metrics[{i}]"
        out += _check_id(metric.metric_id, "metric_id", path, seen)
        if metric.goal == GoalType.GOAL_TYPE_UNSPECIFIED:
            out.append(FieldViolation(f"{path}.goal", f"{REQUIRED} Use MAXIMIZE or MINIMIZE."))
        if metric.safety_config is not None:
            out.append(
                FieldViolation(
                    f"{path}.safety_config",
                    "safety metrics are not supported by hyperparameter tuning jobs: a safety metric needs a "
                    "separate objective metric, and a tuning job has a single metric",
                )
            )
    return out


# ---------------------------------------------------------------- parameters
def _check_log_scale(param: ParameterSpec, path: str, lowest: float, what: str) -> list[FieldViolation]:
    if param.scale_type in _LOG_SCALES and not lowest > 0:
        return [
            FieldViolation(
                f"{path}.scale_type",
                f"{param.scale_type.name} needs a strictly positive feasible space, "
                f"but {what} is {_num(lowest)}",
            )
        ]
    return []


def _check_default(where: str, default: float, low: float, high: float) -> list[FieldViolation]:
    """A value spec's default_value lies within its bounds (ints print as themselves through `_num`)."""
    if low <= default <= high:
        return []
    return [
        FieldViolation(
            f"{where}.default_value",
            f"default_value ({_num(default)}) must lie in [min_value, max_value] = "
            f"[{_num(low)}, {_num(high)}]",
        )
    ]


def _check_double(param: ParameterSpec, path: str) -> list[FieldViolation]:
    spec = param.double_value_spec
    assert spec is not None
    where = f"{path}.double_value_spec"
    out: list[FieldViolation] = []
    bounds_ok = True
    for name in ("min_value", "max_value"):
        if not math.isfinite(getattr(spec, name)):
            out.append(FieldViolation(f"{where}.{name}", "must be a finite number"))
            bounds_ok = False
    if bounds_ok and not spec.min_value < spec.max_value:
        out.append(
            FieldViolation(
                f"{where}.min_value",
                f"min_value ({_num(spec.min_value)}) must be less than max_value ({_num(spec.max_value)}); "
                "both are required",
            )
        )
        bounds_ok = False
    if spec.default_value is not None:
        default = spec.default_value
        if not math.isfinite(default):
            out.append(FieldViolation(f"{where}.default_value", "must be a finite number"))
        elif bounds_ok:
            out += _check_default(where, default, spec.min_value, spec.max_value)
    if bounds_ok:
        out += _check_log_scale(param, path, spec.min_value, "double_value_spec.min_value")
    return out


def _check_integer(param: ParameterSpec, path: str) -> list[FieldViolation]:
    spec = param.integer_value_spec
    assert spec is not None
    where = f"{path}.integer_value_spec"
    out: list[FieldViolation] = []
    if spec.min_value > spec.max_value:
        out.append(
            FieldViolation(
                f"{where}.min_value",
                f"min_value ({spec.min_value}) must not be greater than max_value ({spec.max_value})",
            )
        )
        return out
    if spec.default_value is not None:
        out += _check_default(where, spec.default_value, spec.min_value, spec.max_value)
    out += _check_log_scale(param, path, spec.min_value, "integer_value_spec.min_value")
    return out


def _check_categorical(param: ParameterSpec, path: str) -> list[FieldViolation]:
    spec = param.categorical_value_spec
    assert spec is not None
    where = f"{path}.categorical_value_spec"
    out: list[FieldViolation] = []
    if param.scale_type != ScaleType.SCALE_TYPE_UNSPECIFIED:
        out.append(FieldViolation(f"{path}.scale_type", "must be unset for a CATEGORICAL parameter"))
    if not spec.values:
        out.append(FieldViolation(f"{where}.values", f"{REQUIRED} A CATEGORICAL parameter needs a value."))
        return out
    first: dict[str, int] = {}
    for i, value in enumerate(spec.values):
        if value in first:
            out.append(
                FieldViolation(
                    f"{where}.values[{i}]", f"duplicate value {value!r} (also values[{first[value]}])"
                )
            )
        else:
            first[value] = i
    if spec.default_value is not None and spec.default_value not in first:
        out.append(
            FieldViolation(
                f"{where}.default_value", f"default_value {spec.default_value!r} is not one of the values"
            )
        )
    return out


def _check_discrete(param: ParameterSpec, path: str) -> list[FieldViolation]:
    spec = param.discrete_value_spec
    assert spec is not None
    where = f"{path}.discrete_value_spec"
    out: list[FieldViolation] = []
    values = spec.values
    if not values:
        return [FieldViolation(f"{where}.values", f"{REQUIRED} A DISCRETE parameter needs a value.")]
    if len(values) > MAX_DISCRETE_VALUES:
        out.append(
            FieldViolation(
                f"{where}.values", f"at most {MAX_DISCRETE_VALUES} values are allowed, got {len(values)}"
            )
        )
    finite = True
    for i, value in enumerate(values):
        if not math.isfinite(value):
            out.append(FieldViolation(f"{where}.values[{i}]", "must be a finite number"))
            finite = False
    if finite:
        for i in range(1, len(values)):
            if not values[i] - values[i - 1] >= DISCRETE_EPSILON:
                out.append(
                    FieldViolation(
                        f"{where}.values[{i}]",
                        f"values must be in increasing order and at least {DISCRETE_EPSILON} apart: "
                        f"values[{i}] ({_num(values[i])}) follows values[{i - 1}] ({_num(values[i - 1])})",
                    )
                )
                finite = False
                break
    if spec.default_value is not None and not math.isfinite(spec.default_value):
        out.append(FieldViolation(f"{where}.default_value", "must be a finite number"))
    if finite:
        out += _check_log_scale(param, path, values[0], "the smallest of discrete_value_spec.values")
    return out


_VALUE_CHECKS = {
    ParameterType.DOUBLE: _check_double,
    ParameterType.INTEGER: _check_integer,
    ParameterType.CATEGORICAL: _check_categorical,
    ParameterType.DISCRETE: _check_discrete,
}


def _condition_value_ok(parent: ParameterSpec, kind: ParameterType, value: object) -> bool:
    if kind == ParameterType.INTEGER:
        spec = parent.integer_value_spec
        return spec is not None and spec.min_value <= value <= spec.max_value  # type: ignore[operator]
    if kind == ParameterType.CATEGORICAL:
        return parent.categorical_value_spec is not None and value in parent.categorical_value_spec.values
    spec_d = parent.discrete_value_spec
    return spec_d is not None and any(
        abs(v - value) <= DISCRETE_EPSILON  # type: ignore[operator]
        for v in spec_d.values
    )


def _check_condition(
    parent: ParameterSpec, kind: ParameterType, child: ConditionalParameterSpec, path: str
) -> list[FieldViolation]:
    """One conditional parameter's parent_value_condition against its parent (of type `kind`)."""
    given = child.condition_type
    if given is None:
        return [
            FieldViolation(
                path,
                "one of parent_discrete_values, parent_int_values or parent_categorical_values is required",
            )
        ]
    field = _CONDITION_FIELD[given]
    if given != kind:
        return [
            FieldViolation(
                f"{path}.{field}",
                f"the parent parameter {parent.parameter_id!r} is {kind.value}: use {_CONDITION_FIELD[kind]}",
            )
        ]
    values = child.parent_values or []
    if not values:
        return [FieldViolation(f"{path}.{field}.values", REQUIRED)]
    out: list[FieldViolation] = []
    for k, value in enumerate(values):
        if not _condition_value_ok(parent, kind, value):
            where = "in the range of" if kind == ParameterType.INTEGER else "one of the values of"
            out.append(
                FieldViolation(
                    f"{path}.{field}.values[{k}]",
                    f"{value!r} is not {where} the parent parameter {parent.parameter_id!r}",
                )
            )
    return out


def _check_conditionals(param: ParameterSpec, kind: ParameterType | None, path: str) -> list[FieldViolation]:
    if not param.conditional_parameter_specs:
        return []
    out: list[FieldViolation] = []
    if kind == ParameterType.DOUBLE:
        out.append(
            FieldViolation(
                f"{path}.conditional_parameter_specs",
                "only DISCRETE, INTEGER and CATEGORICAL parameters can have conditional parameters; "
                f"{param.parameter_id!r} is DOUBLE",
            )
        )
    for j, child in enumerate(param.conditional_parameter_specs):
        where = f"{path}.conditional_parameter_specs[{j}]"
        if child.parameter_spec is None:
            out.append(FieldViolation(f"{where}.parameter_spec", REQUIRED))
        if kind is not None and kind != ParameterType.DOUBLE:
            out += _check_condition(param, kind, child, where)
    return out


def _check_parameters(spec: StudySpec) -> list[FieldViolation]:
    if not spec.parameters:
        return [
            FieldViolation("study_spec.parameters", f"{REQUIRED} A tuning job needs at least one parameter.")
        ]
    out: list[FieldViolation] = []
    seen: dict[str, str] = {}
    for node in walk_parameters(spec.parameters):
        param, path = node.spec, node.path
        out += _check_id(
            param.parameter_id,
            "parameter_id",
            path,
            seen,
            ": parameter IDs must be unique across the study, conditional parameters included",
        )
        kind = param.parameter_type
        if kind is None:
            out.append(
                FieldViolation(
                    path,
                    "one of double_value_spec, integer_value_spec, categorical_value_spec or "
                    "discrete_value_spec is required",
                )
            )
        else:
            out += _VALUE_CHECKS[kind](param, path)
            if spec.algorithm == Algorithm.GRID_SEARCH and kind == ParameterType.DOUBLE:
                out.append(
                    FieldViolation(
                        f"{path}.double_value_spec",
                        "GRID_SEARCH needs every parameter to be INTEGER, CATEGORICAL or DISCRETE; "
                        f"{param.parameter_id!r} is DOUBLE",
                    )
                )
        out += _check_conditionals(param, kind, path)
    return out


# ---------------------------------------------------------------- stopping and Vizier-only fields
def _check_convex(spec: ConvexAutomatedStoppingSpec, parameter_ids: set[str]) -> list[FieldViolation]:
    path = "study_spec.convex_automated_stopping_spec"
    out: list[FieldViolation] = []
    for name in ("max_step_count", "min_step_count", "min_measurement_count"):
        if getattr(spec, name) < 0:
            out.append(FieldViolation(f"{path}.{name}", "must not be negative"))
    if 0 < spec.max_step_count < spec.min_step_count:
        out.append(
            FieldViolation(
                f"{path}.min_step_count",
                f"min_step_count ({spec.min_step_count}) must not be greater than max_step_count "
                f"({spec.max_step_count})",
            )
        )
    name = spec.learning_rate_parameter_name
    if name and name not in parameter_ids:
        out.append(
            FieldViolation(
                f"{path}.learning_rate_parameter_name",
                f"{name!r} is not a parameter of the study; leave it empty if the learning rate is not tuned",
            )
        )
    return out


def _check_study_options(spec: StudySpec) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    if spec.observation_noise != ObservationNoise.OBSERVATION_NOISE_UNSPECIFIED:
        out.append(
            FieldViolation(
                "study_spec.observation_noise",
                "observation_noise is supported only by Vertex AI Vizier, not by hyperparameter tuning jobs; "
                "leave it unset",
            )
        )
    if spec.convex_stop_config is not None:
        out.append(
            FieldViolation(
                "study_spec.convex_stop_config",
                "convex_stop_config is deprecated (v1beta1 only) and not supported: use "
                "convex_automated_stopping_spec",
            )
        )
    if spec.transfer_learning_config is not None:
        out.append(
            FieldViolation(
                "study_spec.transfer_learning_config",
                "transfer_learning_config is supported only by Vertex AI Vizier, not by hyperparameter "
                "tuning jobs; leave it unset",
            )
        )
    if spec.study_stopping_config is not None:
        out.append(
            FieldViolation(
                "study_spec.study_stopping_config",
                "study_stopping_config (Vertex AI Vizier's study stopping conditions) is not supported by "
                "hyperparameter tuning jobs: bound the study with max_trial_count, and stop unpromising "
                "trials early with median_automated_stopping_spec, decay_curve_stopping_spec or "
                "convex_automated_stopping_spec",
            )
        )
    if spec.convex_automated_stopping_spec is not None:
        ids = {node.spec.parameter_id for node in walk_parameters(spec.parameters)}
        out += _check_convex(spec.convex_automated_stopping_spec, ids)
    return out


def _check_study(spec: StudySpec) -> list[FieldViolation]:
    return _check_metrics(spec) + _check_parameters(spec) + _check_study_options(spec)


# ---------------------------------------------------------------- the job
def _check_counts(job: HyperparameterTuningJob) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    max_ok = False
    if job.max_trial_count <= 0:
        out.append(
            FieldViolation(
                "max_trial_count", f"{REQUIRED} max_trial_count must be positive, got {job.max_trial_count}"
            )
        )
    elif job.max_trial_count > MAX_TRIAL_COUNT:
        out.append(
            FieldViolation(
                "max_trial_count",
                f"max_trial_count must be at most {MAX_TRIAL_COUNT}, got {job.max_trial_count}",
            )
        )
    else:
        max_ok = True
    if job.parallel_trial_count <= 0:
        out.append(
            FieldViolation(
                "parallel_trial_count",
                f"{REQUIRED} parallel_trial_count must be positive, got {job.parallel_trial_count}",
            )
        )
    elif max_ok and job.parallel_trial_count > job.max_trial_count:
        out.append(
            FieldViolation(
                "parallel_trial_count",
                f"parallel_trial_count ({job.parallel_trial_count}) must not be greater than max_trial_count "
                f"({job.max_trial_count})",
            )
        )
    if job.max_failed_trial_count < 0:
        out.append(
            FieldViolation(
                "max_failed_trial_count",
                f"must not be negative (0 lets the service decide), got {job.max_failed_trial_count}",
            )
        )
    return out


def validate_tuning_job(
    job: HyperparameterTuningJob, persistent_resources: PersistentResourceCheck | None = None
) -> list[FieldViolation]:
    """Every violation of the HyperparameterTuningJob rules, in field order; empty when the job is valid.

    `persistent_resources` checks `trial_job_spec.persistent_resource_id` as for custom jobs."""
    out = check_display_name(job.display_name)
    if job.study_spec is None:
        out.append(FieldViolation("study_spec", REQUIRED))
    else:
        out += _check_study(job.study_spec)
    out += _check_counts(job)
    if job.trial_job_spec is None:
        out.append(FieldViolation("trial_job_spec", REQUIRED))
    else:
        out += check_job_spec(job.trial_job_spec, "trial_job_spec", persistent_resources)
    out += check_job_labels(job.labels)
    out += check_encryption_spec(job.encryption_spec)
    return out


__all__ = ["MAX_DISCRETE_VALUES", "MAX_TRIAL_COUNT", "validate_tuning_job"]
