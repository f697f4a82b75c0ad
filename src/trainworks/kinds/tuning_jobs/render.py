"""How the CLI shows hyperparameter tuning jobs: their trials ranked by the study's metric, summaries and
tables for humans."""

from __future__ import annotations

from typing import Any

from trainworks.jobs.render import JOB_STATE_STYLE, job_rows
from trainworks.kernel.render import (
    Column,
    console,
    print_lines,
    print_resource_table,
    print_rows,
    print_table,
    resource_id,
    state_name,
    styled,
)
from trainworks.kinds.tuning_jobs.wire import (
    DoubleValueSpec,
    GoalType,
    HyperparameterTuningJob,
    MeasurementMetric,
    ParameterSpec,
    StudySpec,
    Trial,
    TrialState,
)

_TRIAL_STATE_STYLE = {
    "SUCCEEDED": "green",
    "INFEASIBLE": "red",
    "STOPPING": "yellow",
    "ACTIVE": "cyan",
}

#: Trial states after which a trial never changes again (it counts as done).
DONE_TRIAL_STATES = frozenset({TrialState.SUCCEEDED, TrialState.INFEASIBLE})
#: The StudySpec fields of early stopping, as `describe` names them.
_STOPPING_FIELDS = (
    "median_automated_stopping_spec",
    "decay_curve_stopping_spec",
    "convex_automated_stopping_spec",
)


def study_metric(job: HyperparameterTuningJob) -> tuple[str, str]:
    """The study's metric ID and goal (MAXIMIZE or MINIMIZE; MAXIMIZE when unspecified)."""
    metrics = job.study_spec.metrics if job.study_spec is not None else []
    if not metrics:
        return "", "MAXIMIZE"
    return metrics[0].metric_id, "MINIMIZE" if metrics[0].goal == GoalType.MINIMIZE else "MAXIMIZE"


def _value(metric: MeasurementMetric) -> float | None:
    # A metric without a value on the wire (proto3 leaves 0 out) has always read as none here.
    return metric.value if "value" in metric.model_fields_set else None


def trial_metric_value(trial: Trial, metric_id: str) -> float | None:
    """The trial's final value of `metric_id` (the only metric when the IDs do not match); None if none."""
    metrics = trial.final_measurement.metrics if trial.final_measurement is not None else []
    for metric in metrics:
        if metric.metric_id == metric_id:
            return _value(metric)
    if len(metrics) == 1:
        return _value(metrics[0])
    return None


def _trial_number(trial: Trial) -> tuple[int, str]:
    return (int(trial.id), trial.id) if trial.id.isdigit() else (2**63, trial.id)


def rank_trials(job: HyperparameterTuningJob) -> list[Trial]:
    """The job's trials, best first by the study's metric goal (MAXIMIZE: highest value first).

    Then trials whose value is NaN, then those without a final measurement yet (by ID), and INFEASIBLE
    trials last (by ID). Equal values keep the lower trial ID first.
    """
    metric_id, goal = study_metric(job)
    sign = 1.0 if goal == "MINIMIZE" else -1.0

    def key(trial: Trial) -> tuple[int, float, tuple[int, str]]:
        number = _trial_number(trial)
        if trial.state == TrialState.INFEASIBLE:
            return (3, 0.0, number)
        value = trial_metric_value(trial, metric_id)
        if value is None:
            return (2, 0.0, number)
        if value != value:  # NaN
            return (1, 0.0, number)
        return (0, sign * value, number)

    return sorted(job.trials, key=key)


def best_trial(job: HyperparameterTuningJob) -> Trial | None:
    """The trial with the best final metric value, or None while no trial has one."""
    metric_id, _ = study_metric(job)
    ranked = rank_trials(job)
    if not ranked or ranked[0].state == TrialState.INFEASIBLE:
        return None
    value = trial_metric_value(ranked[0], metric_id)
    return ranked[0] if value is not None and value == value else None


def _format_number(value: float) -> str:
    return f"{value + 0.0:.6g}"  # + 0.0: -0.0 shows as 0


def _format_parameter_value(value: Any) -> str:
    if isinstance(value, float):
        return _format_number(value)
    return str(value)


def trial_parameters_text(trial: Trial) -> str:
    """A trial's parameters as `x=0.5, kind=plain`."""
    return ", ".join(f"{p.parameter_id or '?'}={_format_parameter_value(p.value)}" for p in trial.parameters)


def trials_progress(job: HyperparameterTuningJob) -> str:
    """`done/max`: trials that have ended (SUCCEEDED or INFEASIBLE) out of maxTrialCount."""
    done = sum(1 for trial in job.trials if trial.state in DONE_TRIAL_STATES)
    return f"{done}/{job.max_trial_count or '?'}"


def best_metric_text(job: HyperparameterTuningJob) -> str:
    """`score=0.97 (trial 3)` for the best trial; empty while no trial has a final value."""
    trial = best_trial(job)
    if trial is None:
        return ""
    metric_id, _ = study_metric(job)
    value = trial_metric_value(trial, metric_id)
    assert value is not None
    return f"{metric_id}={_format_number(value)} (trial {trial.id or '?'})"


def _bound(spec: DoubleValueSpec, field: str) -> float:
    """A bound as the wire has it; one it leaves out (proto3 leaves 0 out) shows as 0."""
    return float(getattr(spec, field)) if field in spec.model_fields_set else 0


def _parameter_spec_text(spec: ParameterSpec) -> str:
    """A ParameterSpec as `x: DOUBLE [-3, 3] UNIT_LINEAR_SCALE`."""
    text = f"{spec.parameter_id or '?'}: "
    if spec.double_value_spec is not None:
        bounds = spec.double_value_spec
        text += f"DOUBLE [{_bound(bounds, 'min_value')}, {_bound(bounds, 'max_value')}]"
    elif spec.integer_value_spec is not None:
        integers = spec.integer_value_spec
        text += f"INTEGER [{integers.min_value}, {integers.max_value}]"
    elif spec.categorical_value_spec is not None:
        text += "CATEGORICAL {" + ", ".join(spec.categorical_value_spec.values) + "}"
    elif spec.discrete_value_spec is not None:
        text += "DISCRETE {" + ", ".join(str(v) for v in spec.discrete_value_spec.values) + "}"
    else:
        text += "?"
    if spec.scale_type:
        text += f" {spec.scale_type.name}"
    if spec.conditional_parameter_specs:
        text += f" (+{len(spec.conditional_parameter_specs)} conditional)"
    return text


def print_trial_table(job: HyperparameterTuningJob) -> None:
    """The job's trials, best first: ID, state, parameters, final metric, step, custom job ID and, for
    INFEASIBLE trials (listed last), the reason."""
    from rich.markup import escape

    trials = rank_trials(job)
    metric_id, goal = study_metric(job)
    columns = [
        Column("TRIAL_ID"),
        Column("STATE"),
        Column("PARAMETERS", fold=True),
        Column(escape(f"{metric_id or 'METRIC'} ({goal})"), right=True),
        Column("STEP", right=True),
        Column("CUSTOM_JOB_ID"),
        Column("INFEASIBLE_REASON", fold=True),
    ]
    rows = []
    for trial in trials:
        value = trial_metric_value(trial, metric_id)
        final = trial.final_measurement
        rows.append(
            (
                escape(trial.id),
                styled(state_name(trial), _TRIAL_STATE_STYLE),
                escape(trial_parameters_text(trial)),
                "" if value is None else _format_number(value),
                str(final.step_count or "") if final is not None else "",
                resource_id(trial.custom_job),
                escape(trial.infeasible_reason),
            )
        )
    print_table(columns, rows, empty="No trials yet.")


def _study_rows(study: StudySpec) -> list[tuple[str, str]]:
    from rich.markup import escape

    rows = [("Algorithm", escape(study.algorithm.name))]
    if study.measurement_selection_type:
        rows.append(("Measurement", escape(study.measurement_selection_type.name)))
    for field in _STOPPING_FIELDS:
        if getattr(study, field) is not None:
            rows.append(("Early stopping", StudySpec.model_fields[field].alias or field))
    return rows


def print_tuning_job_summary(job: HyperparameterTuningJob, trials: bool = True) -> None:
    """One tuning job as aligned `Label: value` lines (study, budget, best trial), then (with `trials`) its
    trials, best first."""
    from rich.markup import escape

    out = console()
    rows = job_rows(job)
    study = job.study_spec or StudySpec()
    metric_id, goal = study_metric(job)
    rows.append(("Metric", escape(f"{metric_id} ({goal})")))
    rows += _study_rows(study)
    budget = f"{trials_progress(job)} done, {job.parallel_trial_count or '?'} in parallel"
    if job.max_failed_trial_count:
        budget += f", at most {job.max_failed_trial_count} infeasible"
    rows.append(("Trials", budget))
    best = best_trial(job)
    if best is not None:
        text = best_metric_text(job)
        if trial_parameters_text(best):
            text += f": {trial_parameters_text(best)}"
        rows.append(("Best trial", f"[green]{escape(text)}[/green]"))
    print_rows(rows, out)
    if study.parameters:
        print_lines("Parameters", [_parameter_spec_text(spec) for spec in study.parameters], out)
    if trials:
        out.print("[bold]Trials (best first):[/bold]")
        print_trial_table(job)


def print_tuning_job_table(jobs: list[HyperparameterTuningJob]) -> None:
    """Tuning jobs as a table (ID, display name, state, trials done/max, best metric). The jobs need their
    `trials` (from Get) for the last two columns."""
    from rich.markup import escape

    more = [
        (Column("TRIALS", right=True), trials_progress),
        (Column("BEST_METRIC", fold=True), lambda job: escape(best_metric_text(job))),
    ]
    print_resource_table(jobs, "HYPERPARAMETER_TUNING_JOB_ID", JOB_STATE_STYLE, more, state_name)


__all__ = [
    "DONE_TRIAL_STATES",
    "best_metric_text",
    "best_trial",
    "print_trial_table",
    "print_tuning_job_summary",
    "print_tuning_job_table",
    "rank_trials",
    "study_metric",
    "trial_metric_value",
    "trial_parameters_text",
    "trials_progress",
]
