"""How every CLI command shows things, whatever the kind: JSON or YAML on stdout for scripts, status lines on
stderr, and for humans rich `Label: value` summaries and tables. What a kind shows lives in that kind.

The client's typed results are printed for scripts as their wire JSON (`to_wire()`: what the server sent) and
read by attribute for humans; timestamps and durations show as on the wire."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal, Protocol, TypeGuard, TypeVar

import yaml

from trainworks.kernel.status import Status
from trainworks.kernel.wire import WireModel, format_duration, format_timestamp


class OutputFormat(StrEnum):
    human = "human"
    json = "json"
    yaml = "yaml"


def print_status(message: str) -> None:
    """Progress and hints go to stderr, like gcloud, so stdout stays the command's result."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def wire_json(data: Any) -> Any:
    """`data` as JSON: a wire model (or a list of them) as its `to_wire()`, anything else as it is."""
    if isinstance(data, WireModel):
        return data.to_wire()
    if isinstance(data, list):
        return [wire_json(item) for item in data]
    return data


def print_data(data: Any, fmt: OutputFormat) -> None:
    """A result for scripts (`wire_json`): YAML for `--format=yaml`, indented JSON otherwise."""
    data = wire_json(data)
    if fmt == OutputFormat.yaml:
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    sys.stdout.flush()


# ====================================================================== human output (rich)
def console(stderr: bool = False) -> Any:
    """A rich console on stdout (or stderr)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Not a terminal: $COLUMNS wide, else 200, so piped output is not wrapped at 80 columns.
    width = None if stream.isatty() else int(os.environ.get("COLUMNS", "0") or 0) or 200
    return Console(file=stream, width=width, highlight=False, soft_wrap=False)


def resource_id(name: str) -> str:
    """The last segment of a resource name: its ID."""
    return name.rsplit("/", 1)[-1]


def styled(state: str, styles: Mapping[str, str]) -> str:
    """`state` in rich markup, coloured as `styles` says (plain when it names no style)."""
    style = styles.get(state)
    return f"[{style}]{state}[/{style}]" if style else state


def time_text(value: datetime | None) -> str:
    """A timestamp as the wire has it (RFC 3339, UTC); empty when unset."""
    return format_timestamp(value) if value is not None else ""


def duration_text(value: timedelta | None) -> str:
    """A duration as the wire has it (`3600s`); empty when unset."""
    return format_duration(value) if value is not None else ""


class Resource(Protocol):
    """What a summary's first rows and a table's first columns read of a resource (a job, a persistent
    resource...)."""

    name: str
    display_name: str
    state: Any  # its kind's ProtoEnum
    create_time: datetime | None
    start_time: datetime | None
    update_time: datetime | None
    error: Status | None
    labels: dict[str, str]


def run_time(start: datetime | None, end: datetime | None) -> str:
    """startTime to endTime as `1h02m03s` / `4m05s` / `6.0s`; empty until the resource has ended."""
    if start is None or end is None:
        return ""
    seconds = max((end - start).total_seconds(), 0.0)
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{seconds:.1f}s"


def error_text(error: Status) -> str:
    """A google.rpc Status as red `code N: message` markup."""
    from rich.markup import escape

    return f"[red]code {error.code}: {escape(error.message)}[/red]"


M = TypeVar("M", bound=WireModel)


def has_fields(message: M | None) -> TypeGuard[M]:
    """Whether a message is there with a field in it: `{}` (an empty message) shows as nothing, like none."""
    return message is not None and bool(message.model_fields_set)


def text_rows(*rows: tuple[str, str]) -> list[tuple[str, str]]:
    """`Label: value` rows of plain text (escaped), leaving out those whose value is empty."""
    from rich.markup import escape

    return [(label, escape(value)) for label, value in rows if value]


def labels_text(labels: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))


def header_rows(
    resource: Resource,
    state_styles: Mapping[str, str],
    after_created: list[tuple[str, str]] | None = None,
    end_time: datetime | None = None,
) -> list[tuple[str, str]]:
    """The `Label: value` rows a summary starts with: name, state, times (`end_time` for a resource that
    ends), run time, error, labels."""
    from rich.markup import escape

    rows: list[tuple[str, str]] = [
        ("Name", escape(resource.name)),
        ("Display name", escape(resource.display_name)),
        ("State", styled(resource.state.name, state_styles)),
        ("Created", time_text(resource.create_time)),
    ]
    rows += after_created or []
    for label, value in (
        ("Started", resource.start_time),
        ("Ended", end_time),
        ("Updated", resource.update_time),
    ):
        if value is not None:
            rows.append((label, time_text(value)))
    if run_time(resource.start_time, end_time):
        rows.append(("Run time", run_time(resource.start_time, end_time)))
    if resource.error is not None:
        rows.append(("Error", error_text(resource.error)))
    if resource.labels:
        rows.append(("Labels", escape(labels_text(resource.labels))))
    return rows


class Machine(Protocol):
    """A MachineSpec."""

    machine_type: str
    accelerator_type: Any  # AcceleratorType
    accelerator_count: int


def machine_text(machine: Machine | None, times: str = "×") -> str:
    """A machineSpec as `n1-standard-4`, with ` + 2 × NVIDIA_TESLA_T4` when it has accelerators."""
    if machine is None:
        return "?"
    text = machine.machine_type or "?"
    if machine.accelerator_type:
        text += f" + {machine.accelerator_count or 1} {times} {machine.accelerator_type.name}"
    return text


def print_rows(rows: Sequence[tuple[str, str]], out: Any = None, markup: bool | None = None) -> None:
    """Rows as aligned, bold `Label:` lines (rich markup in the values)."""
    out = out or console()
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        out.print(f"[bold]{label + ':':<{width}}[/bold]{value}", soft_wrap=True, markup=markup)


def print_lines(title: str, lines: Sequence[str], out: Any = None) -> None:
    """A bold `Title:` line, then each line indented (plain text, escaped)."""
    from rich.markup import escape

    out = out or console()
    out.print(f"[bold]{title}:[/bold]")
    for line in lines:
        out.print("  " + escape(line), soft_wrap=True)


@dataclass(frozen=True)
class Column:
    """A table column: kept on one line, or folded when `fold` (long free text)."""

    header: str
    fold: bool = False
    right: bool = False


def table(columns: Sequence[Column]) -> Any:
    """A borderless rich table with bold headers, like `gcloud ... list`."""
    from rich.table import Table

    result = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        justify: Literal["right", "left"] = "right" if column.right else "left"
        if column.fold:
            result.add_column(column.header, overflow="fold", justify=justify)
        else:
            result.add_column(column.header, no_wrap=True, justify=justify)
    return result


def print_table(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], empty: str = "Listed 0 items.", out: Any = None
) -> None:
    """Rows as a table, or the `empty` line when there is none."""
    out = out or console()
    if not rows:
        out.print(empty)
        return
    result = table(columns)
    for row in rows:
        result.add_row(*row)
    out.print(result)


#: A column of `print_resource_table` and what its cell shows of a resource (rich markup).
CellColumn = tuple[Column, Callable[[Any], str]]


class Listed(Protocol):
    """What the first columns of a resource table read."""

    name: str
    display_name: str


def print_resource_table(
    resources: Sequence[Listed],
    id_header: str,
    state_styles: Mapping[str, str],
    more: Sequence[CellColumn],
    state: Callable[[Any], str],
) -> None:
    """Resources as a table like `gcloud ... list`: ID, display name and `state` coloured by
    `state_styles`, then the `more` columns."""
    from rich.markup import escape

    columns = [Column(id_header), Column("DISPLAY_NAME", fold=True), Column("STATE")]
    rows = [
        (
            resource_id(resource.name),
            escape(resource.display_name),
            styled(state(resource), state_styles),
            *(cell(resource) for _, cell in more),
        )
        for resource in resources
    ]
    print_table([*columns, *(column for column, _ in more)], rows)


def enum_text(value: Any) -> str:
    """The name of a ProtoEnum value; empty when unspecified (0), which the wire leaves out."""
    return str(value.name) if value else ""


def state_name(resource: Any) -> str:
    """The name of a resource's `state` (`enum_text`): the STATE column of most tables."""
    return enum_text(resource.state)


#: The CREATE_TIME column of a resource table.
CREATE_TIME: CellColumn = (Column("CREATE_TIME"), lambda resource: time_text(resource.create_time))


__all__ = [
    "CREATE_TIME",
    "CellColumn",
    "Column",
    "OutputFormat",
    "console",
    "duration_text",
    "enum_text",
    "error_text",
    "has_fields",
    "header_rows",
    "labels_text",
    "machine_text",
    "print_data",
    "print_lines",
    "print_resource_table",
    "print_rows",
    "print_status",
    "print_table",
    "resource_id",
    "run_time",
    "state_name",
    "styled",
    "table",
    "text_rows",
    "time_text",
    "wire_json",
]
