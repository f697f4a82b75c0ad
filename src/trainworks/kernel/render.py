"""How every CLI command shows things, whatever the kind: JSON or YAML on stdout for scripts, status lines on
stderr, and for humans rich `Label: value` summaries and tables. What a kind shows lives in that kind."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

import yaml


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


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def run_time(resource: dict[str, Any]) -> str:
    """startTime to endTime as `1h02m03s` / `4m05s` / `6.0s`; empty until the resource has ended."""
    start = _parse_time(resource.get("startTime"))
    if start is None:
        return ""
    end = _parse_time(resource.get("endTime"))
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


def error_text(error: dict[str, Any]) -> str:
    """A google.rpc Status as red `code N: message` markup."""
    from rich.markup import escape

    return f"[red]code {error.get('code', 0)}: {escape(str(error.get('message', '')))}[/red]"


def labels_text(labels: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))


def header_rows(
    resource: dict[str, Any],
    state_styles: Mapping[str, str],
    unspecified_state: str,
    after_created: list[tuple[str, str]] | None = None,
) -> list[tuple[str, str]]:
    """The `Label: value` rows a summary starts with: name, state, times, run time, error, labels."""
    from rich.markup import escape

    rows: list[tuple[str, str]] = [
        ("Name", escape(resource.get("name", ""))),
        ("Display name", escape(resource.get("displayName", ""))),
        ("State", styled(resource.get("state", unspecified_state), state_styles)),
        ("Created", resource.get("createTime", "")),
    ]
    rows += after_created or []
    for label, key in (("Started", "startTime"), ("Ended", "endTime"), ("Updated", "updateTime")):
        if resource.get(key):
            rows.append((label, resource[key]))
    if run_time(resource):
        rows.append(("Run time", run_time(resource)))
    if resource.get("error"):
        rows.append(("Error", error_text(resource["error"])))
    if resource.get("labels"):
        rows.append(("Labels", escape(labels_text(resource["labels"]))))
    return rows


def machine_text(machine: dict[str, Any], times: str = "×") -> str:
    """A machineSpec as `n1-standard-4`, with ` + 2 × NVIDIA_TESLA_T4` when it has accelerators."""
    text = str(machine.get("machineType", "?"))
    if machine.get("acceleratorType"):
        text += f" + {machine.get('acceleratorCount', 1)} {times} {machine['acceleratorType']}"
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
CellColumn = tuple[Column, Callable[[dict[str, Any]], str]]


def print_resource_table(
    resources: Sequence[dict[str, Any]],
    id_header: str,
    state_styles: Mapping[str, str],
    more: Sequence[CellColumn],
    state: Callable[[dict[str, Any]], str] | None = None,
) -> None:
    """Resources as a table like `gcloud ... list`: ID, display name and state (`state`, else the `state`
    field) coloured by `state_styles`, then the `more` columns."""
    from rich.markup import escape

    columns = [Column(id_header), Column("DISPLAY_NAME", fold=True), Column("STATE")]
    rows = [
        (
            resource_id(resource.get("name", "")),
            escape(resource.get("displayName", "")),
            styled(state(resource) if state else resource.get("state", ""), state_styles),
            *(cell(resource) for _, cell in more),
        )
        for resource in resources
    ]
    print_table([*columns, *(column for column, _ in more)], rows)


#: The CREATE_TIME column of a resource table.
CREATE_TIME: CellColumn = (Column("CREATE_TIME"), lambda resource: resource.get("createTime", ""))


__all__ = [
    "CREATE_TIME",
    "CellColumn",
    "Column",
    "OutputFormat",
    "console",
    "error_text",
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
    "styled",
    "table",
]
