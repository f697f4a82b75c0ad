"""How every CLI command shows things, whatever the kind: JSON or YAML on stdout for scripts, status lines on
stderr, and for humans rich `Label: value` summaries and tables. What a kind shows lives in that kind.

The client's typed results are printed for scripts as their wire JSON (`to_wire()`: what the server sent) and
read by attribute for humans; timestamps and durations show as on the wire."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal, Protocol, TypeGuard, TypeVar

import yaml

from trainworks.kernel.status import Status
from trainworks.kernel.wire import WireModel, format_duration, format_timestamp

T = TypeVar("T")


#: The --format names: `human` (rich summaries and tables) and gcloud's. `default` is gcloud's name for human.
FORMAT_NAMES = ("human", "json", "yaml", "value", "table", "csv")


@dataclass(frozen=True)
class Key:
    """One resource key of a format's projection: `a.b[0].c`, optionally `.basename()` and `:label=L`."""

    text: str  # as written, without its attributes: a csv header
    path: tuple[str | int, ...]
    transform: str = ""  # "basename" or "len"
    label: str = ""

    @property
    def header(self) -> str:
        """The table header: the label, else the last name of the path in UPPER_SNAKE (`createTime` ->
        `CREATE_TIME`), as gcloud's table() heads its columns."""
        if self.label:
            return self.label
        last = next((part for part in reversed(self.path) if isinstance(part, str)), self.text)
        return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", last).upper()

    def value(self, record: Any) -> Any:
        """What this key reaches in a JSON record (None when it is not there), transformed."""
        value = lookup(record, self.path)
        if self.transform == "basename" and isinstance(value, str):
            return value.rstrip("/").rsplit("/", 1)[-1]
        if self.transform == "len":
            return len(value) if isinstance(value, list | dict | str) else 0
        return value


@dataclass(frozen=True)
class OutputFormat:
    """A --format: `NAME[ATTRIBUTES](KEY, ...)` as gcloud reads it (`parse_format`); `human` by default."""

    name: str = "human"
    keys: tuple[Key, ...] = ()
    heading: bool = True  # [no-heading] drops the header line of table() and csv()
    separator: str | None = None  # [separator=S]: between the columns of value() and csv()

    human: ClassVar[OutputFormat]
    json: ClassVar[OutputFormat]
    yaml: ClassVar[OutputFormat]

    def __str__(self) -> str:  # typer shows the default as this
        return self.name


OutputFormat.human = OutputFormat("human")
OutputFormat.json = OutputFormat("json")
OutputFormat.yaml = OutputFormat("yaml")


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


class FormatError(ValueError):
    """A --format or --sort-by that cannot be read."""


def _split_top(text: str, sep: str = ",") -> list[str]:
    """`text` split on `sep` outside parentheses, brackets and quotes."""
    parts, depth, quote, current = [], 0, "", ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == sep and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += char
    parts.append(current)
    return [part.strip() for part in parts if part.strip()]


_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)((?:\[-?\d+\])*)$")
_TRANSFORMS = {"basename()": "basename", "len()": "len"}


def parse_key(text: str) -> Key:
    """A resource key: dotted names with `[N]` list indexes, an optional `.basename()`/`.len()` transform
    and `:label=L` (other attributes, such as gcloud's `:sort=1`, are ignored)."""
    body, *attributes = text.split(":")
    label = ""
    for attribute in attributes:
        name, _, value = attribute.partition("=")
        if name.strip() == "label":
            label = value.strip().strip("'\"")
    parts = body.strip().split(".")
    transform = ""
    if len(parts) > 1 and parts[-1] in _TRANSFORMS:
        transform = _TRANSFORMS[parts.pop()]
    path: list[str | int] = []
    for part in parts:
        match = _SEGMENT.match(part)
        if not match:
            raise FormatError(f"bad resource key [{text}]: use names such as jobSpec.workerPoolSpecs[0]")
        path.append(match.group(1))
        path += [int(index) for index in re.findall(r"-?\d+", match.group(2))]
    return Key(".".join(parts), tuple(path), transform, label)


_FORMAT = re.compile(r"^\s*([A-Za-z]+)\s*(?:\[(.*?)\])?\s*(?:\((.*)\))?\s*(?:\[(.*?)\])?\s*$", re.S)


def parse_format(text: str) -> OutputFormat:
    """A --format value: `human`/`default`, `json`, `yaml`, or `value(KEYS)`, `table(KEYS)`, `csv(KEYS)`,
    each with optional `[no-heading]` / `[separator=S]` attributes (json and yaml may take KEYS too)."""
    match = _FORMAT.match(text)
    if not match:
        raise FormatError(f"bad format [{text}]: use NAME[ATTRIBUTES](KEY,...), e.g. value(name)")
    name = match.group(1).lower()
    name = "human" if name == "default" else name
    if name not in FORMAT_NAMES:
        raise FormatError(f"unknown format [{name}]: use one of {', '.join(FORMAT_NAMES)}")
    keys = tuple(parse_key(key) for key in _split_top(match.group(3) or ""))
    if name in ("value", "table", "csv") and not keys:
        raise FormatError(f"{name}() needs the keys to show, e.g. {name}(name,state)")
    if name == "human" and keys:
        raise FormatError("the human format takes no keys: use table(...) to choose columns")
    heading, separator = True, None
    for attribute in _split_top(",".join(filter(None, (match.group(2), match.group(4))))):
        attr, _, value = attribute.partition("=")
        if attr.strip() == "no-heading":
            heading = False
        elif attr.strip() == "separator":
            separator = value.strip().strip("'\"").encode().decode("unicode_escape")
    return OutputFormat(name, keys, heading, separator)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def lookup(record: Any, path: Sequence[str | int]) -> Any:
    """The value at `path` in a JSON record; None when it is not there. A name matches its key as
    written or in camelCase (`create_time` finds `createTime`), as gcloud's keys do."""
    value = record
    for part in path:
        if isinstance(part, int):
            if not isinstance(value, list) or not -len(value) <= part < len(value):
                return None
            value = value[part]
        elif isinstance(value, dict):
            value = value.get(part, value.get(_camel(part)))
        else:
            return None
    return value


def cell_text(value: Any) -> str:
    """A value in value()/table()/csv(): lists joined by `;`, maps as `k=v;...`, nothing as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, list):
        return ";".join(cell_text(item) for item in value)
    if isinstance(value, dict):
        return ";".join(f"{k}={cell_text(v)}" for k, v in value.items())
    return str(value)


def _project(record: Any, keys: Sequence[Key]) -> Any:
    """Only `keys` of a record, nested as in the record (json(...) and yaml(...))."""
    out: dict[str, Any] = {}
    for key in keys:
        value = key.value(record)
        if value is None:
            continue
        names = [part for part in key.path if isinstance(part, str)] or [key.text]
        target = out
        for name in names[:-1]:
            target = target.setdefault(name, {})
        target[names[-1]] = value
    return out


def _rows(records: list[Any], fmt: OutputFormat) -> list[list[str]]:
    return [[cell_text(key.value(record)) for key in fmt.keys] for record in records]


def format_records(records: list[Any], fmt: OutputFormat) -> str:
    """Records (JSON objects) as value(), table() or csv() text, each line ending in a newline."""
    rows = _rows(records, fmt)
    if fmt.name == "value":
        separator = "\t" if fmt.separator is None else fmt.separator
        return "".join(separator.join(row) + "\n" for row in rows)
    if fmt.name == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, delimiter=fmt.separator or ",", lineterminator="\n")
        if fmt.heading:
            writer.writerow([key.label or key.text for key in fmt.keys])
        writer.writerows(rows)
        return buffer.getvalue()
    if fmt.heading:
        rows.insert(0, [key.header for key in fmt.keys])
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(len(fmt.keys))]
    return "".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in rows
    )


def print_data(data: Any, fmt: OutputFormat) -> None:
    """A result for scripts (`wire_json`): YAML for `--format=yaml`, the keys of value()/table()/csv() (one
    line per item of a list), indented JSON otherwise. json(...) and yaml(...) keep only their keys."""
    data = wire_json(data)
    records = data if isinstance(data, list) else [data]
    if fmt.name in ("value", "table", "csv"):
        sys.stdout.write(format_records(records, fmt))
    else:
        if fmt.keys:
            projected = [_project(record, fmt.keys) for record in records]
            data = projected if isinstance(data, list) else projected[0]
        if fmt.name == "yaml":
            sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
        else:
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
    sys.stdout.flush()


def parse_sort_by(values: Sequence[str]) -> list[tuple[Key, bool]]:
    """--sort-by keys, comma-separated or repeated: (key, descending); `~key` (gcloud) or `key desc`
    (AIP-132 style) sort descending."""
    keys: list[tuple[Key, bool]] = []
    for value in values:
        for part in _split_top(value):
            descending = part.startswith("~")
            words = part.lstrip("~").split()
            if len(words) == 2 and words[1].lower() in ("asc", "desc"):
                descending = words[1].lower() == "desc"
            elif len(words) != 1:
                raise FormatError(f"bad sort key [{part}]: use FIELD or ~FIELD (descending)")
            keys.append((parse_key(words[0]), descending))
    return keys


def sort_records(items: list[T], sort_by: Sequence[tuple[Key, bool]]) -> list[T]:
    """`items` sorted by their wire JSON at each key, the last key first (a stable sort per key); missing
    values sort first, as gcloud's do."""

    def order(value: Any) -> tuple[int, Any]:
        if value is None:
            return (0, "")
        if isinstance(value, bool | int | float):
            return (1, value)
        text = cell_text(value)
        try:
            return (1, float(text))  # int64 fields are strings on the wire
        except ValueError:
            return (2, text)

    result = list(items)
    for key, descending in reversed(sort_by):
        result.sort(key=lambda item: order(key.value(wire_json(item))), reverse=descending)
    return result


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
    """startTime to endTime as `1h02m03s` / `4m05s` / `6.0s`; a started job without an end is still
    running: its run time so far. Empty until it starts."""
    if start is None:
        return ""
    if end is None:
        end = datetime.now(start.tzinfo)
    return elapsed_text(max((end - start).total_seconds(), 0.0))


def elapsed_text(seconds: float) -> str:
    """Seconds as `1h02m03s` / `4m05s` / `6.0s`."""
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
    # A resource that ends (a job) shows its run time, so far while it runs; a persistent resource has none.
    if end_time is not None or hasattr(resource, "end_time"):
        shown = run_time(resource.start_time, end_time)
        if shown:
            rows.append(("Run time", shown + ("" if end_time is not None else " (running)")))
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
    "elapsed_text",
    "FormatError",
    "Key",
    "cell_text",
    "format_records",
    "lookup",
    "parse_format",
    "parse_key",
    "parse_sort_by",
    "sort_records",
    "FORMAT_NAMES",
    "state_name",
    "styled",
    "table",
    "text_rows",
    "time_text",
    "wire_json",
]
