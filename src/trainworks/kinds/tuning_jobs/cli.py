"""`trainworks hp-tuning-jobs`: create and manage hyperparameter tuning jobs, modelled on
`gcloud ai hp-tuning-jobs`.

`create` reads gcloud's --config YAML (a HyperparameterTuningJob: `studySpec` and `trialJobSpec`, camelCase
or snake_case keys) and lays the flags over it. The shared options, client and error handling are in
`common`, the human output in `render`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from trainworks.cli.common import (
    DEFAULT_ENDPOINT,
    ApiKeyOpt,
    EndpointOpt,
    FormatOpt,
    ProjectOpt,
    RegionOpt,
    endpoint_flag,
    handle_errors,
    make_client,
    poll_until_done,
    require_region,
)
from trainworks.cli.render import (
    OutputFormat,
    print_data,
    print_status,
    print_tuning_job_summary,
    print_tuning_job_table,
)
from trainworks.client.rest import ApiError, TrainworksClient
from trainworks.kinds.custom_jobs.pool_specs import FlagError, camelize, parse_dict

app = typer.Typer(
    name="hp-tuning-jobs",
    no_args_is_help=True,
    add_completion=False,
    help="Create and manage hyperparameter tuning jobs (like `gcloud ai hp-tuning-jobs`).",
)

TuningJobArg = Annotated[
    str,
    typer.Argument(
        metavar="HP_TUNING_JOB",
        help="Tuning job ID, or full name projects/P/locations/L/hyperparameterTuningJobs/ID.",
    ),
]

_ARG = "HP_TUNING_JOB"
_COLLECTION = "hyperparameterTuningJobs"

#: StudySpec.Algorithm values; --algorithm also takes gcloud's spelling (grid-search, random-search...).
ALGORITHMS = ("ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH")


# ====================================================================== flag parsing (no network)
def tuning_job_name(value: str, project: str, region: str | None) -> str:
    """A full HyperparameterTuningJob name, from a name or a bare ID (expanded with --project, --region)."""
    value = value.strip().strip("/")
    if value.startswith("projects/"):
        parts = value.split("/")
        if len(parts) != 6 or parts[2] != "locations" or parts[4] != _COLLECTION:
            raise FlagError(
                _ARG,
                f"[{value}] is not a HyperparameterTuningJob name "
                "(projects/P/locations/L/hyperparameterTuningJobs/ID)",
            )
        return value
    if "/" in value or not value:
        raise FlagError(_ARG, f"[{value}] is neither a tuning job ID nor a full tuning job name")
    if not region:
        raise FlagError(
            "--region", f"a region is needed to expand the tuning job ID [{value}]; pass --region"
        )
    return f"projects/{project}/locations/{region}/{_COLLECTION}/{value}"


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
    try:
        text = path.read_text()
    except OSError as exc:
        raise FlagError("--config", f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FlagError("--config", f"{path} is not valid YAML or JSON: {exc}") from None
    if not isinstance(data, dict):
        kind = "nothing" if data is None else type(data).__name__
        raise FlagError("--config", f"{path} must hold a mapping with studySpec and trialJobSpec, not {kind}")
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
    for item in labels or []:
        merged.update(parse_dict(item, "--labels"))
    if merged:
        body["labels"] = merged
    return body


# ====================================================================== helpers
def _with_trials(client: TrainworksClient, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each listed job fetched again with its trials (List omits them); jobs deleted meanwhile are dropped."""

    def fetch(job: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return client.get_hyperparameter_tuning_job(job["name"])
        except ApiError as exc:
            if exc.status_code == 404:
                return None
            raise

    with ThreadPoolExecutor(max_workers=min(8, max(len(jobs), 1))) as pool:
        fetched = list(pool.map(fetch, jobs))
    return [job for job in fetched if job is not None]


# ====================================================================== commands
@app.command()
@handle_errors
def create(
    config: Annotated[
        Path,
        typer.Option(
            "--config",
            help="YAML/JSON file with studySpec and trialJobSpec (a CustomJobSpec), camelCase or snake_case "
            "keys, as for `gcloud ai hp-tuning-jobs create`; flags override it.",
        ),
    ],
    display_name: Annotated[
        str | None,
        typer.Option("--display-name", help="Display name of the job (required unless in --config)."),
    ] = None,
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
    labels: Annotated[list[str] | None, typer.Option("--labels", metavar="KEY=VALUE,...")] = None,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Create a hyperparameter tuning job from a --config file and flags."""
    location = require_region(region)
    body = build_tuning_job(
        config=config,
        display_name=display_name,
        max_trial_count=max_trial_count,
        parallel_trial_count=parallel_trial_count,
        algorithm=algorithm,
        labels=labels,
    )
    with make_client(endpoint, api_key) as client:
        job = client.create_hyperparameter_tuning_job(f"projects/{project}/locations/{location}", body)
    if format != OutputFormat.human:
        print_data(job, format)
        return
    name = job.get("name", "")
    print_status(f"HyperparameterTuningJob [{name}] is submitted successfully.")
    print_tuning_job_summary(job, trials=False)
    flags = endpoint_flag(endpoint)
    print_status(
        "\nView its trials with:\n"
        f"  trainworks hp-tuning-jobs describe {name}{flags}\n"
        "or wait for it to end with:\n"
        f"  trainworks hp-tuning-jobs wait {name}{flags}"
    )


@app.command("list")
@handle_errors
def list_(
    filter: Annotated[
        str,
        typer.Option("--filter", help='AIP-160 filter, e.g. state="JOB_STATE_RUNNING" AND labels.team=ml'),
    ] = "",
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Show at most this many jobs.")] = None,
    page_size: Annotated[
        int, typer.Option("--page-size", min=0, help="Jobs per request (0: server default).")
    ] = 0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """List tuning jobs of a project and region, newest first, with their trials done and best metric.

    json and yaml print the jobs as List returns them (without trials).
    """
    location = require_region(region)
    jobs: list[dict[str, Any]] = []
    with make_client(endpoint, api_key) as client:
        size = page_size or (min(limit, 1000) if limit else 0)
        parent = f"projects/{project}/locations/{location}"
        for job in client.list_hyperparameter_tuning_jobs(parent, filter, size):
            jobs.append(job)
            if limit is not None and len(jobs) >= limit:
                break
        if format == OutputFormat.human:
            jobs = _with_trials(client, jobs)
    if format != OutputFormat.human:
        print_data(jobs, format)
    else:
        print_tuning_job_table(jobs)


@app.command()
@handle_errors
def describe(
    hp_tuning_job: TuningJobArg,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Show a tuning job and its trials, best first by the study's metric goal (INFEASIBLE ones last)."""
    name = tuning_job_name(hp_tuning_job, project, region)
    with make_client(endpoint, api_key) as client:
        job = client.get_hyperparameter_tuning_job(name)
    if format != OutputFormat.human:
        print_data(job, format)
    else:
        print_tuning_job_summary(job)


@app.command()
@handle_errors
def cancel(
    hp_tuning_job: TuningJobArg,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Ask a tuning job to stop; it and its running trials end CANCELLED (cancellation is asynchronous)."""
    name = tuning_job_name(hp_tuning_job, project, region)
    with make_client(endpoint, api_key) as client:
        result = client.cancel_hyperparameter_tuning_job(name)
    if format != OutputFormat.human:
        print_data(result, format)
        return
    print_status(
        f"Request to cancel HyperparameterTuningJob [{name}] has been sent.\n"
        f"Wait for it to end with:\n  trainworks hp-tuning-jobs wait {name}{endpoint_flag(endpoint)}"
    )


@app.command()
@handle_errors
def delete(
    hp_tuning_job: TuningJobArg,
    async_: Annotated[bool, typer.Option("--async", help="Return without waiting for the deletion.")] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.0, help="Seconds to wait for the deletion.")
    ] = 300.0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Delete a finished tuning job (a running one must be cancelled first)."""
    name = tuning_job_name(hp_tuning_job, project, region)
    with make_client(endpoint, api_key) as client:
        op = client.delete_hyperparameter_tuning_job(name)
        if not async_ and not op.get("done"):
            if format == OutputFormat.human:
                print_status(f"Waiting for operation [{op.get('name', '')}] to complete...")
            op = client.wait_operation(op["name"], timeout)
    if format != OutputFormat.human:
        print_data(op, format)
    elif op.get("error"):
        error = op["error"]
        print_status(
            f"ERROR: deleting HyperparameterTuningJob [{name}] failed: "
            f"code {error.get('code')}: {error.get('message')}"
        )
    elif op.get("done"):
        print_status(f"Deleted HyperparameterTuningJob [{name}].")
    elif async_:
        print_status(
            f"Deletion of HyperparameterTuningJob [{name}] is in progress: operation [{op.get('name', '')}]."
        )
    else:
        print_status(
            f"ERROR: operation [{op.get('name', '')}] to delete HyperparameterTuningJob [{name}] is not done "
            f"after {timeout:g}s; it goes on in the background."
        )
    if op.get("error") or (not async_ and not op.get("done")):
        raise typer.Exit(1)


@app.command()
@handle_errors
def wait(
    hp_tuning_job: TuningJobArg,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Give up (exit 1) after this many seconds.")
    ] = None,
    poll_interval: Annotated[
        float, typer.Option("--poll-interval", min=0.05, help="Longest pause between polls.")
    ] = 2.0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Block until the tuning job ends. Exit 0 if it SUCCEEDED, 1 otherwise (failed, cancelled, timed out)."""
    name = tuning_job_name(hp_tuning_job, project, region)
    with make_client(endpoint, api_key) as client:
        job = poll_until_done(
            lambda: client.get_hyperparameter_tuning_job(name),
            f"HyperparameterTuningJob [{name}]",
            timeout,
            poll_interval,
            format,
        )
    if format != OutputFormat.human:
        print_data(job, format)
    else:
        print_tuning_job_summary(job)
    if job.get("state") != "JOB_STATE_SUCCEEDED":
        raise typer.Exit(1)


__all__ = [
    "ALGORITHMS",
    "app",
    "build_tuning_job",
    "load_tuning_config",
    "normalize_algorithm",
    "tuning_job_name",
]
