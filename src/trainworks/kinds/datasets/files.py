"""The files of managed datasets: reading CSV and JSONL sources from buckets, the server's own copy of the
rows under `<home>/datasets/<id>/`, and the sharded export files of training pipelines.

The copy is written to a temp file and renamed into place, so a dataset's data file is always complete; a
dataset keeps its rows when the bucket changes later.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainworks.storage.gcs import ObjectStore, StoragePathError, parse_gcs_uri

SHARD_ROWS = 5000  # rows (or items) per export shard
MAX_SOURCES = 1000  # objects one source list may expand to


@dataclass(frozen=True)
class SourceError(Exception):
    """A source that cannot be read; `field` is the request field that named it."""

    field: str
    message: str

    def __str__(self) -> str:
        return self.message


# ------------------------------------------------------------------ sources
def expand(objects: ObjectStore, uri: str, field: str) -> list[str]:
    """The objects a source URI names: itself, or with `*` (one path segment) / `**` (any depth) the
    matching objects in name order."""
    try:
        path = parse_gcs_uri(uri)
    except StoragePathError as exc:
        raise SourceError(field, str(exc)) from None
    if not path.key or path.key.endswith("/"):
        raise SourceError(field, f"{uri!r} names a folder, not an object")
    if "*" not in path.key:
        return [uri]
    if objects.is_local and objects.bucket_root is not None:
        base = (objects.bucket_root / path.bucket).resolve()
        found = sorted(p for p in base.glob(path.key) if p.is_file())
        matches = [f"gs://{path.bucket}/{p.relative_to(base).as_posix()}" for p in found]
    else:
        matches = sorted("gs://" + m for m in objects.fs.glob(f"{path.bucket}/{path.key}"))
    if not matches:
        raise SourceError(field, f"no objects match {uri!r}")
    if len(matches) > MAX_SOURCES:
        raise SourceError(field, f"{uri!r} matches {len(matches)} objects; at most {MAX_SOURCES} are allowed")
    return matches


def _read_text(objects: ObjectStore, uri: str, field: str) -> str:
    try:
        data = objects.read_bytes(uri)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise SourceError(field, f"the object {uri} does not exist") from None
    except StoragePathError as exc:
        raise SourceError(field, str(exc)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(field, f"{uri} is not UTF-8 text (byte {exc.start})") from None


def read_csv_sources(
    objects: ObjectStore, uris: Sequence[str], field: str
) -> tuple[list[str], list[list[str]]]:
    """The header and rows of CSV sources; every source must have the same header (its first row)."""
    if not uris:
        raise SourceError(field, "Required field is not set: name at least one CSV object")
    columns: list[str] | None = None
    first_source = ""
    rows: list[list[str]] = []
    for i, pattern in enumerate(uris):
        where = f"{field}[{i}]"
        for uri in expand(objects, pattern, where):
            header, body = _parse_csv(_read_text(objects, uri, where), uri, where)
            if columns is None:
                columns, first_source = header, uri
            elif header != columns:
                raise SourceError(
                    where,
                    f"the header of {uri} ({', '.join(header)}) differs from the header of {first_source} "
                    f"({', '.join(columns)}); every source must have the same columns",
                )
            rows += body
    assert columns is not None
    return columns, rows


def _parse_csv(text: str, uri: str, field: str) -> tuple[list[str], list[list[str]]]:
    try:
        records = [r for r in csv.reader(io.StringIO(text, newline="")) if r]
    except csv.Error as exc:
        raise SourceError(field, f"{uri} is not valid CSV: {exc}") from None
    if not records:
        raise SourceError(field, f"{uri} is empty: a CSV source needs a header row")
    header = [name.strip() for name in records[0]]
    if any(not name for name in header):
        raise SourceError(field, f"{uri}: the header row has an empty column name")
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        raise SourceError(field, f"{uri}: the header names {', '.join(duplicates)} more than once")
    for number, record in enumerate(records[1:], start=2):
        if len(record) != len(header):
            raise SourceError(
                field, f"{uri}: row {number} has {len(record)} fields, the header has {len(header)}"
            )
    return header, records[1:]


def read_jsonl_sources(
    objects: ObjectStore, uris: Sequence[str], field: str, labels: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The items of JSONL sources, one JSON object per non-blank line. `labels` (ImportDataConfig's
    dataItemLabels) go into each item's `dataItemResourceLabels`; an item's own labels win."""
    if not uris:
        raise SourceError(field, "Required field is not set: name at least one JSONL object")
    items: list[dict[str, Any]] = []
    for i, pattern in enumerate(uris):
        where = f"{field}[{i}]"
        for uri in expand(objects, pattern, where):
            for number, line in enumerate(_read_text(objects, uri, where).splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except ValueError as exc:
                    raise SourceError(where, f"{uri}: line {number} is not JSON ({exc})") from None
                if not isinstance(item, dict):
                    raise SourceError(where, f"{uri}: line {number} is not a JSON object")
                if labels:
                    own = item.get("dataItemResourceLabels")
                    item["dataItemResourceLabels"] = {**labels, **(own if isinstance(own, dict) else {})}
                items.append(item)
    if not items:
        raise SourceError(field, "the sources hold no items")
    return items


# ------------------------------------------------------------------ the server's copy
def csv_text(columns: Sequence[str] | None, rows: Sequence[Sequence[str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if columns is not None:
        writer.writerow(columns)
    writer.writerows(rows)
    return out.getvalue()


def jsonl_text(items: Sequence[dict[str, Any]]) -> str:
    return "".join(json.dumps(item, ensure_ascii=False, sort_keys=True) + "\n" for item in items)


def write_atomically(path: Path, text: str) -> None:
    """Write a temp file next to `path` and rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def store_data(
    directory: Path,
    data_format: str,
    columns: Sequence[str] | None,
    rows: Sequence[Any],
) -> Path:
    """A new data file of the dataset in `directory` (a fresh name each time, so a reader of the previous
    one is never disturbed); returns its path."""
    name = f"data-{secrets.token_hex(6)}.{data_format}"
    text = csv_text(columns, rows) if data_format == "csv" else jsonl_text(rows)
    write_atomically(directory / name, text)
    return directory / name


def load_table(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        records = list(csv.reader(handle))
    return records[0], records[1:]


def load_items(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


# ------------------------------------------------------------------ exports
def shard_names(set_name: str, count: int, data_format: str) -> list[str]:
    shards = max(1, math.ceil(count / SHARD_ROWS))
    return [f"{set_name}-{i:05d}-of-{shards:05d}.{data_format}" for i in range(shards)]


def write_export_set(
    objects: ObjectStore,
    directory_uri: str,
    set_name: str,
    data_format: str,
    columns: Sequence[str] | None,
    rows: Sequence[Any],
) -> list[str]:
    """The shards of one set (at least one, even when empty; every CSV shard has the header); returns
    their URIs. The same rows give the same bytes, so writing again is harmless."""
    uris: list[str] = []
    for i, name in enumerate(shard_names(set_name, len(rows), data_format)):
        chunk = rows[i * SHARD_ROWS : (i + 1) * SHARD_ROWS]
        text = csv_text(columns, chunk) if data_format == "csv" else jsonl_text(chunk)
        uri = f"{directory_uri}/{name}"
        if objects.is_local:
            write_atomically(objects.local_path(uri), text)
        else:
            objects.write_bytes(uri, text.encode())
        uris.append(uri)
    return uris
