"""`trainworks models`: upload models to the registry and manage their versions, modelled on
`gcloud ai models`.

A MODEL argument is a model ID or a full name, optionally with `@VERSION_ID` or `@ALIAS`. The shared
options, client and error handling are in `common`; tables here follow `render`'s style.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from trainworks.cli.common import (
    DEFAULT_ENDPOINT,
    ApiKeyOpt,
    EndpointOpt,
    FormatOpt,
    ProjectOpt,
    RegionOpt,
    exit_unless_succeeded,
    handle_errors,
    make_client,
    operation_done,
    require_region,
)
from trainworks.cli.render import OutputFormat, print_data, print_status
from trainworks.kinds.custom_jobs.pool_specs import FlagError, parse_dict, split_list

app = typer.Typer(
    name="models",
    no_args_is_help=True,
    add_completion=False,
    help="Upload models to the registry and manage their versions (like `gcloud ai models`).",
)

_ARG = "MODEL"
ModelArg = Annotated[
    str,
    typer.Argument(
        metavar=_ARG,
        help="Model ID or full name projects/P/locations/L/models/ID, optionally with @VERSION or @ALIAS.",
    ),
]


# ====================================================================== flag parsing (no network)
def model_name(value: str, project: str, region: str | None) -> str:
    """A full model name (keeping any @VERSION or @ALIAS), from a name or a bare ID."""
    value = value.strip().strip("/")
    if value.startswith("projects/"):
        parts = value.split("/")
        if len(parts) != 6 or parts[2] != "locations" or parts[4] != "models" or not parts[5]:
            raise FlagError(_ARG, f"[{value}] is not a model name (projects/P/locations/L/models/ID)")
        return value
    if "/" in value or not value or value.startswith("@"):
        raise FlagError(_ARG, f"[{value}] is neither a model ID nor a full model name")
    if not region:
        raise FlagError("--region", f"a region is needed to expand the model ID [{value}]; pass --region")
    return f"projects/{project}/locations/{region}/models/{value}"


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
    merged: dict[str, str] = {}
    for item in labels or []:
        merged.update(parse_dict(item, "--labels"))
    if merged:
        model["labels"] = merged
    body: dict[str, Any] = {"model": model}
    if parent_model:
        body["parentModel"] = parent_model
    if model_id:
        body["modelId"] = model_id
    return body


# ====================================================================== output
def _model_id(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def print_model_table(models: list[dict[str, Any]], versions: bool = False) -> None:
    """Models (or versions of one) as a table: ID, version, aliases, display name, artifacts, created."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=200, highlight=False, soft_wrap=False)
    if not models:
        console.print("Listed 0 items.")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("MODEL_ID" if not versions else "VERSION_NAME", no_wrap=True)
    table.add_column("VERSION_ID", no_wrap=True)
    table.add_column("ALIASES", overflow="fold")
    table.add_column("DISPLAY_NAME", overflow="fold")
    table.add_column("ARTIFACT_URI", overflow="fold")
    table.add_column("CREATE_TIME", no_wrap=True)
    for model in models:
        table.add_row(
            escape(_model_id(model.get("name", ""))),
            model.get("versionId", ""),
            escape(",".join(model.get("versionAliases", []))),
            escape(model.get("displayName", "")),
            escape(model.get("artifactUri", "")),
            model.get("versionCreateTime" if versions else "createTime", ""),
        )
    console.print(table)


# ====================================================================== commands
@app.command()
@handle_errors
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
    labels: Annotated[list[str] | None, typer.Option("--labels", metavar="KEY=VALUE,...")] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.0, help="Seconds to wait for the upload.")
    ] = 300.0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Upload a model (or a new version of one) to the registry; its files are copied into the registry."""
    location = require_region(region)
    parent_name = model_name(parent_model, project, location) if parent_model else None
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
    with make_client(endpoint, api_key) as client:
        op = operation_done(
            client, client.upload_model(f"projects/{project}/locations/{location}", body), timeout
        )
    if format != OutputFormat.human:
        print_data(op, format)
    exit_unless_succeeded(op, "upload the model", timeout)
    if format == OutputFormat.human:
        response = op.get("response", {})
        print_status(
            f"Uploaded model [{response.get('model', '')}] as version [{response.get('modelVersionId', '')}]."
        )


@app.command("list")
@handle_errors
def list_(
    filter: Annotated[
        str, typer.Option("--filter", help='AIP-160 filter, e.g. display_name="churn" AND labels.team=ml')
    ] = "",
    order_by: Annotated[
        str, typer.Option("--order-by", help="display_name, create_time or update_time, optionally desc.")
    ] = "",
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Show at most this many models.")
    ] = None,
    page_size: Annotated[int, typer.Option("--page-size", min=0, help="Models per request.")] = 0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """List the models of a project and region (each as its default version)."""
    location = require_region(region)
    models: list[dict[str, Any]] = []
    with make_client(endpoint, api_key) as client:
        size = page_size or (min(limit, 1000) if limit else 0)
        for model in client.list_models(f"projects/{project}/locations/{location}", filter, order_by, size):
            models.append(model)
            if limit is not None and len(models) >= limit:
                break
    if format != OutputFormat.human:
        print_data(models, format)
    else:
        print_model_table(models)


@app.command()
@handle_errors
def describe(
    model: ModelArg,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Show a model version (MODEL@VERSION, MODEL@ALIAS, or the default version)."""
    name = model_name(model, project, region)
    with make_client(endpoint, api_key) as client:
        found = client.get_model(name)
    # gcloud's describe prints YAML; json stays available for scripts.
    print_data(found, OutputFormat.json if format == OutputFormat.json else OutputFormat.yaml)


@app.command("list-versions")
@handle_errors
def list_versions(
    model: ModelArg,
    filter: Annotated[str, typer.Option("--filter", help="AIP-160 filter over the versions.")] = "",
    order_by: Annotated[
        str, typer.Option("--order-by", help="display_name, create_time or update_time.")
    ] = "",
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """List the versions of a model."""
    name = model_name(model, project, region)
    with make_client(endpoint, api_key) as client:
        versions = list(client.list_model_versions(name, filter, order_by))
    if format != OutputFormat.human:
        print_data(versions, format)
    else:
        print_model_table(versions, versions=True)


@app.command()
@handle_errors
def delete(
    model: ModelArg,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.0, help="Seconds to wait for the deletion.")
    ] = 300.0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Delete a model with all its versions and their registry copies."""
    name = model_name(model, project, region)
    if "@" in name:
        raise FlagError(
            _ARG, f"[{model}] names a version; use `trainworks models delete-version` for one version"
        )
    with make_client(endpoint, api_key) as client:
        op = operation_done(client, client.delete_model(name), timeout)
    if format != OutputFormat.human:
        print_data(op, format)
    exit_unless_succeeded(op, f"delete model [{name}]", timeout)
    if format == OutputFormat.human:
        print_status(f"Deleted model [{name}].")


@app.command("delete-version")
@handle_errors
def delete_version(
    model: ModelArg,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.0, help="Seconds to wait for the deletion.")
    ] = 300.0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Delete one version (MODEL@VERSION or MODEL@ALIAS); the default version only when it is the last."""
    name = model_name(model, project, region)
    if "@" not in name:
        raise FlagError(_ARG, f"[{model}] names no version: give MODEL@VERSION_ID or MODEL@ALIAS")
    with make_client(endpoint, api_key) as client:
        op = operation_done(client, client.delete_model_version(name), timeout)
    if format != OutputFormat.human:
        print_data(op, format)
    exit_unless_succeeded(op, f"delete model version [{name}]", timeout)
    if format == OutputFormat.human:
        print_status(f"Deleted model version [{name}].")


__all__ = ["app", "build_upload", "model_name", "print_model_table"]
