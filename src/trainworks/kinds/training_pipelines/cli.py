"""`trainworks training-pipelines`: create and manage training pipelines (a training task, optionally on a
managed dataset, whose trained model is registered), modelled on `gcloud ai` commands.

`create` reads a TrainingPipeline as YAML or JSON (camelCase or snake_case keys) and lays the flags over it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from trainworks.kernel import cli
from trainworks.kernel.cli import Options, command
from trainworks.kernel.flags import parse_dicts, read_config
from trainworks.kernel.names import FlagError, NameSpec, parse_name
from trainworks.kernel.render import OutputFormat, enum_text, print_status, resource_id
from trainworks.kinds.training_pipelines.client import TrainingPipelinesClient
from trainworks.kinds.training_pipelines.wire import TrainingPipeline

app = cli.group(
    "training-pipelines", "Create and manage training pipelines (train, then register the model)."
)

PIPELINES = NameSpec("trainingPipelines", "TRAINING_PIPELINE", "TrainingPipeline", "pipeline", "pipeline")
PipelineArg = Annotated[str, cli.name_argument(PIPELINES)]
TERMINAL = ("PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED")


# ====================================================================== no network
def pipeline_name(value: str, project: str, region: str | None) -> str:
    """A full TrainingPipeline name, from a name or a bare ID (expanded with --project, --region)."""
    return parse_name(PIPELINES, value, project, region)


def load_pipeline(path: Path, display_name: str | None, labels: list[str] | None) -> dict[str, Any]:
    """The TrainingPipeline body from --config, with --display-name and --labels laid over it."""
    data = read_config(path)
    if not isinstance(data, dict):
        raise FlagError("--config", f"{path} must hold a TrainingPipeline (a mapping)")
    body = dict(data)
    if display_name:
        body.pop("display_name", None)
        body["displayName"] = display_name
    if labels:
        merged = parse_dicts(labels, "--labels")
        body.pop("labels", None)
        body["labels"] = {**(data.get("labels") or {}), **merged}
    if not (body.get("displayName") or body.get("display_name")):
        raise FlagError("--display-name", "a display name is required (flag or displayName in --config)")
    return body


def _summary(pipeline: TrainingPipeline) -> None:
    lines = [
        f"name: {pipeline.name}",
        f"displayName: {pipeline.display_name}",
        f"state: {enum_text(pipeline.state)}",
    ]
    for key, value in (pipeline.training_task_metadata or {}).items():
        lines.append(f"{key}: {value}")
    model = pipeline.model_to_upload or {}
    if model.get("name"):
        lines.append(f"model: {model['name']} (version {model.get('versionId', '')})")
    if pipeline.error is not None:
        lines.append(f"error: code {pipeline.error.code}: {pipeline.error.message}")
    print_status("\n".join(lines))


# ====================================================================== commands
@command(app)
def create(
    config: Annotated[
        Path, typer.Option("--config", help="YAML/JSON file with the TrainingPipeline (camel or snake case).")
    ],
    display_name: Annotated[str | None, typer.Option("--display-name", help="Overrides displayName.")] = None,
    labels: cli.LabelsOpt = None,
    *,
    opts: Options,
) -> None:
    """Create a training pipeline from a --config file."""
    parent = opts.parent()
    body = load_pipeline(config, display_name, labels)
    pipeline = opts.call(
        TrainingPipelinesClient, lambda client: client.create_training_pipeline(parent, body)
    )
    cli.report_submitted(
        opts, pipeline, "TrainingPipeline", _summary, "training-pipelines", [("Wait for it to end", "wait")]
    )


def _print_table(pipelines: list[TrainingPipeline]) -> None:
    if not pipelines:
        print_status("Listed 0 items.")
        return
    print("PIPELINE_ID\tDISPLAY_NAME\tSTATE\tMODEL")
    for p in pipelines:
        model = (p.model_to_upload or {}).get("name", "")
        version = (p.model_to_upload or {}).get("versionId", "")
        shown = f"{model}@{version}" if model else "-"
        print(f"{resource_id(p.name)}\t{p.display_name}\t{enum_text(p.state)}\t{shown}")


COMMANDS = cli.ResourceCommands(app, PIPELINES, PipelineArg, TrainingPipelinesClient)
COMMANDS.list_(
    "List training pipelines of a project and region, newest first.",
    cli.ListFlags(
        filter='AIP-160 filter, e.g. state="PIPELINE_STATE_RUNNING" or training_task_definition:*',
        limit="Show at most this many.",
        page_size="Per request (0: server default).",
    ),
    # --page-size as given: unlike the other kinds, --limit sets no smaller page
    lambda client, query: client.list_training_pipelines(query.parent, query.filter, query.page_size),
    _print_table,
)
COMMANDS.describe("Show a training pipeline.", TrainingPipelinesClient.get_training_pipeline, _summary)
COMMANDS.cancel(
    "Ask a pipeline to stop; it cancels its training job and ends CANCELLED (asynchronously).",
    TrainingPipelinesClient.cancel_training_pipeline,
    None,
    TrainingPipelinesClient.get_training_pipeline,
)
COMMANDS.delete_and_wait(
    "Delete a finished training pipeline (a running one must be cancelled first).",
    TrainingPipelinesClient.delete_training_pipeline,
    doing="deleting",
)


@command(app)
def wait(
    training_pipeline: PipelineArg,
    timeout: cli.WaitTimeoutOpt = None,
    poll_interval: cli.PollIntervalOpt = 2.0,
    *,
    opts: Options,
) -> None:
    """Block until the pipeline ends, showing its state changes and the time elapsed on a terminal.

    Exit codes: 0 the pipeline succeeded, 1 it failed (or an error), 2 bad flags, 3 it was cancelled, 4
    --timeout passed first (the pipeline goes on)."""
    name = opts.name(PIPELINES, training_pipeline)
    cli.wait_for_end(
        opts,
        TrainingPipelinesClient,
        lambda client: client.get_training_pipeline(name),
        f"[{name}]",
        timeout,
        poll_interval,
        _summary,
        "PIPELINE_STATE_SUCCEEDED",
        TERMINAL,
        OutputFormat.human,  # on timeout the message alone, whatever the format
    )


__all__ = ["PIPELINES", "app", "load_pipeline", "pipeline_name"]
