"""How the custom-jobs commands show things: jobs as rich summaries and tables (human), JSON or YAML
on stdout, log lines, and status lines on stderr."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from enum import StrEnum
from typing import Any

import yaml

from trainworks.submit.capacity import LEDGER_LABEL, CapacityLedger


class OutputFormat(StrEnum):
    human = "human"
    json = "json"
    yaml = "yaml"


def print_status(message: str) -> None:
    """Progress and hints go to stderr, like gcloud, so stdout stays the command's result."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def print_data(data: Any, fmt: OutputFormat) -> None:
    """A result for scripts: YAML for `--format=yaml`, indented JSON otherwise."""
    if fmt == OutputFormat.yaml:
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    sys.stdout.flush()


def print_log_entry(entry: dict[str, Any], fmt: OutputFormat) -> None:
    """One log entry: `[task] text` for humans, a JSON line for json and yaml."""
    out = sys.stdout
    if fmt == OutputFormat.human:
        out.write(f"[{entry.get('task', '')}] {entry.get('text', '')}\n")
    else:
        out.write(json.dumps(entry) + "\n")
    out.flush()


# ====================================================================== human output (rich)
def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Not a terminal: $COLUMNS wide, else 200, so piped output is not wrapped at 80 columns.
    width = None if stream.isatty() else int(os.environ.get("COLUMNS", "0") or 0) or 200
    return Console(file=stream, width=width, highlight=False, soft_wrap=False)


def _job_id(name: str) -> str:
    return name.rsplit("/", 1)[-1]


_STATE_STYLE = {
    "JOB_STATE_SUCCEEDED": "green",
    "JOB_STATE_FAILED": "red",
    "JOB_STATE_CANCELLED": "yellow",
    "JOB_STATE_CANCELLING": "yellow",
    "JOB_STATE_RUNNING": "cyan",
}


def _styled_state(state: str) -> str:
    style = _STATE_STYLE.get(state)
    return f"[{style}]{state}[/{style}]" if style else state


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _run_time(job: dict[str, Any]) -> str:
    """startTime to endTime as `1h02m03s` / `4m05s` / `6.0s`; empty until the job has ended."""
    start = _parse_time(job.get("startTime"))
    if start is None:
        return ""
    end = _parse_time(job.get("endTime"))
    if end is None:
        return ""
    seconds = max((end - start).total_seconds(), 0.0)
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{seconds:.1f}s"


def _describe_pool(index: int, pool: dict[str, Any]) -> str:
    """A worker pool as `pool N: replicas x machine` plus indented lines for its image or package."""
    if not pool:
        return f"pool {index}: (skipped)"
    machine = pool.get("machineSpec") or {}
    text = f"pool {index}: {pool.get('replicaCount', '0')} x {machine.get('machineType', '?')}"
    if machine.get("acceleratorType"):
        text += f" + {machine.get('acceleratorCount', 1)} x {machine['acceleratorType']}"
    container, package = pool.get("containerSpec"), pool.get("pythonPackageSpec")
    if container:
        text += f"\n      image    {container.get('imageUri', '')}"
        if container.get("command"):
            text += f"\n      command  {json.dumps(container['command'])}"
        if container.get("args"):
            text += f"\n      args     {json.dumps(container['args'])}"
    elif package:
        text += f"\n      executor {package.get('executorImageUri', '')}"
        text += f"\n      module   {package.get('pythonModule', '')}"
        if package.get("packageUris"):
            text += f"\n      packages {', '.join(package['packageUris'])}"
        if package.get("args"):
            text += f"\n      args     {json.dumps(package['args'])}"
    return text


def _status_rows(status: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Scheduling and restarts, from the server's status extension."""
    from rich.markup import escape

    if not status:
        return []
    rows: list[tuple[str, str]] = []
    if status.get("waitingReason"):
        rows.append(("Waiting", f"[yellow]{escape(status['waitingReason'])}[/yellow]"))
    if status.get("zone"):
        rows.append(("Zone", escape(status["zone"])))
    restarts = status.get("restarts") or []
    if restarts:
        rows.append(("Attempt", f"{status.get('attempt', 0) + 1} ({len(restarts)} restart(s))"))
        for entry in restarts:
            rows.append(
                (
                    "  restart",
                    escape(f"{entry.get('time', '')} {entry.get('kind', '')}: {entry.get('reason', '')}"),
                )
            )
    cost = status.get("cost")
    if cost:
        hours = float(cost.get("machineHours", 0))
        text = f"${float(cost.get('costUsd', 0)):,.4f} for {hours:,.4f} machine-hours"
        text += " (SPOT" if cost.get("spot") else " (on-demand"
        if cost.get("spot"):
            text += f"; on-demand ${float(cost.get('onDemandEquivalentUsd', 0)):,.4f}"
        text += ", so far)" if cost.get("running") else ")"
        if cost.get("billedTo"):
            text += f"; billed to {cost['billedTo']}"
        rows.append(("Cost", escape(text)))
        for name, used in sorted((cost.get("acceleratorHours") or {}).items()):
            rows.append(("  accelerators", escape(f"{float(used):,.4f} h of {name}")))
    return rows


def _job_rows(
    job: dict[str, Any], after_created: list[tuple[str, str]] | None = None
) -> list[tuple[str, str]]:
    """The `Label: value` rows every kind of job starts with: name, state, times, error, labels."""
    from rich.markup import escape

    rows: list[tuple[str, str]] = [
        ("Name", escape(job.get("name", ""))),
        ("Display name", escape(job.get("displayName", ""))),
        ("State", _styled_state(job.get("state", "JOB_STATE_UNSPECIFIED"))),
        ("Created", job.get("createTime", "")),
    ]
    rows += after_created or []
    for label, key in (("Started", "startTime"), ("Ended", "endTime"), ("Updated", "updateTime")):
        if job.get(key):
            rows.append((label, job[key]))
    if _run_time(job):
        rows.append(("Run time", _run_time(job)))
    error = job.get("error")
    if error:
        rows.append(
            ("Error", f"[red]code {error.get('code', 0)}: {escape(str(error.get('message', '')))}[/red]")
        )
    if job.get("labels"):
        rows.append(("Labels", escape(", ".join(f"{k}={v}" for k, v in sorted(job["labels"].items())))))
    capacity = (job.get("labels") or {}).get(LEDGER_LABEL)
    if capacity:
        steps = [f"{region} {outcome}" for region, outcome in CapacityLedger.parse_label(capacity)]
        earlier = ["(earlier attempts)"] if capacity.startswith("more__") else []
        rows.append(("Capacity", escape(" -> ".join(earlier + steps))))
    return rows


def print_job_summary(job: dict[str, Any], status: dict[str, Any] | None = None) -> None:
    """One job as aligned `Label: value` lines, then its worker pools."""
    from rich.markup import escape

    console = _console()
    rows = _job_rows(job, _status_rows(status))
    spec = job.get("jobSpec") or {}
    timeout = (spec.get("scheduling") or {}).get("timeout")
    if timeout:
        rows.append(("Timeout", timeout))
    output_dir = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if output_dir:
        rows.append(("Output dir", escape(output_dir)))
    for label, key in (("Service account", "serviceAccount"), ("Network", "network")):
        if spec.get(key):
            rows.append((label, escape(spec[key])))
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        console.print(f"[bold]{label + ':':<{width}}[/bold]{value}", soft_wrap=True)
    pools = spec.get("workerPoolSpecs") or []
    if pools:
        console.print("[bold]Worker pools:[/bold]")
        for i, pool in enumerate(pools):
            console.print("  " + escape(_describe_pool(i, pool)), soft_wrap=True)


def print_job_table(jobs: list[dict[str, Any]]) -> None:
    """Jobs as a table (ID, display name, state, create time, run time), like `gcloud ... list`."""
    from rich.markup import escape
    from rich.table import Table

    console = _console()
    if not jobs:
        console.print("Listed 0 items.")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("CUSTOM_JOB_ID", no_wrap=True)
    table.add_column("DISPLAY_NAME", overflow="fold")
    table.add_column("STATE", no_wrap=True)
    table.add_column("CREATE_TIME", no_wrap=True)
    table.add_column("RUN_TIME", no_wrap=True)
    for job in jobs:
        table.add_row(
            _job_id(job.get("name", "")),
            escape(job.get("displayName", "")),
            _styled_state(job.get("state", "")),
            job.get("createTime", ""),
            _run_time(job),
        )
    console.print(table)


__all__ = [
    "OutputFormat",
    "print_data",
    "print_job_summary",
    "print_job_table",
    "print_log_entry",
    "print_status",
]


# ====================================================================== persistent resources (human output)
_RESOURCE_STATE_STYLE = {
    "RUNNING": "green",
    "ERROR": "red",
    "STOPPING": "yellow",
    "PROVISIONING": "cyan",
    "UPDATING": "cyan",
    "REBOOTING": "cyan",
}


def _styled_resource_state(state: str) -> str:
    style = _RESOURCE_STATE_STYLE.get(state)
    return f"[{style}]{state}[/{style}]" if style else state


def resource_pool_text(pool: dict[str, Any]) -> str:
    """A resource pool as `2 × n1-standard-4 (1 used)`, with `+ 1 × ACCELERATOR` when it has some."""
    machine = pool.get("machineSpec") or {}
    text = f"{pool.get('replicaCount', '?')} × {machine.get('machineType', '?')}"
    if machine.get("acceleratorType"):
        text += f" + {machine.get('acceleratorCount', 1)} × {machine['acceleratorType']}"
    return text + f" ({pool.get('usedReplicaCount', '0')} used)"


def _resource_pool_detail(pool: dict[str, Any]) -> str:
    """One line of `describe`: the pool's ID, machines, disk and autoscaling."""
    text = f"{pool.get('id', '?')}: {resource_pool_text(pool)}"
    disk = pool.get("diskSpec") or {}
    if disk:
        text += f"; disk {disk.get('bootDiskType', 'pd-ssd')} {disk.get('bootDiskSizeGb', 100)} GB"
    scaling = pool.get("autoscalingSpec") or {}
    if scaling:
        text += f"; autoscaling {scaling.get('minReplicaCount', '?')}..{scaling.get('maxReplicaCount', '?')}"
    return text


def print_persistent_resource_summary(resource: dict[str, Any]) -> None:
    """One persistent resource as aligned `Label: value` lines, then its resource pools."""
    from rich.markup import escape

    console = _console()
    rows: list[tuple[str, str]] = [
        ("Name", escape(resource.get("name", ""))),
        ("Display name", escape(resource.get("displayName", ""))),
        ("State", _styled_resource_state(resource.get("state", "STATE_UNSPECIFIED"))),
        ("Created", resource.get("createTime", "")),
    ]
    for label, key in (("Started", "startTime"), ("Updated", "updateTime")):
        if resource.get(key):
            rows.append((label, resource[key]))
    error = resource.get("error")
    if error:
        rows.append(
            ("Error", f"[red]code {error.get('code', 0)}: {escape(str(error.get('message', '')))}[/red]")
        )
    if resource.get("labels"):
        rows.append(("Labels", escape(", ".join(f"{k}={v}" for k, v in sorted(resource["labels"].items())))))
    if resource.get("network"):
        rows.append(("Network", escape(resource["network"])))
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        console.print(f"[bold]{label + ':':<{width}}[/bold]{value}", soft_wrap=True)
    pools = resource.get("resourcePools") or []
    if pools:
        console.print("[bold]Resource pools:[/bold]")
        for pool in pools:
            console.print("  " + escape(_resource_pool_detail(pool)), soft_wrap=True)


def print_persistent_resource_table(resources: list[dict[str, Any]]) -> None:
    """Persistent resources as a table (ID, display name, state, pools), like `gcloud ... list`."""
    from rich.markup import escape
    from rich.table import Table

    console = _console()
    if not resources:
        console.print("Listed 0 items.")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("PERSISTENT_RESOURCE_ID", no_wrap=True)
    table.add_column("DISPLAY_NAME", overflow="fold")
    table.add_column("STATE", no_wrap=True)
    table.add_column("RESOURCE_POOLS", overflow="fold")
    for resource in resources:
        table.add_row(
            _job_id(resource.get("name", "")),
            escape(resource.get("displayName", "")),
            _styled_resource_state(resource.get("state", "")),
            escape(", ".join(resource_pool_text(p) for p in resource.get("resourcePools") or [])),
        )
    console.print(table)


__all__ += [
    "print_persistent_resource_summary",
    "print_persistent_resource_table",
    "resource_pool_text",
]


# ================================================================== hyperparameter tuning jobs (human output)
_TRIAL_STATE_STYLE = {
    "SUCCEEDED": "green",
    "INFEASIBLE": "red",
    "STOPPING": "yellow",
    "ACTIVE": "cyan",
}

#: Trial states after which a trial never changes again (it counts as done).
DONE_TRIAL_STATES = frozenset({"SUCCEEDED", "INFEASIBLE"})


def _styled_trial_state(state: str) -> str:
    style = _TRIAL_STATE_STYLE.get(state)
    return f"[{style}]{state}[/{style}]" if style else state


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
    from rich.table import Table

    console = _console()
    trials = rank_trials(job)
    if not trials:
        console.print("No trials yet.")
        return
    metric_id, goal = study_metric(job)
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("TRIAL_ID", no_wrap=True)
    table.add_column("STATE", no_wrap=True)
    table.add_column("PARAMETERS", overflow="fold")
    table.add_column(escape(f"{metric_id or 'METRIC'} ({goal})"), no_wrap=True, justify="right")
    table.add_column("STEP", no_wrap=True, justify="right")
    table.add_column("CUSTOM_JOB_ID", no_wrap=True)
    table.add_column("INFEASIBLE_REASON", overflow="fold")
    for trial in trials:
        value = trial_metric_value(trial, metric_id)
        table.add_row(
            escape(str(trial.get("id", ""))),
            _styled_trial_state(str(trial.get("state", ""))),
            escape(trial_parameters_text(trial)),
            "" if value is None else _format_number(value),
            str((trial.get("finalMeasurement") or {}).get("stepCount", "")),
            _job_id(str(trial.get("customJob", ""))),
            escape(str(trial.get("infeasibleReason", ""))),
        )
    console.print(table)


def print_tuning_job_summary(job: dict[str, Any], trials: bool = True) -> None:
    """One tuning job as aligned `Label: value` lines (study, budget, best trial), then (with `trials`) its
    trials, best first."""
    from rich.markup import escape

    console = _console()
    rows = _job_rows(job)
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
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        console.print(f"[bold]{label + ':':<{width}}[/bold]{value}", soft_wrap=True)
    parameters = study.get("parameters") or []
    if parameters:
        console.print("[bold]Parameters:[/bold]")
        for spec in parameters:
            if isinstance(spec, dict):
                console.print("  " + escape(_parameter_spec_text(spec)), soft_wrap=True)
    if trials:
        console.print("[bold]Trials (best first):[/bold]")
        print_trial_table(job)


def print_tuning_job_table(jobs: list[dict[str, Any]]) -> None:
    """Tuning jobs as a table (ID, display name, state, trials done/max, best metric). The jobs need their
    `trials` (from Get) for the last two columns."""
    from rich.markup import escape
    from rich.table import Table

    console = _console()
    if not jobs:
        console.print("Listed 0 items.")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("HYPERPARAMETER_TUNING_JOB_ID", no_wrap=True)
    table.add_column("DISPLAY_NAME", overflow="fold")
    table.add_column("STATE", no_wrap=True)
    table.add_column("TRIALS", no_wrap=True, justify="right")
    table.add_column("BEST_METRIC", overflow="fold")
    for job in jobs:
        table.add_row(
            _job_id(job.get("name", "")),
            escape(job.get("displayName", "")),
            _styled_state(job.get("state", "")),
            trials_progress(job),
            escape(best_metric_text(job)),
        )
    console.print(table)


__all__ += [
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
