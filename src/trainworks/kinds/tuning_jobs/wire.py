"""Wire models of HyperparameterTuningJob, StudySpec and Trial (google.cloud.aiplatform.v1).

Field names and numbers follow `aiplatform_v1.HyperparameterTuningJob`, `aiplatform_v1.StudySpec`,
`aiplatform_v1.Trial` and `aiplatform_v1.Measurement`. Proto3 `optional` fields (the value specs'
`defaultValue`, `studyStoppingConfig`, `safetyConfig`, `desiredMinSafeTrialsFraction`,
`updateAllStoppedTrials`) default to `None`, so their presence is kept and a zero value is echoed.

A `oneof` with two members set is rejected when the body is parsed, as the proto JSON parser does. The two
v1beta1-only StudySpec fields (`convexStopConfig`, `transferLearningConfig`) are modelled so that a v1beta1
request parses, and the validation rules (kinds/tuning_jobs/validation.py) reject them with a clear message.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import model_validator

from trainworks.jobs.enums import JobState
from trainworks.kernel.status import Status
from trainworks.kernel.wire import (
    Bool,
    Double,
    Duration,
    Int32,
    Int64,
    OutputOnly,
    ProtoEnum,
    Timestamp,
    WireModel,
    check_oneof,
    enum_field,
)
from trainworks.kinds.custom_jobs.wire import CustomJobSpec, EncryptionSpec


# ---------------------------------------------------------------- enums
class Algorithm(ProtoEnum):
    """StudySpec.Algorithm. UNSPECIFIED is the service's default (Bayesian) search."""

    ALGORITHM_UNSPECIFIED = 0
    GRID_SEARCH = 2
    RANDOM_SEARCH = 3


class ObservationNoise(ProtoEnum):
    """StudySpec.ObservationNoise (Vertex AI Vizier only; not supported by tuning jobs)."""

    OBSERVATION_NOISE_UNSPECIFIED = 0
    LOW = 1
    HIGH = 2


class MeasurementSelectionType(ProtoEnum):
    """StudySpec.MeasurementSelectionType. UNSPECIFIED is treated as LAST_MEASUREMENT."""

    MEASUREMENT_SELECTION_TYPE_UNSPECIFIED = 0
    LAST_MEASUREMENT = 1
    BEST_MEASUREMENT = 2


class GoalType(ProtoEnum):
    """StudySpec.MetricSpec.GoalType."""

    GOAL_TYPE_UNSPECIFIED = 0
    MAXIMIZE = 1
    MINIMIZE = 2


class ScaleType(ProtoEnum):
    """StudySpec.ParameterSpec.ScaleType. The log scales need a strictly positive feasible space."""

    SCALE_TYPE_UNSPECIFIED = 0
    UNIT_LINEAR_SCALE = 1
    UNIT_LOG_SCALE = 2
    UNIT_REVERSE_LOG_SCALE = 3


class TrialState(ProtoEnum):
    """Trial.State. A trial that ends without a final measurement is INFEASIBLE."""

    STATE_UNSPECIFIED = 0
    REQUESTED = 1
    ACTIVE = 2
    STOPPING = 3
    SUCCEEDED = 4
    INFEASIBLE = 5


# Requested, running or being stopped: the trial has not ended.
LIVE_TRIAL_STATES = frozenset({TrialState.REQUESTED, TrialState.ACTIVE, TrialState.STOPPING})
FINISHED_TRIAL_STATES = frozenset({TrialState.SUCCEEDED, TrialState.INFEASIBLE})


def trial_state_name(value: int) -> str:
    """A stored trial state's wire name (STATE_UNSPECIFIED for a number this version does not know)."""
    try:
        return TrialState(value).name
    except ValueError:
        return TrialState.STATE_UNSPECIFIED.name


class ParameterType(enum.StrEnum):
    """Which value spec a ParameterSpec carries (the `parameter_value_spec` oneof)."""

    DOUBLE = "DOUBLE"
    INTEGER = "INTEGER"
    CATEGORICAL = "CATEGORICAL"
    DISCRETE = "DISCRETE"


# ---------------------------------------------------------------- MetricSpec
class SafetyMetricConfig(WireModel):
    safety_threshold: Double = 0.0
    desired_min_safe_trials_fraction: Double | None = None  # proto3 optional


class MetricSpec(WireModel):
    metric_id: str = ""
    goal: enum_field(GoalType) = GoalType.GOAL_TYPE_UNSPECIFIED  # type: ignore[valid-type]
    safety_config: SafetyMetricConfig | None = None  # proto3 optional


# ---------------------------------------------------------------- ParameterSpec
class DoubleValueSpec(WireModel):
    min_value: Double = 0.0
    max_value: Double = 0.0
    default_value: Double | None = None  # proto3 optional


class IntegerValueSpec(WireModel):
    min_value: Int64 = 0
    max_value: Int64 = 0
    default_value: Int64 | None = None  # proto3 optional


class CategoricalValueSpec(WireModel):
    values: list[str] = []
    default_value: str | None = None  # proto3 optional


class DiscreteValueSpec(WireModel):
    values: list[Double] = []
    # Need not be one of the values: Vertex "automatically rounds to the nearest feasible discrete point".
    default_value: Double | None = None  # proto3 optional

    def nearest(self, value: float) -> float:
        """The feasible value nearest to `value` (the lower one on a tie)."""
        return min(self.values, key=lambda v: (abs(v - value), v))


class DiscreteValueCondition(WireModel):
    values: list[Double] = []


class IntValueCondition(WireModel):
    values: list[Int64] = []


class CategoricalValueCondition(WireModel):
    values: list[str] = []


PARENT_VALUE_CONDITION_FIELDS = ("parent_discrete_values", "parent_int_values", "parent_categorical_values")


class ConditionalParameterSpec(WireModel):
    parent_discrete_values: DiscreteValueCondition | None = None
    parent_int_values: IntValueCondition | None = None
    parent_categorical_values: CategoricalValueCondition | None = None
    parameter_spec: ParameterSpec | None = None

    @model_validator(mode="after")
    def _single_condition(self) -> ConditionalParameterSpec:
        check_oneof(self, PARENT_VALUE_CONDITION_FIELDS, "parent_value_condition")
        return self

    @property
    def parent_values(self) -> list[Any] | None:
        """The parent values this child is active for, or None when no condition is set."""
        condition = self.parent_discrete_values or self.parent_int_values or self.parent_categorical_values
        return list(condition.values) if condition is not None else None

    @property
    def condition_type(self) -> ParameterType | None:
        """The parent type the condition is written for."""
        if self.parent_discrete_values is not None:
            return ParameterType.DISCRETE
        if self.parent_int_values is not None:
            return ParameterType.INTEGER
        if self.parent_categorical_values is not None:
            return ParameterType.CATEGORICAL
        return None


VALUE_SPEC_FIELDS = (
    "double_value_spec",
    "integer_value_spec",
    "categorical_value_spec",
    "discrete_value_spec",
)
_TYPE_OF_FIELD = {
    "double_value_spec": ParameterType.DOUBLE,
    "integer_value_spec": ParameterType.INTEGER,
    "categorical_value_spec": ParameterType.CATEGORICAL,
    "discrete_value_spec": ParameterType.DISCRETE,
}
VALUE_SPEC_FIELD = {kind: name for name, kind in _TYPE_OF_FIELD.items()}


class ParameterSpec(WireModel):
    double_value_spec: DoubleValueSpec | None = None
    integer_value_spec: IntegerValueSpec | None = None
    categorical_value_spec: CategoricalValueSpec | None = None
    discrete_value_spec: DiscreteValueSpec | None = None
    parameter_id: str = ""
    scale_type: enum_field(ScaleType) = ScaleType.SCALE_TYPE_UNSPECIFIED  # type: ignore[valid-type]
    conditional_parameter_specs: list[ConditionalParameterSpec] = []

    @model_validator(mode="after")
    def _single_value_spec(self) -> ParameterSpec:
        check_oneof(self, VALUE_SPEC_FIELDS, "parameter_value_spec")
        return self

    @property
    def parameter_type(self) -> ParameterType | None:
        """DOUBLE, INTEGER, CATEGORICAL or DISCRETE; None when no value spec is set."""
        for name in VALUE_SPEC_FIELDS:
            if getattr(self, name) is not None:
                return _TYPE_OF_FIELD[name]
        return None

    @property
    def value_spec(
        self,
    ) -> DoubleValueSpec | IntegerValueSpec | CategoricalValueSpec | DiscreteValueSpec | None:
        for name in VALUE_SPEC_FIELDS:
            spec = getattr(self, name)
            if spec is not None:
                return spec
        return None


ConditionalParameterSpec.model_rebuild()
ParameterSpec.model_rebuild()


# ---------------------------------------------------------------- automated stopping
class DecayCurveAutomatedStoppingSpec(WireModel):
    use_elapsed_duration: Bool = False


class MedianAutomatedStoppingSpec(WireModel):
    use_elapsed_duration: Bool = False


class ConvexAutomatedStoppingSpec(WireModel):
    max_step_count: Int64 = 0
    min_step_count: Int64 = 0
    min_measurement_count: Int64 = 0  # 0 (unset) means the default, 5
    learning_rate_parameter_name: str = ""
    use_elapsed_duration: Bool = False
    update_all_stopped_trials: Bool | None = None  # proto3 optional


class ConvexStopConfig(WireModel):
    """v1beta1 only, deprecated (StudySpec field 8); rejected by the validation rules."""

    max_num_steps: Int64 = 0
    min_num_steps: Int64 = 0
    autoregressive_order: Int64 = 0
    learning_rate_parameter_name: str = ""
    use_seconds: Bool = False


class TransferLearningConfig(WireModel):
    """v1beta1 only, Vertex AI Vizier only (StudySpec field 10); rejected by the validation rules."""

    disable_transfer_learning: Bool = False
    prior_study_names: list[str] = []


class StudyTimeConstraint(WireModel):
    max_duration: Duration | None = None
    end_time: Timestamp | None = None

    @model_validator(mode="after")
    def _single_constraint(self) -> StudyTimeConstraint:
        check_oneof(self, ("max_duration", "end_time"), "constraint")
        return self


class StudyStoppingConfig(WireModel):
    """Vizier-oriented stopping conditions of a whole study (wrapper types, so every field keeps presence)."""

    should_stop_asap: Bool | None = None
    minimum_runtime_constraint: StudyTimeConstraint | None = None
    maximum_runtime_constraint: StudyTimeConstraint | None = None
    min_num_trials: Int32 | None = None
    max_num_trials: Int32 | None = None
    max_num_trials_no_progress: Int32 | None = None
    max_duration_no_progress: Duration | None = None


AUTOMATED_STOPPING_FIELDS = (
    "decay_curve_stopping_spec",
    "median_automated_stopping_spec",
    "convex_automated_stopping_spec",
    "convex_stop_config",
)


class StudySpec(WireModel):
    decay_curve_stopping_spec: DecayCurveAutomatedStoppingSpec | None = None
    median_automated_stopping_spec: MedianAutomatedStoppingSpec | None = None
    convex_automated_stopping_spec: ConvexAutomatedStoppingSpec | None = None
    convex_stop_config: ConvexStopConfig | None = None  # v1beta1 only
    metrics: list[MetricSpec] = []
    parameters: list[ParameterSpec] = []
    algorithm: enum_field(Algorithm) = Algorithm.ALGORITHM_UNSPECIFIED  # type: ignore[valid-type]
    observation_noise: enum_field(ObservationNoise) = ObservationNoise.OBSERVATION_NOISE_UNSPECIFIED  # type: ignore[valid-type]
    measurement_selection_type: enum_field(MeasurementSelectionType) = (  # type: ignore[valid-type]
        MeasurementSelectionType.MEASUREMENT_SELECTION_TYPE_UNSPECIFIED
    )
    transfer_learning_config: TransferLearningConfig | None = None  # v1beta1 only
    study_stopping_config: StudyStoppingConfig | None = None  # proto3 optional

    @model_validator(mode="after")
    def _single_stopping_spec(self) -> StudySpec:
        check_oneof(self, AUTOMATED_STOPPING_FIELDS, "automated_stopping_spec")
        return self

    @property
    def automated_stopping_spec(
        self,
    ) -> DecayCurveAutomatedStoppingSpec | MedianAutomatedStoppingSpec | ConvexAutomatedStoppingSpec | None:
        """The member of the `automated_stopping_spec` oneof that is set (v1 members only)."""
        return (
            self.decay_curve_stopping_spec
            or self.median_automated_stopping_spec
            or self.convex_automated_stopping_spec
        )

    @property
    def selection(self) -> MeasurementSelectionType:
        """LAST_MEASUREMENT or BEST_MEASUREMENT (UNSPECIFIED is treated as LAST_MEASUREMENT)."""
        if self.measurement_selection_type == MeasurementSelectionType.BEST_MEASUREMENT:
            return MeasurementSelectionType.BEST_MEASUREMENT
        return MeasurementSelectionType.LAST_MEASUREMENT


@dataclass(frozen=True)
class ParameterNode:
    """One ParameterSpec of a study, top-level or conditional, with where it sits.

    `path` is its proto field path (`study_spec.parameters[0].conditional_parameter_specs[1].parameter_spec`);
    `parent` and `parent_values` are None for a top-level parameter."""

    spec: ParameterSpec
    path: str
    parent: ParameterSpec | None = None
    parent_values: tuple[Any, ...] | None = None
    depth: int = 0


def walk_parameters(
    parameters: Sequence[ParameterSpec], path: str = "study_spec.parameters"
) -> Iterator[ParameterNode]:
    """Every parameter of a study, depth first (each parent before its conditional children), iteratively."""
    stack: list[ParameterNode] = [
        ParameterNode(spec, f"{path}[{i}]") for i, spec in reversed(list(enumerate(parameters)))
    ]
    while stack:
        node = stack.pop()
        yield node
        children: list[ParameterNode] = []
        for j, child in enumerate(node.spec.conditional_parameter_specs):
            if child.parameter_spec is None:
                continue
            values = child.parent_values
            children.append(
                ParameterNode(
                    child.parameter_spec,
                    f"{node.path}.conditional_parameter_specs[{j}].parameter_spec",
                    node.spec,
                    tuple(values) if values is not None else None,
                    node.depth + 1,
                )
            )
        stack.extend(reversed(children))


# ---------------------------------------------------------------- Trial and Measurement
class MeasurementMetric(WireModel):
    """Measurement.Metric."""

    metric_id: str = ""
    value: Double = 0.0


class Measurement(WireModel):
    elapsed_duration: Duration | None = None
    step_count: Int64 = 0
    metrics: list[MeasurementMetric] = []

    def value_of(self, metric_id: str) -> float | None:
        for metric in self.metrics:
            if metric.metric_id == metric_id:
                return metric.value
        return None


class TrialParameter(WireModel):
    """Trial.Parameter: `value` is a google.protobuf.Value, a number for INTEGER, DOUBLE and DISCRETE
    parameters and a string for CATEGORICAL ones."""

    parameter_id: str = ""
    value: Any = None


class Trial(WireModel):
    name: str = ""
    id: str = ""
    state: enum_field(TrialState) = TrialState.STATE_UNSPECIFIED  # type: ignore[valid-type]
    parameters: list[TrialParameter] = []
    final_measurement: Measurement | None = None
    measurements: list[Measurement] = []
    start_time: Timestamp | None = None
    end_time: Timestamp | None = None
    client_id: str = ""
    infeasible_reason: str = ""
    custom_job: str = ""
    web_access_uris: dict[str, str] = {}


def _parameter_value(parameter_id: str, value: Any) -> float | int | str | bool:
    """A trial parameter value as a google.protobuf.Value can hold it (no NaN or infinity)."""
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"parameter {parameter_id!r}: {value!r} is not a number or a string") from None
    if not math.isfinite(number):
        raise ValueError(f"parameter {parameter_id!r}: a Value cannot hold {number}")
    if hasattr(value, "item"):  # numpy scalars
        item = value.item()
        if isinstance(item, int) and not isinstance(item, bool):
            return item
    return number


def _measurement_key(measurement: Measurement) -> tuple[int, timedelta]:
    return measurement.step_count, measurement.elapsed_duration or timedelta(0)


def trial_dict(
    trial_id: str,
    state: TrialState,
    parameters: Mapping[str, Any],
    *,
    final_measurement: Measurement | Mapping[str, Any] | None = None,
    measurements: Sequence[Measurement | Mapping[str, Any]] = (),
    start_time: datetime | None = None,
    end_time: datetime | None = None,
    custom_job: str = "",
    infeasible_reason: str = "",
    web_access_uris: Mapping[str, str] | None = None,
    name: str = "",
    client_id: str = "",
) -> dict[str, Any]:
    """One Trial as canonical proto3 JSON (what Get returns inside `trials`).

    `parameters` maps parameter IDs to values in the order they should appear (numbers for INTEGER, DOUBLE and
    DISCRETE parameters, strings for CATEGORICAL ones). Measurements may be models or wire dicts (camelCase or
    snake_case); they are sorted by (step_count, elapsed_duration), as the proto documents."""
    parsed = [m if isinstance(m, Measurement) else Measurement.model_validate(m) for m in measurements]
    final = (
        final_measurement
        if final_measurement is None or isinstance(final_measurement, Measurement)
        else Measurement.model_validate(final_measurement)
    )
    trial = Trial(
        name=name,
        id=trial_id,
        state=state,
        parameters=[
            TrialParameter(parameter_id=key, value=_parameter_value(key, value))
            for key, value in parameters.items()
        ],
        final_measurement=final,
        measurements=sorted(parsed, key=_measurement_key),
        start_time=start_time,
        end_time=end_time,
        client_id=client_id,
        infeasible_reason=infeasible_reason,
        custom_job=custom_job,
        web_access_uris=dict(web_access_uris or {}),
    )
    return trial.to_wire()


# ---------------------------------------------------------------- HyperparameterTuningJob
class HyperparameterTuningJob(WireModel):
    name: OutputOnly[str] = ""
    display_name: str = ""
    study_spec: StudySpec | None = None
    max_trial_count: Int32 = 0
    parallel_trial_count: Int32 = 0
    max_failed_trial_count: Int32 = 0  # 0: the service decides
    trial_job_spec: CustomJobSpec | None = None
    trials: OutputOnly[list[Trial]] = []
    state: OutputOnly[enum_field(JobState)] = JobState.JOB_STATE_UNSPECIFIED  # type: ignore[valid-type]
    create_time: OutputOnly[Timestamp | None] = None
    start_time: OutputOnly[Timestamp | None] = None
    end_time: OutputOnly[Timestamp | None] = None
    update_time: OutputOnly[Timestamp | None] = None
    error: OutputOnly[Status | None] = None
    labels: dict[str, str] = {}
    encryption_spec: EncryptionSpec | None = None
    satisfies_pzs: OutputOnly[Bool] = False
    satisfies_pzi: OutputOnly[Bool] = False


__all__ = [
    "AUTOMATED_STOPPING_FIELDS",
    "Algorithm",
    "CategoricalValueCondition",
    "CategoricalValueSpec",
    "ConditionalParameterSpec",
    "ConvexAutomatedStoppingSpec",
    "ConvexStopConfig",
    "DecayCurveAutomatedStoppingSpec",
    "DiscreteValueCondition",
    "DiscreteValueSpec",
    "DoubleValueSpec",
    "GoalType",
    "HyperparameterTuningJob",
    "IntValueCondition",
    "IntegerValueSpec",
    "Measurement",
    "MeasurementMetric",
    "MeasurementSelectionType",
    "MedianAutomatedStoppingSpec",
    "MetricSpec",
    "ObservationNoise",
    "PARENT_VALUE_CONDITION_FIELDS",
    "ParameterNode",
    "ParameterSpec",
    "ParameterType",
    "SafetyMetricConfig",
    "ScaleType",
    "StudySpec",
    "StudyStoppingConfig",
    "StudyTimeConstraint",
    "TransferLearningConfig",
    "Trial",
    "TrialParameter",
    "FINISHED_TRIAL_STATES",
    "LIVE_TRIAL_STATES",
    "TrialState",
    "VALUE_SPEC_FIELDS",
    "VALUE_SPEC_FIELD",
    "trial_dict",
    "trial_state_name",
    "walk_parameters",
]
