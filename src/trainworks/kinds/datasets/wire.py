"""Wire models of Dataset, ImportDataConfig and InputDataConfig (google.cloud.aiplatform.v1), and the
metadata schemas the server knows.

A tabular dataset (`tabular_1.0.0.yaml`, also `time_series_1.0.0.yaml`) is CSV: its metadata names the
sources, `{"inputConfig": {"gcsSource": {"uri": ["gs://b/data.csv", ...]}}}`. Every other kind (text, image,
video) is JSONL items, added by `:import` (or, for convenience, named the same way in the metadata at
create time).
"""

from __future__ import annotations

from typing import Any

from trainworks.kernel.wire import Bool, Double, Int64, OutputOnly, Timestamp, WireModel
from trainworks.kinds.custom_jobs.wire import EncryptionSpec, GcsDestination

SCHEMA_PREFIX = "gs://google-cloud-aiplatform/schema/dataset/metadata/"
TABULAR_SCHEMA = SCHEMA_PREFIX + "tabular_1.0.0.yaml"
# Metadata schema kind -> stored data format.
SCHEMA_FORMATS = {
    "tabular": "csv",
    "time_series": "csv",
    "text": "jsonl",
    "image": "jsonl",
    "video": "jsonl",
}


def schema_kind(uri: str) -> str | None:
    """`tabular` for `gs://google-cloud-aiplatform/schema/dataset/metadata/tabular_1.0.0.yaml`; None for a
    URI that names no known schema."""
    if not uri.startswith(SCHEMA_PREFIX):
        return None
    name = uri[len(SCHEMA_PREFIX) :]
    kind, _, version = name.rpartition("_")
    if kind in SCHEMA_FORMATS and version.endswith(".yaml") and version.removesuffix(".yaml"):
        return kind
    return None


def annotation_type(metadata_schema_uri: str, annotation_schema_uri: str = "") -> str:
    """The `<annotation-type>` of export directories: `tables` for tabular data (as Vertex AI names it);
    for other data the annotation schema's name when the config gives one
    (`.../text_classification_single_label_1.0.0.yaml` -> `text_classification_single_label`), else the
    dataset's kind (`text`, `image`, `video`)."""
    kind = schema_kind(metadata_schema_uri) or "unknown"
    if SCHEMA_FORMATS.get(kind) == "csv":
        return "tables"
    if annotation_schema_uri:
        base = annotation_schema_uri.rstrip("/").rsplit("/", 1)[-1].removesuffix(".yaml")
        stem, _, version = base.rpartition("_")
        if stem and version[:1].isdigit():
            return stem.removesuffix("_io_format")
    return kind


class Dataset(WireModel):
    name: OutputOnly[str] = ""
    display_name: str = ""
    description: str = ""
    metadata_schema_uri: str = ""
    metadata: Any = None  # google.protobuf.Value
    data_item_count: OutputOnly[Int64] = 0
    create_time: OutputOnly[Timestamp | None] = None
    update_time: OutputOnly[Timestamp | None] = None
    etag: OutputOnly[str] = ""  # not OUTPUT_ONLY in the proto, but the service's: ignored on input
    labels: dict[str, str] = {}
    encryption_spec: EncryptionSpec | None = None
    model_reference: str = ""
    satisfies_pzs: OutputOnly[Bool] = False
    satisfies_pzi: OutputOnly[Bool] = False


class GcsSource(WireModel):
    uris: list[str] = []


class ImportDataConfig(WireModel):
    gcs_source: GcsSource | None = None
    data_item_labels: dict[str, str] = {}
    annotation_labels: dict[str, str] = {}
    import_schema_uri: str = ""


class ImportDataBody(WireModel):
    """The body of `POST {dataset}:import` (ImportDataRequest without `name`)."""

    name: str = ""
    import_configs: list[ImportDataConfig] = []


# ------------------------------------------------------------------ InputDataConfig (training pipelines)
# The datasets export what a training pipeline's InputDataConfig asks for, so its messages live here; the
# pipeline's own model (kinds/training_pipelines/wire.py) adds the parser's oneof checks, while the export
# reports two splits as a field violation.
class FractionSplit(WireModel):
    training_fraction: Double = 0.0
    validation_fraction: Double = 0.0
    test_fraction: Double = 0.0


class FilterSplit(WireModel):
    training_filter: str = ""
    validation_filter: str = ""
    test_filter: str = ""


class PredefinedSplit(WireModel):
    key: str = ""


class TimestampSplit(FractionSplit):
    key: str = ""


class StratifiedSplit(FractionSplit):
    key: str = ""


class BigQueryDestination(WireModel):
    output_uri: str = ""


class InputDataConfig(WireModel):
    fraction_split: FractionSplit | None = None
    filter_split: FilterSplit | None = None
    predefined_split: PredefinedSplit | None = None
    timestamp_split: TimestampSplit | None = None
    stratified_split: StratifiedSplit | None = None
    gcs_destination: GcsDestination | None = None
    bigquery_destination: BigQueryDestination | None = None
    dataset_id: str = ""
    annotations_filter: str = ""
    annotation_schema_uri: str = ""
    saved_query_id: str = ""
    persist_ml_use_assignment: Bool = False


SPLIT_FIELDS = ("fraction_split", "filter_split", "predefined_split", "timestamp_split", "stratified_split")
DESTINATION_FIELDS = ("gcs_destination", "bigquery_destination")

__all__ = [
    "DESTINATION_FIELDS",
    "SCHEMA_FORMATS",
    "SPLIT_FIELDS",
    "TABULAR_SCHEMA",
    "Dataset",
    "GcsSource",
    "ImportDataBody",
    "ImportDataConfig",
    "InputDataConfig",
    "annotation_type",
    "schema_kind",
]
