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
    styled,
)

_TRIAL_STATE_STYLE = {
    "SUCCEEDED": "green",
    "INFEASIBLE": "red",
    "STOPPING": "yellow",
    "ACTIVE": "cyan",
}

#: Trial states after which a trial never changes again (it counts as done).
DONE_TRIAL_STATES = frozenset({"SUCCEEDED", "INFEASIBLE"})


def study_metric(job: dict[str, Any]) -> tuple[str, str]:
    """The study's metric ID and goal (MAXIMIZE or MINIMIZE; MAXIMIZE when unspecified)."""
    metrics = (job.get("studySpec") or {}).get("metrics") or [{}]
    metric = metrics[0] if isinstance(metrics[0], dict) else {}
    goal = str(metric.get("goal") or "MAXIMIZE")
    return str(metric.get("metricId", "")), "MINIMIZE" if goal == "MINIMIZE" else "MAXIMIZE"


def _as_float(value: Any) -> float | None:
    """A proto double from JSON: a number, or a string holding one (also "NaN", "Infinity", "-Infinity")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def trial_metric_value(trial: dict[str, Any], metric_id: str) -> float | None:
    """The trial's final value of `metric_id` (the only metric when the IDs do not match); None if none."""
    metrics = (trial.get("finalMeasurement") or {}).get("metrics") or []
    for metric in metrics:
        if isinstance(metric, dict) and metric.get("metricId") == metric_id:
            return _as_float(metric.get("value"))
    if len(metrics) == 1 and isinstance(metrics[0], dict):
        return _as_float(metrics[0].get("value"))
    return None


def _trial_number(trial: dict[str, Any]) -> tuple[int, str]:
    text = str(trial.get("id", ""))
    return (int(text), text) if text.isdigit() else (2**63, text)


def rank_trials(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The job's trials, best first by the study's metric goal (MAXIMIZE: highest value first).

    Then trials whose value is NaN, then those without a final measurement yet (by ID), and INFEASIBLE
    trials last (by ID). Equal values keep the lower trial ID first.
    """
    metric_id, goal = study_metric(job)
    sign = 1.0 if goal == "MINIMIZE" else -1.0

    def key(trial: dict[str, Any]) -> tuple[int, float, tuple[int, str]]:
        number = _trial_number(trial)
        if trial.get("state") == "INFEASIBLE":
            return (3, 0.0, number)
        value = trial_metric_value(trial, metric_id)
        if value is None:
            return (2, 0.0, number)
        if value != value:  # NaN
            return (1, 0.0, number)
        return (0, sign * value, number)

    trials = [t for t in job.get("trials") or [] if isinstance(t, dict)]
    return sorted(trials, key=key)


def best_trial(job: dict[str, Any]) -> dict[str, Any] | None:
    """The trial with the best final metric value, or None while no trial has one."""
    metric_id, _ = study_metric(job)
    ranked = rank_trials(job)
    if not ranked or ranked[0].get("state") == "INFEASIBLE":
        return None
    value = trial_metric_value(ranked[0], metric_id)
    return ranked[0] if value is not None and value == value else None


def _format_number(value: float) -> str:
    return f"{value + 0.0:.6g}"  # + 0.0: -0.0 shows as 0


def _format_parameter_value(value: Any) -> str:
    if isinstance(value, float):
        return _format_number(value)
    return str(value)


def trial_parameters_text(trial: dict[str, Any]) -> str:
    """A trial's parameters as `x=0.5, kind=plain`."""
    return ", ".join(
        f"{p.get('parameterId', '?')}={_format_parameter_value(p.get('value'))}"
        for p in trial.get("parameters") or []
        if isinstance(p, dict)
    )


def trials_progress(job: dict[str, Any]) -> str:
    """`done/max`: trials that have ended (SUCCEEDED or INFEASIBLE) out of maxTrialCount."""
    done = sum(
        1 for t in job.get("trials") or [] if isinstance(t, dict) and t.get("state") in DONE_TRIAL_STATES
    )
    return f"{done}/{job.get('maxTrialCount', '?')}"


def best_metric_text(job: dict[str, Any]) -> str:
    """`score=0.97 (trial 3)` for the best trial; empty while no trial has a final value."""
    trial = best_trial(job)
    if trial is None:
        return ""
    metric_id, _ = study_metric(job)
    value = trial_metric_value(trial, metric_id)
    assert value is not None
    return f"{metric_id}={_format_number(value)} (trial {trial.get('id', '?')})"


def _parameter_spec_text(spec: dict[str, Any]) -> str:
    """A ParameterSpec as `x: DOUBLE [-3, 3] UNIT_LINEAR_SCALE`."""
    text = f"{spec.get('parameterId', '?')}: "
    if "doubleValueSpec" in spec:
        value = spec["doubleValueSpec"] or {}  # canonical JSON leaves out zero bounds
        text += f"DOUBLE [{value.get('minValue', 0)}, {value.get('maxValue', 0)}]"
    elif "integerValueSpec" in spec:
        value = spec["integerValueSpec"] or {}
        text += f"INTEGER [{value.get('minValue', 0)}, {value.get('maxValue', 0)}]"
    elif "categoricalValueSpec" in spec:
        values = (spec["categoricalValueSpec"] or {}).get("values") or []
        text += "CATEGORICAL {" + ", ".join(str(v) for v in values) + "}"
    elif "discreteValueSpec" in spec:
        values = (spec["discreteValueSpec"] or {}).get("values") or []
        text += "DISCRETE {" + ", ".join(str(v) for v in values) + "}"
    else:
        text += "?"
    if spec.get("scaleType"):
        text += f" {spec['scaleType']}"
    children = spec.get("conditionalParameterSpecs") or []
    if children:
        text += f" (+{len(children)} conditional)"
    return text


def print_trial_table(job: dict[str, Any]) -> None:
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
        rows.append(
            (
                escape(str(trial.get("id", ""))),
                styled(str(trial.get("state", "")), _TRIAL_STATE_STYLE),
                escape(trial_parameters_text(trial)),
                "" if value is None else _format_number(value),
                str((trial.get("finalMeasurement") or {}).get("stepCount", "")),
                resource_id(str(trial.get("customJob", ""))),
                escape(str(trial.get("infeasibleReason", ""))),
            )
        )
    print_table(columns, rows, empty="No trials yet.")


def print_tuning_job_summary(job: dict[str, Any], trials: bool = True) -> None:
    """One tuning job as aligned `Label: value` lines (study, budget, best trial), then (with `trials`) its
    trials, best first."""
    from rich.markup import escape

    out = console()
    rows = job_rows(job)
    study = job.get("studySpec") or {}
    metric_id, goal = study_metric(job)
    rows.append(("Metric", escape(f"{metric_id} ({goal})")))
    rows.append(("Algorithm", escape(str(study.get("algorithm") or "ALGORITHM_UNSPECIFIED"))))
    if study.get("measurementSelectionType"):
        rows.append(("Measurement", escape(str(study["measurementSelectionType"]))))
    for key in ("medianAutomatedStoppingSpec", "decayCurveStoppingSpec", "convexAutomatedStoppingSpec"):
        if key in study:
            rows.append(("Early stopping", key))
    budget = f"{trials_progress(job)} done, {job.get('parallelTrialCount', '?')} in parallel"
    if job.get("maxFailedTrialCount"):
        budget += f", at most {job['maxFailedTrialCount']} infeasible"
    rows.append(("Trials", budget))
    best = best_trial(job)
    if best is not None:
        text = best_metric_text(job)
        if trial_parameters_text(best):
            text += f": {trial_parameters_text(best)}"
        rows.append(("Best trial", f"[green]{escape(text)}[/green]"))
    print_rows(rows, out)
    parameters = [spec for spec in study.get("parameters") or [] if isinstance(spec, dict)]
    if study.get("parameters"):
        print_lines("Parameters", [_parameter_spec_text(spec) for spec in parameters], out)
    if trials:
        out.print("[bold]Trials (best first):[/bold]")
        print_trial_table(job)


def print_tuning_job_table(jobs: list[dict[str, Any]]) -> None:
    """Tuning jobs as a table (ID, display name, state, trials done/max, best metric). The jobs need their
    `trials` (from Get) for the last two columns."""
    from rich.markup import escape

    more = [
        (Column("TRIALS", right=True), trials_progress),
        (Column("BEST_METRIC", fold=True), lambda job: escape(best_metric_text(job))),
    ]
    print_resource_table(jobs, "HYPERPARAMETER_TUNING_JOB_ID", JOB_STATE_STYLE, more)


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
