"""The CustomJob that runs one trial, built from the tuning job's trialJobSpec. Pure."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

TUNING_JOB_LABEL = "trainworks-tuning-job"
TRIAL_LABEL = "trainworks-trial"
METRIC_FILE = Path("hypertune") / "output.metrics"  # under each replica's run folder


def trial_job_body(
    display_name: str, trial_job_spec: dict[str, Any], tuning_job_id: int, trial_id: int, args: list[str]
) -> dict[str, Any]:
    """trialJobSpec with the trial's `--name=value` args appended to every pool's args and the base output
    directory moved to `<base>/<trial_id>/`, as Vertex does for the CustomJob backing a trial."""
    spec = copy.deepcopy(trial_job_spec)
    for pool in spec.get("workerPoolSpecs", []):
        task = pool.get("containerSpec") or pool.get("pythonPackageSpec")
        if task is not None:
            task["args"] = [*task.get("args", []), *args]
    base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if base:
        spec["baseOutputDirectory"]["outputUriPrefix"] = f"{base.rstrip('/')}/{trial_id}/"
    return {
        "displayName": f"{display_name[:100]}-trial-{trial_id}",
        "jobSpec": spec,
        "labels": {TUNING_JOB_LABEL: str(tuning_job_id), TRIAL_LABEL: str(trial_id)},
    }


def trial_of(labels: dict[str, str]) -> str | None:
    """The trial id of a CustomJob that backs a tuning trial, else None."""
    value = labels.get(TRIAL_LABEL)
    return value if value and value.isdigit() else None
