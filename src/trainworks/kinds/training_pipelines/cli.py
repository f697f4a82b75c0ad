"""`trainworks training-pipelines`: create and manage training pipelines (a training task, optionally on a
managed dataset, whose trained model is registered), modelled on `gcloud ai` commands.

`create` reads a TrainingPipeline as YAML or JSON (camelCase or snake_case keys) and lays the flags over it.
"""

from __future__ import annotations

import time
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
    exit_unless_succeeded,
    handle_errors,
    make_client,
    operation_done,
    require_region,
)
from trainworks.cli.render import OutputFormat, print_data, print_status
from trainworks.kinds.custom_jobs.pool_specs import FlagError, parse_dict

app = typer.Typer(
    name="training-pipelines",
    no_args_is_help=True,
    add_completion=False,
    help="Create and manage training pipelines (train, then register the model).",
)

PipelineArg = Annotated[
    str,
    typer.Argument(
        metavar="TRAINING_PIPELINE",
        help="Pipeline ID, or full name projects/P/locations/L/trainingPipelines/ID.",
    ),
]
_ARG = "TRAINING_PIPELINE"
_COLLECTION = "trainingPipelines"
TERMINAL = ("PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED")


# ====================================================================== no network
def pipeline_name(value: str, project: str, region: str | None) -> str:
    """A full TrainingPipeline name, from a name or a bare ID (expanded with --project, --region)."""
    value = value.strip().strip("/")
    if value.startswith("projects/"):
        parts = value.split("/")
        if len(parts) != 6 or parts[2] != "locations" or parts[4] != _COLLECTION:
            raise FlagError(
                _ARG,
                f"[{value}] is not a TrainingPipeline name (projects/P/locations/L/trainingPipelines/ID)",
            )
        return value
    if "/" in value or not value:
        raise FlagError(_ARG, f"[{value}] is neither a pipeline ID nor a full pipeline name")
    if not region:
        raise FlagError("--region", f"a region is needed to expand the pipeline ID [{value}]; pass --region")
    return f"projects/{project}/locations/{region}/{_COLLECTION}/{value}"


def load_pipeline(path: Path, display_name: str | None, labels: list[str] | None) -> dict[str, Any]:
    """The TrainingPipeline body from --config, with --display-name and --labels laid over it."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise FlagError("--config", f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise FlagError("--config", f"{path} is not valid YAML or JSON: {exc}") from None
    if not isinstance(data, dict):
        raise FlagError("--config", f"{path} must hold a TrainingPipeline (a mapping)")
    body = dict(data)
    if display_name:
        body.pop("display_name", None)
        body["displayName"] = display_name
    if labels:
        merged: dict[str, str] = {}
        for item in labels:
            merged.update(parse_dict(item, "--labels"))
        body.pop("labels", None)
        body["labels"] = {**(data.get("labels") or {}), **merged}
    if not (body.get("displayName") or body.get("display_name")):
        raise FlagError("--display-name", "a display name is required (flag or displayName in --config)")
    return body


def _summary(pipeline: dict[str, Any]) -> None:
    lines = [
        f"name: {pipeline.get('name', '')}",
        f"displayName: {pipeline.get('displayName', '')}",
        f"state: {pipeline.get('state', '')}",
    ]
    for key, value in (pipeline.get("trainingTaskMetadata") or {}).items():
        lines.append(f"{key}: {value}")
    model = pipeline.get("modelToUpload") or {}
    if model.get("name"):
        lines.append(f"model: {model['name']} (version {model.get('versionId', '')})")
    error = pipeline.get("error")
    if error:
        lines.append(f"error: code {error.get('code', 0)}: {error.get('message', '')}")
    print_status("\n".join(lines))


# ====================================================================== commands
@app.command()
@handle_errors
def create(
    config: Annotated[
        Path, typer.Option("--config", help="YAML/JSON file with the TrainingPipeline (camel or snake case).")
    ],
    display_name: Annotated[str | None, typer.Option("--display-name", help="Overrides displayName.")] = None,
    labels: Annotated[list[str] | None, typer.Option("--labels", metavar="KEY=VALUE,...")] = None,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Create a training pipeline from a --config file."""
    location = require_region(region)
    body = load_pipeline(config, display_name, labels)
    with make_client(endpoint, api_key) as client:
        pipeline = client.create_training_pipeline(f"projects/{project}/locations/{location}", body)
    if format != OutputFormat.human:
        print_data(pipeline, format)
        return
    name = pipeline.get("name", "")
    print_status(f"TrainingPipeline [{name}] is submitted successfully.")
    _summary(pipeline)
    print_status(
        f"\nWait for it to end with:\n  trainworks training-pipelines wait {name}{endpoint_flag(endpoint)}"
    )


@app.command("list")
@handle_errors
def list_(
    filter: Annotated[
        str,
        typer.Option(
            "--filter",
            help='AIP-160 filter, e.g. state="PIPELINE_STATE_RUNNING" or training_task_definition:*',
        ),
    ] = "",
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Show at most this many.")] = None,
    page_size: Annotated[
        int, typer.Option("--page-size", min=0, help="Per request (0: server default).")
    ] = 0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """List training pipelines of a project and region, newest first."""
    location = require_region(region)
    pipelines: list[dict[str, Any]] = []
    with make_client(endpoint, api_key) as client:
        parent = f"projects/{project}/locations/{location}"
        for pipeline in client.list_training_pipelines(parent, filter, page_size):
            pipelines.append(pipeline)
            if limit is not None and len(pipelines) >= limit:
                break
    if format != OutputFormat.human:
        print_data(pipelines, format)
        return
    if not pipelines:
        print_status("Listed 0 items.")
        return
    print("PIPELINE_ID\tDISPLAY_NAME\tSTATE\tMODEL")
    for p in pipelines:
        model = (p.get("modelToUpload") or {}).get("name", "")
        version = (p.get("modelToUpload") or {}).get("versionId", "")
        shown = f"{model}@{version}" if model else "-"
        print(f"{p['name'].rsplit('/', 1)[-1]}\t{p.get('displayName', '')}\t{p.get('state', '')}\t{shown}")


@app.command()
@handle_errors
def describe(
    training_pipeline: PipelineArg,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Show a training pipeline."""
    name = pipeline_name(training_pipeline, project, region)
    with make_client(endpoint, api_key) as client:
        pipeline = client.get_training_pipeline(name)
    if format != OutputFormat.human:
        print_data(pipeline, format)
    else:
        _summary(pipeline)


@app.command()
@handle_errors
def cancel(
    training_pipeline: PipelineArg,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Ask a pipeline to stop; it cancels its training job and ends CANCELLED (asynchronously)."""
    name = pipeline_name(training_pipeline, project, region)
    with make_client(endpoint, api_key) as client:
        result = client.cancel_training_pipeline(name)
    if format != OutputFormat.human:
        print_data(result, format)
    else:
        print_status(f"Request to cancel TrainingPipeline [{name}] has been sent.")


@app.command()
@handle_errors
def delete(
    training_pipeline: PipelineArg,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.0, help="Seconds to wait for the deletion.")
    ] = 300.0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Delete a finished training pipeline (a running one must be cancelled first)."""
    name = pipeline_name(training_pipeline, project, region)
    with make_client(endpoint, api_key) as client:
        op = operation_done(client, client.delete_training_pipeline(name), timeout)
    if format != OutputFormat.human:
        print_data(op, format)
    exit_unless_succeeded(op, f"deleting TrainingPipeline [{name}]", timeout)
    if format == OutputFormat.human:
        print_status(f"Deleted TrainingPipeline [{name}].")


@app.command()
@handle_errors
def wait(
    training_pipeline: PipelineArg,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Give up (exit 1) after this long.")
    ] = None,
    poll_interval: Annotated[float, typer.Option("--poll-interval", min=0.05, help="Longest pause.")] = 2.0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Block until the pipeline ends. Exit 0 if it SUCCEEDED, 1 otherwise (failed, cancelled, timed out)."""
    name = pipeline_name(training_pipeline, project, region)
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = 0.1
    with make_client(endpoint, api_key) as client:
        pipeline = client.get_training_pipeline(name)
        while pipeline.get("state") not in TERMINAL:
            if deadline is not None and time.monotonic() >= deadline:
                print_status(f"ERROR: timed out after {timeout:g}s; [{name}] is {pipeline.get('state')}.")
                raise typer.Exit(1)
            time.sleep(pause)
            pause = min(pause * 1.5, poll_interval)
            pipeline = client.get_training_pipeline(name)
    if format != OutputFormat.human:
        print_data(pipeline, format)
    else:
        _summary(pipeline)
    if pipeline.get("state") != "PIPELINE_STATE_SUCCEEDED":
        raise typer.Exit(1)


__all__ = ["app", "load_pipeline", "pipeline_name"]
