"""`trainworks datasets`: create, import into, list, describe and delete managed datasets, modelled on
`gcloud ai datasets`.

`create --csv` makes a tabular dataset from CSV objects (same header in each; `*` wildcards allowed);
`create --jsonl` makes a text dataset and imports the JSONL objects into it (`--schema` picks image or video
instead). The common options, client and error handling are in `kernel.cli`.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from trainworks.kernel import cli
from trainworks.kernel.cli import Options, command
from trainworks.kernel.flags import parse_dict
from trainworks.kernel.longrunning import Operation
from trainworks.kernel.names import FlagError, NameSpec, parse_name
from trainworks.kernel.render import labels_text, print_data, print_status, resource_id, time_text
from trainworks.kinds.datasets.client import DatasetsClient
from trainworks.kinds.datasets.wire import Dataset

app = cli.group("datasets", "Create and manage datasets for training pipelines (like `gcloud ai datasets`).")

DATASETS = NameSpec("datasets", "DATASET", "Dataset", "dataset", "Dataset")
DatasetArg = Annotated[str, cli.name_argument(DATASETS)]
SCHEMA_PREFIX = "gs://google-cloud-aiplatform/schema/dataset/metadata/"
NON_TABULAR = ("text", "image", "video")


def dataset_name(value: str, project: str, region: str | None) -> str:
    """A full Dataset name, from a name or a bare ID (expanded with --project and --region)."""
    return parse_name(DATASETS, value, project, region)


def split_uris(text: str | None) -> list[str]:
    return [u.strip() for u in (text or "").split(",") if u.strip()]


def _gcs_imports(jsonl: str) -> list[dict[str, Any]]:
    """The ImportDataConfigs of a --jsonl value: one gcsSource holding all its objects."""
    return [{"gcsSource": {"uris": split_uris(jsonl)}}]


# ------------------------------------------------------------------ operations
def _finish(client: DatasetsClient, op: Operation, what: str) -> Operation:
    """The finished operation (waiting up to 300 s if it is not done yet); its error exits 1."""
    op = cli.operation_done(client, op, 300.0)
    cli.exit_unless_succeeded(op, what, 300.0)
    return op


# ------------------------------------------------------------------ human output
def print_dataset(dataset: Dataset) -> None:
    rows = [
        ("Name", dataset.name),
        ("Display name", dataset.display_name),
        ("Schema", dataset.metadata_schema_uri.removeprefix(SCHEMA_PREFIX)),
        ("Items", str(dataset.data_item_count)),
        ("Created", time_text(dataset.create_time)),
        ("Updated", time_text(dataset.update_time)),
    ]
    if dataset.description:
        rows.append(("Description", dataset.description))
    if dataset.labels:
        rows.append(("Labels", labels_text(dataset.labels)))
    sources = ((dataset.metadata or {}).get("inputConfig") or {}).get("gcsSource") or {}
    if sources.get("uri"):
        rows.append(("Sources", ", ".join(sources["uri"])))
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        typer.echo(f"{label + ':':<{width + 1}} {value}")


def print_dataset_table(datasets: list[Dataset]) -> None:
    if not datasets:
        typer.echo("Listed 0 items.")
        return
    table = [("DATASET_ID", "DISPLAY_NAME", "SCHEMA", "ITEMS", "CREATE_TIME")]
    for d in datasets:
        table.append(
            (
                resource_id(d.name),
                d.display_name,
                d.metadata_schema_uri.removeprefix(SCHEMA_PREFIX).removesuffix(".yaml"),
                str(d.data_item_count),
                time_text(d.create_time),
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


# ------------------------------------------------------------------ commands
@command(app)
def create(
    display_name: Annotated[str, typer.Option("--display-name", help="Display name of the dataset.")],
    csv: Annotated[
        str | None, typer.Option("--csv", help="Comma-separated gs:// CSV objects (tabular dataset).")
    ] = None,
    jsonl: Annotated[
        str | None, typer.Option("--jsonl", help="Comma-separated gs:// JSONL objects (non-tabular dataset).")
    ] = None,
    schema: Annotated[
        str, typer.Option("--schema", help="Kind of a --jsonl dataset: text, image or video.")
    ] = "text",
    description: Annotated[str, typer.Option("--description", help="Description.")] = "",
    labels: Annotated[str | None, typer.Option("--labels", help="KEY=VALUE,... labels.")] = None,
    *,
    opts: Options,
) -> None:
    """Create a dataset from CSV (tabular) or JSONL (text, image, video) objects in a bucket."""
    parent = opts.parent()
    if bool(csv) == bool(jsonl):
        raise FlagError("--csv", "give exactly one of --csv (tabular) and --jsonl (non-tabular)")
    if jsonl and schema not in NON_TABULAR:
        raise FlagError("--schema", f"must be one of {', '.join(NON_TABULAR)}")
    body: dict[str, Any] = {"displayName": display_name}
    if description:
        body["description"] = description
    if labels:
        body["labels"] = parse_dict(labels, "--labels")
    if csv:
        body["metadataSchemaUri"] = SCHEMA_PREFIX + "tabular_1.0.0.yaml"
        body["metadata"] = {"inputConfig": {"gcsSource": {"uri": split_uris(csv)}}}
    else:
        body["metadataSchemaUri"] = SCHEMA_PREFIX + f"{schema}_1.0.0.yaml"
    with opts.client(DatasetsClient) as client:
        op = _finish(client, client.create_dataset(parent, body), "creating the dataset")
        dataset = op.result(Dataset)
        assert dataset is not None  # a create that succeeded returns its Dataset
        if jsonl:
            op = client.import_data(dataset.name, _gcs_imports(jsonl))
            _finish(client, op, "importing the items")
            dataset = client.get_dataset(dataset.name)
    if not opts.human:
        print_data(dataset, opts.format)
        return
    print_status(f"Created Dataset [{dataset.name}].")
    print_dataset(dataset)


@command(app, "import")
def import_(
    dataset: DatasetArg,
    jsonl: Annotated[str, typer.Option("--jsonl", help="Comma-separated gs:// JSONL objects to add.")],
    *,
    opts: Options,
) -> None:
    """Add the items of JSONL objects to a non-tabular dataset."""
    name = opts.name(DATASETS, dataset)
    with opts.client(DatasetsClient) as client:
        _finish(client, client.import_data(name, _gcs_imports(jsonl)), f"importing into Dataset [{name}]")
        result = client.get_dataset(name)
    if not opts.human:
        print_data(result, opts.format)
        return
    print_status(f"Imported into Dataset [{result.name}]: it has {result.data_item_count} items.")


COMMANDS = cli.ResourceCommands(app, DATASETS, DatasetArg, DatasetsClient)
COMMANDS.list_(
    "List datasets, newest first unless --sort-by says otherwise.",
    cli.ListFlags(filter='AIP-160 filter, e.g. labels.team=ml or display_name:"iris*".'),
    lambda client, query: client.list_datasets(query.parent, query.filter, query.size),
    print_dataset_table,
)
COMMANDS.describe("Show a dataset.", DatasetsClient.get_dataset, print_dataset)


@command(app)
def delete(
    dataset: DatasetArg,
    quiet: cli.QuietOpt = False,
    *,
    opts: Options,
) -> None:
    """Delete a dataset and the server's copy of its data."""
    name = opts.name(DATASETS, dataset)
    cli.confirm_deletion("Dataset", name, quiet)
    with opts.client(DatasetsClient) as client:
        op = _finish(client, client.delete_dataset(name), f"deleting Dataset [{name}]")
    opts.show(op, lambda _op: print_status(f"Deleted Dataset [{cli.server_name(op.name, name)}]."))


__all__ = ["DATASETS", "app", "dataset_name", "split_uris"]
