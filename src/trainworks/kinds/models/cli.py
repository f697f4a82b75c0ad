"""`trainworks models`: upload models to the registry and manage their versions, modelled on
`gcloud ai models`.

A MODEL argument is a model ID or a full name, optionally with `@VERSION_ID` or `@ALIAS`. The common
options, client and error handling are in `kernel.cli`; tables here follow `kernel.render`'s style.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from trainworks.kernel import cli
from trainworks.kernel.cli import Options, command
from trainworks.kernel.flags import parse_dicts, split_list
from trainworks.kernel.names import FlagError, NameSpec, parse_name
from trainworks.kernel.render import (
    Column,
    OutputFormat,
    print_data,
    print_status,
    print_table,
    resource_id,
    time_text,
)
from trainworks.kinds.models.client import ModelsClient
from trainworks.kinds.models.wire import Model

app = cli.group(
    "models", "Upload models to the registry and manage their versions (like `gcloud ai models`)."
)

_ARG = "MODEL"
MODELS = NameSpec("models", _ARG, "model", "model", "model")
ModelArg = Annotated[
    str,
    cli.name_argument(
        MODELS, "Model ID or full name projects/P/locations/L/models/ID, optionally with @VERSION or @ALIAS."
    ),
]


# ====================================================================== flag parsing (no network)
def model_name(value: str, project: str, region: str | None) -> str:
    """A full model name (keeping any @VERSION or @ALIAS), from a name or a bare ID."""
    return parse_name(MODELS, value, project, region)


def build_upload(
    *,
    display_name: str,
    artifact_uri: str | None = None,
    container_image_uri: str | None = None,
    description: str | None = None,
    version_description: str | None = None,
    version_aliases: str | None = None,
    labels: list[str] | None = None,
    parent_model: str | None = None,
    model_id: str | None = None,
) -> dict[str, Any]:
    """The UploadModelRequest body of `upload`."""
    if not artifact_uri and not container_image_uri:
        raise FlagError(
            "--artifact-uri",
            "give --artifact-uri (the gs:// model directory), --container-image-uri, or both",
        )
    model: dict[str, Any] = {"displayName": display_name}
    if artifact_uri:
        model["artifactUri"] = artifact_uri
    if container_image_uri:
        model["containerSpec"] = {"imageUri": container_image_uri}
    if description:
        model["description"] = description
    if version_description:
        model["versionDescription"] = version_description
    aliases = [a.strip() for a in split_list(version_aliases or "") if a.strip()]
    if aliases:
        model["versionAliases"] = aliases
    merged = parse_dicts(labels, "--labels")
    if merged:
        model["labels"] = merged
    body: dict[str, Any] = {"model": model}
    if parent_model:
        body["parentModel"] = parent_model
    if model_id:
        body["modelId"] = model_id
    return body


# ====================================================================== output
def print_model_table(models: list[Model], versions: bool = False) -> None:
    """Models (or versions of one) as a table: ID, version, aliases, display name, artifacts, created."""
    from rich.console import Console
    from rich.markup import escape

    columns = [
        Column("MODEL_ID" if not versions else "VERSION_NAME"),
        Column("VERSION_ID"),
        Column("ALIASES", fold=True),
        Column("DISPLAY_NAME", fold=True),
        Column("ARTIFACT_URI", fold=True),
        Column("CREATE_TIME"),
    ]
    rows = [
        (
            escape(resource_id(model.name)),
            model.version_id,
            escape(",".join(model.version_aliases)),
            escape(model.display_name),
            escape(model.artifact_uri),
            time_text(model.version_create_time if versions else model.create_time),
        )
        for model in models
    ]
    # 200 columns even on a terminal: model names and URIs are long.
    print_table(columns, rows, out=Console(width=200, highlight=False, soft_wrap=False))


def _print_yaml(model: Model) -> None:
    """`describe` for humans: gcloud's prints YAML (json stays available for scripts)."""
    print_data(model, OutputFormat.yaml)


def _whole_model(model: str, name: str) -> None:
    """`delete` takes a whole model, never one version."""
    if "@" in name:
        raise FlagError(
            _ARG, f"[{model}] names a version; use `trainworks models delete-version` for one version"
        )


def _one_version(model: str, name: str) -> None:
    """`delete-version` takes MODEL@VERSION or MODEL@ALIAS."""
    if "@" not in name:
        raise FlagError(_ARG, f"[{model}] names no version: give MODEL@VERSION_ID or MODEL@ALIAS")


# ====================================================================== commands
@command(app)
def upload(
    display_name: Annotated[str, typer.Option("--display-name", help="Display name of the model version.")],
    artifact_uri: Annotated[
        str | None, typer.Option("--artifact-uri", help="gs:// directory holding the saved model files.")
    ] = None,
    container_image_uri: Annotated[
        str | None, typer.Option("--container-image-uri", help="Serving container image of the model.")
    ] = None,
    parent_model: Annotated[
        str | None,
        typer.Option("--parent-model", help="Upload as a new version of this model (ID or full name)."),
    ] = None,
    model_id: Annotated[
        str | None, typer.Option("--model-id", help="ID of a new model (default: a server-assigned number).")
    ] = None,
    version_aliases: Annotated[
        str | None,
        typer.Option(
            "--version-aliases", metavar="ALIAS,...", help="Aliases of the version; 'default' moves it."
        ),
    ] = None,
    description: Annotated[str | None, typer.Option("--description")] = None,
    version_description: Annotated[str | None, typer.Option("--version-description")] = None,
    labels: cli.LabelsOpt = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.0, help="Seconds to wait for the upload.")
    ] = 300.0,
    *,
    opts: Options,
) -> None:
    """Upload a model (or a new version of one) to the registry; its files are copied into the registry."""
    parent = opts.parent()
    parent_name = opts.name(MODELS, parent_model) if parent_model else None
    body = build_upload(
        display_name=display_name,
        artifact_uri=artifact_uri,
        container_image_uri=container_image_uri,
        description=description,
        version_description=version_description,
        version_aliases=version_aliases,
        labels=labels,
        parent_model=parent_name,
        model_id=model_id,
    )
    op = cli.run_operation(
        opts, ModelsClient, lambda client: client.upload_model(parent, body), "upload the model", timeout
    )
    if opts.human:
        response = op.response or {}
        print_status(
            f"Uploaded model [{response.get('model', '')}] as version [{response.get('modelVersionId', '')}]."
        )


COMMANDS = cli.ResourceCommands(app, MODELS, ModelArg, ModelsClient)
COMMANDS.list_(
    "List the models of a project and region (each as its default version).",
    cli.ListFlags(
        filter='AIP-160 filter, e.g. display_name="churn" AND labels.team=ml',
        order_by=("--order-by", "display_name, create_time or update_time, optionally desc."),
        limit="Show at most this many models.",
        page_size="Models per request.",
    ),
    lambda client, query: client.list_models(query.parent, query.filter, query.order_by, query.size),
    print_model_table,
)
COMMANDS.describe(
    "Show a model version (MODEL@VERSION, MODEL@ALIAS, or the default version).",
    ModelsClient.get_model,
    _print_yaml,
)


@command(app, "list-versions")
def list_versions(
    model: ModelArg,
    filter: Annotated[str, typer.Option("--filter", help="AIP-160 filter over the versions.")] = "",
    order_by: Annotated[
        str, typer.Option("--order-by", help="display_name, create_time or update_time.")
    ] = "",
    *,
    opts: Options,
) -> None:
    """List the versions of a model."""
    name = opts.name(MODELS, model)
    with opts.client(ModelsClient) as client:
        versions = list(client.list_model_versions(name, filter, order_by))
    opts.show(versions, lambda found: print_model_table(found, versions=True))


COMMANDS.delete_and_wait(
    "Delete a model with all its versions and their registry copies.",
    ModelsClient.delete_model,
    check=_whole_model,
)
COMMANDS.delete_and_wait(
    "Delete one version (MODEL@VERSION or MODEL@ALIAS); the default version only when it is the last.",
    ModelsClient.delete_model_version,
    command="delete-version",
    what="model version",
    check=_one_version,
)


__all__ = ["app", "build_upload", "model_name", "print_model_table"]
