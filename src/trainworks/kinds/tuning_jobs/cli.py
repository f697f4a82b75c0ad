"""`trainworks hp-tuning-jobs`: create and manage hyperparameter tuning jobs, modelled on
`gcloud ai hp-tuning-jobs`.

`create` reads gcloud's --config YAML (a HyperparameterTuningJob: `studySpec` and `trialJobSpec`, camelCase
or snake_case keys) and lays the flags over it. The common options, client and error handling are in
`kernel.cli`, the human output in `render`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any

import typer

from trainworks.kernel import cli
from trainworks.kernel.cli import Options, command
from trainworks.kernel.client import ApiError
from trainworks.kernel.flags import camelize, parse_dicts, read_config_mapping
from trainworks.kernel.names import FlagError, NameSpec, parse_name
from trainworks.kinds.tuning_jobs.client import TuningJobsClient
from trainworks.kinds.tuning_jobs.render import print_tuning_job_summary, print_tuning_job_table
from trainworks.kinds.tuning_jobs.wire import HyperparameterTuningJob

app = cli.group(
    "hp-tuning-jobs", "Create and manage hyperparameter tuning jobs (like `gcloud ai hp-tuning-jobs`)."
)

TUNING_JOBS = NameSpec(
    "hyperparameterTuningJobs", "HP_TUNING_JOB", "HyperparameterTuningJob", "tuning job", "tuning job"
)
TuningJobArg = Annotated[str, cli.name_argument(TUNING_JOBS)]

#: StudySpec.Algorithm values; --algorithm also takes gcloud's spelling (grid-search, random-search...).
ALGORITHMS = ("ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH")


# ====================================================================== flag parsing (no network)
def tuning_job_name(value: str, project: str, region: str | None) -> str:
    """A full HyperparameterTuningJob name, from a name or a bare ID (expanded with --project, --region)."""
    return parse_name(TUNING_JOBS, value, project, region)


def normalize_algorithm(value: str | None) -> str | None:
    """`grid-search`, `grid_search` or `GRID_SEARCH` -> `GRID_SEARCH`; a FlagError for anything else."""
    if value is None:
        return None
    name = value.strip().upper().replace("-", "_")
    if name not in ALGORITHMS:
        raise FlagError(
            "--algorithm",
            f"[{value}] is not an algorithm; choose one of [{', '.join(ALGORITHMS)}] "
            "(or gcloud's algorithm-unspecified, grid-search, random-search)",
        )
    return name


def _algorithm_callback(value: str | None) -> str | None:
    try:
        return normalize_algorithm(value)
    except FlagError as exc:
        raise typer.BadParameter(exc.message) from None


def load_tuning_config(path: Path) -> dict[str, Any]:
    """Read a --config file (YAML or JSON) holding a HyperparameterTuningJob as gcloud's does: `studySpec`
    and `trialJobSpec` at the top, plus optionally maxTrialCount, parallelTrialCount, maxFailedTrialCount,
    displayName and labels. snake_case keys become camelCase (keys inside `labels` are kept)."""
    data = read_config_mapping(path, "a mapping with studySpec and trialJobSpec")
    config: dict[str, Any] = camelize(data)
    missing = [key for key in ("studySpec", "trialJobSpec") if key not in config]
    if missing:
        hint = ""
        if "workerPoolSpecs" in config:
            hint = "; the CustomJobSpec of the trials goes under trialJobSpec"
        raise FlagError("--config", f"{path} has no {' and no '.join(missing)}{hint}")
    for key in ("studySpec", "trialJobSpec"):
        if not isinstance(config[key], dict):
            raise FlagError("--config", f"{key} must be a mapping")
    if "labels" in config and not isinstance(config["labels"], dict):
        raise FlagError("--config", "labels must be a mapping")
    trial_spec = config["trialJobSpec"]
    pools = trial_spec.get("workerPoolSpecs")
    if isinstance(pools, dict):  # gcloud's help shows a single pool without a list
        trial_spec["workerPoolSpecs"] = [pools]
    elif pools is not None and not isinstance(pools, list):
        raise FlagError("--config", "trialJobSpec.workerPoolSpecs must be a list of worker pool specs")
    return config


def build_tuning_job(
    *,
    config: Path,
    display_name: str | None = None,
    max_trial_count: int | None = None,
    parallel_trial_count: int | None = None,
    algorithm: str | None = None,
    labels: list[str] | None = None,
) -> dict[str, Any]:
    """The HyperparameterTuningJob body of `create`: the --config file with the flags on top.

    maxTrialCount and parallelTrialCount come from the flag, else the file, else 1 (gcloud's default).
    """
    body = load_tuning_config(config)
    name = display_name or body.get("displayName")
    if not name:
        raise FlagError("--display-name", "a display name is required (or displayName in --config)")
    body["displayName"] = name
    if max_trial_count is not None:
        body["maxTrialCount"] = max_trial_count
    body.setdefault("maxTrialCount", 1)
    if parallel_trial_count is not None:
        body["parallelTrialCount"] = parallel_trial_count
    body.setdefault("parallelTrialCount", 1)
    chosen = normalize_algorithm(algorithm)
    if chosen is not None:
        body["studySpec"]["algorithm"] = chosen
    merged = dict(body.get("labels") or {})
    merged.update(parse_dicts(labels, "--labels"))
    if merged:
        body["labels"] = merged
    return body


# ====================================================================== helpers
def _with_trials(
    client: TuningJobsClient, jobs: list[HyperparameterTuningJob]
) -> list[HyperparameterTuningJob]:
    """Each listed job fetched again with its trials (List omits them); jobs deleted meanwhile are dropped."""

    def fetch(job: HyperparameterTuningJob) -> HyperparameterTuningJob | None:
        try:
            return client.get_hyperparameter_tuning_job(job.name)
        except ApiError as exc:
            if exc.status_code == 404:
                return None
            raise

    with ThreadPoolExecutor(max_workers=min(8, max(len(jobs), 1))) as pool:
        fetched = list(pool.map(fetch, jobs))
    return [job for job in fetched if job is not None]


# ====================================================================== commands
@command(app)
def create(
    config: Annotated[
        Path,
        typer.Option(
            "--config",
            help="YAML/JSON file with studySpec and trialJobSpec (a CustomJobSpec), camelCase or snake_case "
            "keys, as for `gcloud ai hp-tuning-jobs create`; flags override it.",
        ),
    ],
    display_name: cli.JobDisplayNameOpt = None,
    max_trial_count: Annotated[
        int | None,
        typer.Option(
            "--max-trial-count", min=1, help="Total number of trials (default: the file's, else 1)."
        ),
    ] = None,
    parallel_trial_count: Annotated[
        int | None,
        typer.Option(
            "--parallel-trial-count",
            min=1,
            help="Trials run at the same time (default: the file's, else 1).",
        ),
    ] = None,
    algorithm: Annotated[
        str | None,
        typer.Option(
            "--algorithm",
            metavar="ALGORITHM",
            callback=_algorithm_callback,
            help="Search algorithm: ALGORITHM_UNSPECIFIED (Bayesian), GRID_SEARCH or RANDOM_SEARCH "
            "(gcloud's grid-search etc. also work). Overrides studySpec.algorithm.",
        ),
    ] = None,
    labels: cli.LabelsOpt = None,
    *,
    opts: Options,
) -> None:
    """Create a hyperparameter tuning job from a --config file and flags."""
    parent = opts.parent()
    body = build_tuning_job(
        config=config,
        display_name=display_name,
        max_trial_count=max_trial_count,
        parallel_trial_count=parallel_trial_count,
        algorithm=algorithm,
        labels=labels,
    )
    job = opts.call(TuningJobsClient, lambda client: client.create_hyperparameter_tuning_job(parent, body))
    hints = [("View its trials", "describe"), ("wait for it to end", "wait")]
    cli.report_submitted(
        opts,
        job,
        "HyperparameterTuningJob",
        lambda found: print_tuning_job_summary(found, trials=False),
        "hp-tuning-jobs",
        hints,
    )


COMMANDS = cli.ResourceCommands(app, TUNING_JOBS, TuningJobArg, TuningJobsClient)
COMMANDS.list_(
    "List tuning jobs of a project and region, newest first, with their trials done and best metric.\n\n"
    "json and yaml print the jobs as List returns them (without trials).",
    cli.JOB_LIST_FLAGS,
    lambda client, query: client.list_hyperparameter_tuning_jobs(query.parent, query.filter, query.size),
    print_tuning_job_table,
    complete=_with_trials,
)
COMMANDS.describe(
    "Show a tuning job and its trials, best first by the study's metric goal (INFEASIBLE ones last).",
    TuningJobsClient.get_hyperparameter_tuning_job,
    print_tuning_job_summary,
)
COMMANDS.cancel(
    "Ask a tuning job to stop; it and its running trials end CANCELLED (cancellation is asynchronous).",
    TuningJobsClient.cancel_hyperparameter_tuning_job,
    "hp-tuning-jobs",
    TuningJobsClient.get_hyperparameter_tuning_job,
)
COMMANDS.delete_job(
    "Delete a finished tuning job (a running one must be cancelled first).",
    TuningJobsClient.delete_hyperparameter_tuning_job,
    unfinished_fails=True,
)
COMMANDS.wait(
    "Block until the tuning job ends, showing its state changes and the time elapsed on a terminal.",
    TuningJobsClient.get_hyperparameter_tuning_job,
    print_tuning_job_summary,
)


__all__ = [
    "ALGORITHMS",
    "app",
    "build_tuning_job",
    "load_tuning_config",
    "normalize_algorithm",
    "TUNING_JOBS",
    "tuning_job_name",
]
