"""Managed dataset rules: create (LRO), import (LRO), get, list, update, delete (LRO), and the export of a
training pipeline's InputDataConfig into sharded training/validation/test files.

The work of create and import (reading the sources, copying the rows into the server's storage) is done
within the request, so their operations are answered done; bad sources are INVALID_ARGUMENT naming the
field. The split rules are in dataset_splits.py, the files in dataset_files.py.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import shutil
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainworks.kernel import listing
from trainworks.kernel.errors import ApiError, FieldViolation, invalid_argument, not_found
from trainworks.kernel.filtering import FilterColumns, FilterError
from trainworks.kernel.ids import new_numeric_id
from trainworks.kernel.list_query import ListQuery, OrderedSlice, order_terms
from trainworks.kernel.names import numeric_id, parent_name
from trainworks.kernel.operations import OperationService, aiplatform_type_url, operation_wire
from trainworks.kernel.projects import Projects
from trainworks.kernel.status import Code
from trainworks.kernel.update_masks import UpdateMaskRules, top_field
from trainworks.kernel.wire import format_timestamp, input_dict, now_utc
from trainworks.kernel.wire_errors import parse_body
from trainworks.kinds.custom_jobs.validation import check_display_name, check_labels
from trainworks.kinds.datasets import files, splits
from trainworks.kinds.datasets.store import DatasetStore
from trainworks.kinds.datasets.wire import (
    SCHEMA_FORMATS,
    SPLIT_FIELDS,
    Dataset,
    ImportDataBody,
    InputDataConfig,
    annotation_type,
    schema_kind,
)
from trainworks.storage.gcs import ObjectStore, StoragePathError, parse_gcs_uri
from trainworks.storage.output_buckets import OutputBuckets
from trainworks.store.tables import DatasetRow, OperationRow

MAX_DESCRIPTION = 4096  # characters; Vertex AI documents no limit, this keeps rows bounded
CONFIG_PATH = "training_pipeline.input_data_config"
_ORDER_COLUMNS = {
    "display_name": DatasetRow.display_name,
    "create_time": DatasetRow.create_time,
    "update_time": DatasetRow.update_time,
}
_MUTABLE = {"display_name", "description", "labels"}
_IMMUTABLE = {"metadata_schema_uri", "metadata", "encryption_spec", "model_reference", "name"}
_OUTPUT = {"data_item_count", "create_time", "update_time", "etag", "satisfies_pzs", "satisfies_pzi"}
_UPDATE_MASK = UpdateMaskRules(
    _MUTABLE, _IMMUTABLE, _OUTPUT, top_field, "Dataset", "display_name, description or labels"
)


def dataset_name(project_number: str, location: str, dataset_id: int) -> str:
    return f"{parent_name(project_number, location)}/datasets/{dataset_id}"


def etag(row: DatasetRow) -> str:
    raw = json.dumps([row.spec, format_timestamp(row.update_time)], sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:20]


def dataset_wire(row: DatasetRow) -> dict[str, Any]:
    """Canonical proto3 JSON of a stored dataset."""
    out: dict[str, Any] = {"name": dataset_name(row.project_number, row.location, row.id)}
    out.update(row.spec)
    if row.item_count:
        out["dataItemCount"] = str(row.item_count)
    out["createTime"] = format_timestamp(row.create_time)
    out["updateTime"] = format_timestamp(row.update_time)
    out["etag"] = etag(row)
    return out


def _typed(name: str, api_version: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"@type": aiplatform_type_url(name, api_version), **(body or {})}


def _done_operation(
    row: DatasetRow, kind: str, metadata_type: str, api_version: str, response: dict[str, Any]
) -> OperationRow:
    """A finished operation, not yet stored: the store records it with the change it reports (the work is
    done within the request, so an operation stored apart from it could be left undone by a crash)."""
    return OperationService.build(
        row.project_number,
        row.location,
        f"datasets/{row.id}",
        kind,
        metadata_type,
        api_version,
        response=response,
    )


def export_stamp(now: datetime) -> str:
    """`YYYY-MM-DDThh:mm:ss.sssZ` in UTC, as Vertex AI names export directories."""
    moment = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{moment.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class DatasetExport:
    """Where a training pipeline's data was exported, and what its replicas are told about it."""

    data_format: str  # csv | jsonl
    directory_uri: str
    env: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataFormat": self.data_format,
            "directoryUri": self.directory_uri,
            "env": dict(self.env),
            "counts": dict(self.counts),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DatasetExport:
        return cls(
            data_format=str(data["dataFormat"]),
            directory_uri=str(data["directoryUri"]),
            env={str(k): str(v) for k, v in data.get("env", {}).items()},
            counts={str(k): int(v) for k, v in data.get("counts", {}).items()},
        )


@dataclass(frozen=True)
class _Plan:
    """A checked InputDataConfig: its dataset, the split to make and where to write."""

    row: DatasetRow
    config: InputDataConfig
    split: str  # one of SPLIT_FIELDS
    output_prefix: str


class DatasetService:
    def __init__(
        self,
        store: DatasetStore,
        projects: Projects,
        objects: ObjectStore,
        data_root: Path,
        output_buckets: OutputBuckets | None = None,  # sources are never read from another project's bucket
    ) -> None:
        self.output_buckets = output_buckets
        self.store = store
        self.projects = projects
        self.objects = objects
        self.data_root = data_root  # <home>/datasets
        self._lock = threading.Lock()  # one data-file change (import, delete) at a time

    # -------------------------------------------------------------- reading
    def find(self, project: str, location: str, dataset_id: str) -> DatasetRow:
        number = self.projects.number(project, location)
        did = numeric_id(dataset_id, "Dataset")
        row = self.store.get(did, number, location)
        if row is None:
            raise not_found(f"Dataset {dataset_name(number, location, did)}")
        return row

    def get(self, project: str, location: str, dataset_id: str, read_mask: str = "") -> dict[str, Any]:
        return listing.apply_read_mask(dataset_wire(self.find(project, location, dataset_id)), read_mask)

    def list(self, project: str, location: str, query: ListQuery) -> dict[str, Any]:
        size = listing.page_size(query.page_size)
        where = _dataset_filter(query.filter)
        order = order_terms(query.order_by, _ORDER_COLUMNS, _bad_order)
        fingerprint = listing.fingerprint(query.filter + "\x00" + query.order_by)
        number = self.projects.number(project, location)
        page_token = query.page_token
        if order:
            offset = (
                listing.read_offset_page_token(
                    page_token, fingerprint, bound=None, issued_for="filter or order"
                )
                if page_token
                else 0
            )
            rows = self.store.ordered_page(number, location, OrderedSlice(where, order, offset, size + 1))
            next_token = listing.offset_page_token(offset + size, fingerprint)
        else:
            after = listing.read_page_token(page_token, fingerprint) if page_token else None
            rows = self.store.page(number, location, where, after, size + 1)
            last = rows[size - 1] if len(rows) > size else None
            next_token = listing.page_token(last.create_time, last.id, fingerprint) if last else ""
        out: dict[str, Any] = {}
        if rows:  # proto3 JSON omits an empty repeated field
            out["datasets"] = [listing.apply_read_mask(dataset_wire(r), query.read_mask) for r in rows[:size]]
        if len(rows) > size:
            out["nextPageToken"] = next_token
        return out

    # -------------------------------------------------------------- create
    def create(self, project: str, location: str, body: Any, api_version: str = "v1") -> dict[str, Any]:
        dataset = parse_body(Dataset, body)
        violations = _check_dataset(dataset)
        if violations:
            raise invalid_argument(violations)
        if self.output_buckets is not None:
            self.output_buckets.admit(project, location, "dataset", body)
        number = self.projects.number(project, location)
        kind = schema_kind(dataset.metadata_schema_uri)
        assert kind is not None
        data_format = SCHEMA_FORMATS[kind]
        sources, where = _metadata_sources(dataset.metadata, data_format)
        columns: list[str] | None = None
        rows: list[Any] = []
        try:
            if data_format == "csv":
                columns, rows = files.read_csv_sources(self.objects, sources, where)
            elif sources:
                rows = files.read_jsonl_sources(self.objects, sources, where)
        except files.SourceError as exc:
            raise invalid_argument([FieldViolation(exc.field, exc.message)]) from None
        dataset_id = new_numeric_id()
        directory = self.data_root / str(dataset_id)
        data_path = files.store_data(directory, data_format, columns, rows) if columns or rows else None
        now = now_utc()
        row = DatasetRow(
            id=dataset_id,
            project_number=number,
            location=location,
            display_name=dataset.display_name,
            metadata_schema_uri=dataset.metadata_schema_uri,
            spec=input_dict(dataset),
            labels=dict(dataset.labels),
            data_format=data_format,
            item_count=len(rows),
            columns=columns,
            data_path=str(data_path) if data_path else None,
            create_time=now,
            update_time=now,
        )
        op = _done_operation(
            row,
            "create_dataset",
            "CreateDatasetOperationMetadata",
            api_version,
            _typed("Dataset", api_version, dataset_wire(row)),
        )
        self.store.insert(row, operation=op)  # together: a crash keeps both or neither
        return operation_wire(op)

    # -------------------------------------------------------------- import
    def import_data(
        self, project: str, location: str, dataset_id: str, body: Any, api_version: str = "v1"
    ) -> dict[str, Any]:
        request = parse_body(ImportDataBody, body)
        row = self.find(project, location, dataset_id)
        if self.output_buckets is not None:
            self.output_buckets.admit(project, location, "", body)
        if row.data_format == "csv":
            raise invalid_argument(
                [
                    FieldViolation(
                        "import_configs",
                        "a tabular dataset takes its CSV sources from metadata.inputConfig at create time; "
                        "import is for non-tabular (JSONL) datasets",
                    )
                ]
            )
        if not request.import_configs:
            raise invalid_argument([FieldViolation("import_configs", "Required field is not set.")])
        items: list[dict[str, Any]] = []
        for i, config in enumerate(request.import_configs):
            where = f"import_configs[{i}]"
            if config.gcs_source is None:
                raise invalid_argument([FieldViolation(f"{where}.gcs_source", "Required field is not set.")])
            # Item labels may carry system keys such as aiplatform.googleapis.com/ml_use: no resource-label
            # character rules here, only non-empty keys.
            if any(not key for key in config.data_item_labels):
                raise invalid_argument(
                    [FieldViolation(f"{where}.data_item_labels", "label keys must not be empty")]
                )
            try:
                items += files.read_jsonl_sources(
                    self.objects,
                    config.gcs_source.uris,
                    f"{where}.gcs_source.uris",
                    dict(config.data_item_labels),
                )
            except files.SourceError as exc:
                raise invalid_argument([FieldViolation(exc.field, exc.message)]) from None
        with self._lock:
            current = self.find(project, location, dataset_id)
            existing = files.load_items(Path(current.data_path)) if current.data_path else []
            path = files.store_data(self.data_root / str(current.id), "jsonl", None, existing + items)
            op = _done_operation(
                current,
                "import_data",
                "ImportDataOperationMetadata",
                api_version,
                _typed("ImportDataResponse", api_version),
            )
            if not self.store.set_fields(
                current.id,
                operation=op,
                data_path=str(path),
                item_count=len(existing) + len(items),
                update_time=now_utc(),
            ):
                raise not_found(
                    f"Dataset {dataset_name(current.project_number, current.location, current.id)}"
                )
            if current.data_path and Path(current.data_path) != path:
                Path(current.data_path).unlink(missing_ok=True)
        return operation_wire(op)

    # -------------------------------------------------------------- update
    def update(
        self, project: str, location: str, dataset_id: str, body: Any, update_mask: str
    ) -> dict[str, Any]:
        paths = _UPDATE_MASK.parse(update_mask)
        dataset = parse_body(Dataset, body)
        row = self.find(project, location, dataset_id)
        if dataset.etag and dataset.etag != etag(row):
            raise ApiError(
                Code.ABORTED,
                f"The etag {dataset.etag!r} does not match the current etag of {dataset_wire(row)['name']}: "
                "the dataset changed; get it again and retry.",
                reason="ABORTED",
            )
        spec = dict(row.spec)
        violations: list[FieldViolation] = []
        values: dict[str, Any] = {}
        if "display_name" in paths:
            violations += check_display_name(dataset.display_name)
            spec["displayName"] = dataset.display_name
            values["display_name"] = dataset.display_name
        if "description" in paths:
            violations += _check_description(dataset.description)
            _set_or_drop(spec, "description", dataset.description)
        if "labels" in paths:
            violations += check_labels(dict(dataset.labels))
            _set_or_drop(spec, "labels", dict(dataset.labels))
            values["labels"] = dict(dataset.labels)
        if violations:
            raise invalid_argument(violations)
        now = now_utc()
        if not self.store.set_fields(
            row.id, expected_update=row.update_time, spec=spec, update_time=now, **values
        ):
            raise ApiError(
                Code.ABORTED, "The dataset changed during the update; try again.", reason="ABORTED"
            )
        updated = self.store.get(row.id, row.project_number, row.location)
        assert updated is not None
        return dataset_wire(updated)

    # -------------------------------------------------------------- delete
    def delete(self, project: str, location: str, dataset_id: str, api_version: str = "v1") -> dict[str, Any]:
        row = self.find(project, location, dataset_id)
        empty = {"@type": "type.googleapis.com/google.protobuf.Empty"}
        op = _done_operation(row, "delete_dataset", "DeleteOperationMetadata", api_version, empty)
        with self._lock:
            if not self.store.remove(row.id, operation=op):  # deleted meanwhile
                raise not_found(f"Dataset {dataset_name(row.project_number, row.location, row.id)}")
            shutil.rmtree(self.data_root / str(row.id), ignore_errors=True)
        return operation_wire(op)

    # -------------------------------------------------------------- training pipelines
    def check_input_data_config(
        self, project: str, location: str, config: dict[str, Any], path: str = CONFIG_PATH
    ) -> None:
        """Raises INVALID_ARGUMENT naming the fields of a config that cannot be exported, NOT_FOUND for a
        dataset that does not exist (in this project and location)."""
        self._plan(project, location, config, path)

    def export(self, project: str, location: str, config: dict[str, Any], *, now: datetime) -> DatasetExport:
        """Split the dataset and write `<gcsDestination>/dataset-<id>-<type>-<now>/{training,validation,
        test}-NNNNN-of-NNNNN.<csv|jsonl>`. The same config and `now` give the same directory and bytes, so a
        repeated export (a controller restarted half-way) is harmless."""
        plan = self._plan(project, location, config, CONFIG_PATH)
        row = plan.row
        columns, data = self._load(row)
        records: splits.Records = (
            splits.TableRows(columns, data) if columns is not None else splits.Items(data)
        )
        try:
            assignment = self._assign(plan, records)
        except splits.SplitError as exc:
            raise invalid_argument([FieldViolation(f"{CONFIG_PATH}.{exc.field}", str(exc))]) from None
        kind = annotation_type(row.metadata_schema_uri, plan.config.annotation_schema_uri)
        directory = f"{plan.output_prefix}/dataset-{row.id}-{kind}-{export_stamp(now)}"
        env = {"AIP_DATA_FORMAT": row.data_format}
        for set_name in splits.SETS:
            chosen = [data[i] for i in assignment[set_name]]
            files.write_export_set(self.objects, directory, set_name, row.data_format, columns, chosen)
            env[f"AIP_{set_name.upper()}_DATA_URI"] = f"{directory}/{set_name}-*.{row.data_format}"
        counts = {name: len(assignment[name]) for name in splits.SETS}
        return DatasetExport(row.data_format, directory, env, counts)

    def _load(self, row: DatasetRow) -> tuple[builtins.list[str] | None, builtins.list[Any]]:
        """The stored rows (tabular: header and rows; else items, with None for the header). An import
        replaces the data file, so a file gone meanwhile is read again from the row's new path."""
        for _ in range(3):
            try:
                if row.data_format == "csv":
                    if not row.data_path:
                        return list(row.columns or []), []
                    return files.load_table(Path(row.data_path))
                return None, files.load_items(Path(row.data_path)) if row.data_path else []
            except FileNotFoundError:
                current = self.store.get(row.id, row.project_number, row.location)
                if current is None:
                    break
                row = current
        raise not_found(f"Dataset {dataset_name(row.project_number, row.location, row.id)}")

    @staticmethod
    def _assign(plan: _Plan, records: splits.Records) -> splits.Assignment:
        split: Any = getattr(plan.config, plan.split) if plan.split else None  # the named split's model
        if plan.split == "filter_split":
            matchers = [
                splits.compile_record_filter(split.training_filter),
                splits.compile_record_filter(split.validation_filter),
                splits.compile_record_filter(split.test_filter),
            ]
            return splits.filter_split(records, matchers)
        if plan.split == "predefined_split":
            return splits.predefined_split(records, split.key)
        fractions = (
            splits.Fractions.of(split.training_fraction, split.validation_fraction, split.test_fraction)
            if split is not None
            else splits.Fractions.of(0, 0, 0)
        )
        if plan.split == "timestamp_split":
            return splits.timestamp_split(records, split.key, fractions, "timestamp_split.key")
        if plan.split == "stratified_split":
            return splits.stratified_split(records, split.key, fractions)
        return splits.fraction_split(records, fractions)

    def _plan(self, project: str, location: str, body: Any, path: str) -> _Plan:
        config = parse_body(InputDataConfig, body, path)
        violations: list[FieldViolation] = []
        if not config.dataset_id:
            violations.append(FieldViolation(f"{path}.dataset_id", "Required field is not set."))
        elif not config.dataset_id.isdigit() or len(config.dataset_id) > 19:
            violations.append(
                FieldViolation(f"{path}.dataset_id", f"{config.dataset_id[:80]!r} is not a dataset ID")
            )
        chosen = [name for name in SPLIT_FIELDS if getattr(config, name) is not None]
        if len(chosen) > 1:
            violations.append(
                FieldViolation(f"{path}.{chosen[1]}", f"only one split may be set; {chosen[0]} is set too")
            )
        split_name = chosen[0] if chosen else ""
        violations += _check_split(config, split_name, path)
        violations += _check_destination(config, path)
        for name, value in (
            ("annotations_filter", config.annotations_filter),
            ("saved_query_id", config.saved_query_id),
            ("persist_ml_use_assignment", config.persist_ml_use_assignment),
        ):
            if value:
                violations.append(FieldViolation(f"{path}.{name}", "not supported here"))
        if violations:
            raise invalid_argument(violations)
        number = self.projects.number(project, location)
        row = self.store.get(int(config.dataset_id), number, location)
        if row is None:
            raise not_found(f"Dataset {dataset_name(number, location, int(config.dataset_id))}")
        key_problem = _check_key(row, config, split_name, path)
        if key_problem:
            raise invalid_argument([key_problem])
        assert config.gcs_destination is not None
        prefix = config.gcs_destination.output_uri_prefix.rstrip("/")
        return _Plan(row, config, split_name, prefix)


# ------------------------------------------------------------------ checks (pure)
def _check_description(text: str) -> list[FieldViolation]:
    if len(text) > MAX_DESCRIPTION:
        return [FieldViolation("description", f"must be at most {MAX_DESCRIPTION} characters")]
    return []


def _check_dataset(dataset: Dataset) -> list[FieldViolation]:
    out = check_display_name(dataset.display_name) + _check_description(dataset.description)
    out += check_labels(dict(dataset.labels))
    uri = dataset.metadata_schema_uri
    if not uri:
        out.append(FieldViolation("metadata_schema_uri", "Required field is not set."))
    elif schema_kind(uri) is None:
        known = ", ".join(f"{kind}_1.0.0.yaml" for kind in SCHEMA_FORMATS)
        out.append(
            FieldViolation(
                "metadata_schema_uri",
                f"{uri[:200]!r} is not a dataset metadata schema this server knows; use "
                f"gs://google-cloud-aiplatform/schema/dataset/metadata/ followed by one of {known}",
            )
        )
    if dataset.metadata is not None and not isinstance(dataset.metadata, dict):
        out.append(FieldViolation("metadata", "must be a JSON object"))
    return out


def _metadata_sources(metadata: Any, data_format: str) -> tuple[list[str], str]:
    """The source URIs of `metadata.inputConfig.gcsSource.uri` and the field that names them."""
    where = "metadata.inputConfig.gcsSource.uri"
    input_config = (metadata or {}).get("inputConfig") or (metadata or {}).get("input_config")
    if input_config is None:
        if data_format == "csv":
            raise invalid_argument(
                [
                    FieldViolation(
                        "metadata.inputConfig",
                        'Required for a tabular dataset: {"inputConfig": {"gcsSource": {"uri": '
                        '["gs://bucket/data.csv"]}}}',
                    )
                ]
            )
        return [], where
    if not isinstance(input_config, dict):
        raise invalid_argument([FieldViolation("metadata.inputConfig", "must be a JSON object")])
    if "bigquerySource" in input_config or "bigquery_source" in input_config:
        raise invalid_argument(
            [FieldViolation("metadata.inputConfig.bigquerySource", "not supported here; use gcsSource")]
        )
    source = input_config.get("gcsSource") or input_config.get("gcs_source")
    if not isinstance(source, dict):
        raise invalid_argument(
            [FieldViolation("metadata.inputConfig.gcsSource", "Required field is not set.")]
        )
    uris = source.get("uri", source.get("uris"))
    if isinstance(uris, str):
        uris = [uris]
    if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris) or not uris:
        raise invalid_argument([FieldViolation(where, "Required: a list of gs:// URIs")])
    return list(uris), where


def _set_or_drop(spec: dict[str, Any], key: str, value: Any) -> None:
    if value:
        spec[key] = value
    else:
        spec.pop(key, None)


def _check_split(config: InputDataConfig, split_name: str, path: str) -> list[FieldViolation]:
    if not split_name:
        return []
    split = getattr(config, split_name)
    where = f"{path}.{split_name}"
    out: list[FieldViolation] = []
    if hasattr(split, "training_fraction"):
        for name, text in splits.fraction_problems(
            split.training_fraction, split.validation_fraction, split.test_fraction
        ):
            out.append(FieldViolation(f"{where}.{name}", text))
    if hasattr(split, "key") and not split.key.strip():
        out.append(FieldViolation(f"{where}.key", "Required field is not set."))
    if split_name == "filter_split":
        for name in ("training_filter", "validation_filter", "test_filter"):
            text = getattr(split, name)
            if not text.strip():
                out.append(
                    FieldViolation(f"{where}.{name}", "Required field is not set (use - to match nothing).")
                )
                continue
            try:
                splits.compile_record_filter(text)
            except FilterError as exc:
                out.append(FieldViolation(f"{where}.{name}", str(exc)))
    return out


def _check_destination(config: InputDataConfig, path: str) -> list[FieldViolation]:
    if config.bigquery_destination is not None:
        return [
            FieldViolation(
                f"{path}.bigquery_destination",
                "BigQuery destinations are not supported here; use gcs_destination",
            )
        ]
    if config.gcs_destination is None:
        return [FieldViolation(f"{path}.gcs_destination", "Required field is not set.")]
    prefix = config.gcs_destination.output_uri_prefix
    where = f"{path}.gcs_destination.output_uri_prefix"
    if not prefix:
        return [FieldViolation(where, "Required field is not set.")]
    try:
        parse_gcs_uri(prefix)
    except StoragePathError as exc:
        return [FieldViolation(where, str(exc))]
    return []


def _check_key(row: DatasetRow, config: InputDataConfig, split_name: str, path: str) -> FieldViolation | None:
    """A tabular key must be one of the dataset's columns."""
    split = getattr(config, split_name) if split_name else None
    key = getattr(split, "key", "")
    if not key or row.data_format != "csv" or key in (row.columns or []):
        return None
    return FieldViolation(
        f"{path}.{split_name}.key",
        f"the dataset has no column {key!r}; its columns are {', '.join(row.columns or [])}",
    )


# ------------------------------------------------------------------ listing helpers
def _dataset_filter(filter_text: str) -> Any:
    columns = FilterColumns(
        display_name=DatasetRow.display_name,
        state=None,
        create_time=DatasetRow.create_time,
        labels=DatasetRow.labels,
        extra={"metadata_schema_uri": DatasetRow.metadata_schema_uri},
    )
    return listing.list_filter(filter_text, columns, {})


def _bad_order(part: str) -> str:
    return f"{part!r}: order by display_name, create_time or update_time, optionally with desc"


__all__ = ["DatasetExport", "DatasetService", "dataset_name", "dataset_wire", "export_stamp"]
