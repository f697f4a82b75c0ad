"""Database rows. These are storage shapes, kept apart from the wire models (each kind's wire.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Connection,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    event,
    insert,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Mapper, declared_attr, mapped_column

from trainworks.store.types import UTCDateTime


class Base(DeclarativeBase):
    pass


# Where a job table's own columns sit among the shared ones (mapped_column sort_order; ties keep the
# order of declaration, the class's own columns before the mixin's): the tables keep the column order
# their migrations created.
HEADER_ORDER = -3  # id .. error
BEFORE_TIMES = -2  # a table's own columns between error and create_time
TIMES_ORDER = -1  # create_time .. end_time
# (0: a table's own columns between end_time and delete_operation_id)
DELETE_ORDER = 1  # delete_operation_id
AFTER_DELETE = 2  # a table's own columns after delete_operation_id


class JobColumns:
    """The columns every job table shares (custom jobs, tuning jobs, training pipelines), and its indexes:
    newest-first pages of a parent (carrying state and display name, so a page's walk tests those filters
    without reading the rows that fail them), or seeking one state or display name (kernel/rows.py); the
    state of a job by id (a page through label rows tests it there); the active rows by state (and the
    counts by state of /metrics)."""

    id: Mapped[int] = mapped_column(
        BigInteger, primary_key=True, autoincrement=False, sort_order=HEADER_ORDER
    )
    project_number: Mapped[str] = mapped_column(String(20), nullable=False, sort_order=HEADER_ORDER)
    location: Mapped[str] = mapped_column(String(64), nullable=False, sort_order=HEADER_ORDER)
    display_name: Mapped[str] = mapped_column(String(512), nullable=False, sort_order=HEADER_ORDER)
    state: Mapped[int] = mapped_column(Integer, nullable=False, sort_order=HEADER_ORDER)
    # The user-settable part of the job as canonical proto JSON (displayName, jobSpec, labels, ...).
    spec: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, sort_order=HEADER_ORDER)
    labels: Mapped[dict[str, str]] = mapped_column(
        JSON, nullable=False, default=dict, sort_order=HEADER_ORDER
    )
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True, sort_order=HEADER_ORDER)
    create_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, sort_order=TIMES_ORDER)
    update_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, sort_order=TIMES_ORDER)
    start_time: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True, sort_order=TIMES_ORDER)
    end_time: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True, sort_order=TIMES_ORDER)
    delete_operation_id: Mapped[int | None] = mapped_column(
        BigInteger, nullable=True, sort_order=DELETE_ORDER
    )
    # The table of the job's label rows (JobLabelColumns), kept with the job.
    labels_row: ClassVar[type[JobLabelColumns]]

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Index, ...]:
        table = cls.__tablename__  # type: ignore[attr-defined]
        return (
            Index(
                f"ix_{table}_parent_created",
                "project_number",
                "location",
                "create_time",
                "id",
                "state",
                "display_name",
            ),
            Index(f"ix_{table}_state", "state"),
            Index(f"ix_{table}_parent_state", "project_number", "location", "state", "create_time", "id"),
            Index(
                f"ix_{table}_parent_name", "project_number", "location", "display_name", "create_time", "id"
            ),
            Index(f"ix_{table}_id_state", "id", "state"),
        )


class JobLabelColumns:
    """One label of a job, beside the job's `labels` JSON (a job's labels never change after its create),
    with the job's parent and create time: a list filtered by labels.KEY=VALUE pages through these newest
    first (kernel/rows.py) instead of reading every job of the parent. Written with the job (write_job_labels
    below), removed with it (ON DELETE CASCADE)."""

    job_table: ClassVar[str]  # the job table whose labels these are

    @declared_attr
    def job_id(cls) -> Mapped[int]:
        return mapped_column(
            BigInteger, ForeignKey(f"{cls.job_table}.id", ondelete="CASCADE"), primary_key=True, sort_order=-1
        )

    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str] = mapped_column(Text, nullable=False)
    project_number: Mapped[str] = mapped_column(String(20), nullable=False)
    location: Mapped[str] = mapped_column(String(64), nullable=False)
    create_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Index, ...]:
        table = cls.__tablename__  # type: ignore[attr-defined]
        return (
            Index(f"ix_{table}_seek", "key", "value", "project_number", "location", "create_time", "job_id"),
        )


class CustomJobLabelRow(JobLabelColumns, Base):
    __tablename__ = "custom_job_labels"
    job_table = "custom_jobs"


class TuningJobLabelRow(JobLabelColumns, Base):
    __tablename__ = "tuning_job_labels"
    job_table = "tuning_jobs"


class TrainingPipelineLabelRow(JobLabelColumns, Base):
    __tablename__ = "training_pipeline_labels"
    job_table = "training_pipelines"


def job_label_values(job: JobColumns) -> list[dict[str, Any]]:
    """The label rows of a job, as column values."""
    return [
        {
            "job_id": job.id,
            "key": key,
            "value": value,
            "project_number": job.project_number,
            "location": job.location,
            "create_time": job.create_time,
        }
        for key, value in (job.labels or {}).items()
    ]


@event.listens_for(JobColumns, "after_insert", propagate=True)
def write_job_labels(_mapper: Mapper[Any], connection: Connection, job: JobColumns) -> None:
    """A new job's label rows, in the transaction (and flush) that inserts the job, whoever inserts it."""
    values = job_label_values(job)
    if values:
        connection.execute(insert(job.labels_row), values)


class ProjectRow(Base):
    __tablename__ = "projects"

    project_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_number: Mapped[str] = mapped_column(String(20), unique=True, nullable=False)
    create_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)


class CustomJobRow(JobColumns, Base):
    __tablename__ = "custom_jobs"
    labels_row = CustomJobLabelRow

    # The end the controller has decided on while replicas are still being torn down.
    outcome: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    teardown_started: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Restarts: the current attempt (0 first) and one entry per earlier attempt: kind, reason, time.
    attempt: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, server_default="0", sort_order=AFTER_DELETE
    )
    history: Mapped[list[dict[str, Any]]] = mapped_column(
        JSON, nullable=False, default=list, server_default="[]", sort_order=AFTER_DELETE
    )
    # Scheduling: higher priority first (label trainworks-priority), the zone it was admitted to, and why
    # it is still waiting when it is.
    priority: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, server_default="0", sort_order=AFTER_DELETE
    )
    zone: Mapped[str | None] = mapped_column(String(128), nullable=True, sort_order=AFTER_DELETE)
    waiting_reason: Mapped[str | None] = mapped_column(Text, nullable=True, sort_order=AFTER_DELETE)
    # jobSpec.persistentResourceId (None: the job runs on the inventory), indexed: the resources' controller
    # reads their jobs each pass, not every active job.
    persistent_resource: Mapped[str | None] = mapped_column(
        String(63), nullable=True, index=True, sort_order=AFTER_DELETE
    )


class ReplicaRow(Base):
    __tablename__ = "replicas"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("custom_jobs.id", ondelete="CASCADE"), nullable=False, index=True
    )
    pool: Mapped[int] = mapped_column(Integer, nullable=False)
    replica_index: Mapped[int] = mapped_column(Integer, nullable=False)
    host: Mapped[str] = mapped_column(String(255), nullable=False)
    port: Mapped[int] = mapped_column(Integer, nullable=False)
    # planned -> running -> exited | lost
    phase: Mapped[str] = mapped_column(String(16), nullable=False, default="planned")
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    pid_start: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    run_dir: Mapped[str] = mapped_column(Text, nullable=False)
    attempt: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    restarts: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    preempt_requested: Mapped[bool] = mapped_column(
        Boolean, nullable=False, default=False, server_default="false"
    )
    # Where a backend that does not run the replica as a local process keeps it, e.g. "slurm:<conf>:<job id>".
    backend_ref: Mapped[str | None] = mapped_column(Text, nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    __table_args__ = (Index("ix_replicas_phase", "phase"),)


class OperationRow(Base):
    __tablename__ = "operations"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    project_number: Mapped[str] = mapped_column(String(20), nullable=False)
    location: Mapped[str] = mapped_column(String(64), nullable=False)
    # "customJobs/123" for operations under a resource, "" for location-level ones.
    resource: Mapped[str] = mapped_column(String(255), nullable=False, default="")
    kind: Mapped[str] = mapped_column(String(64), nullable=False)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, nullable=False)
    done: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    response: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    create_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)
    update_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)

    __table_args__ = (Index("ix_operations_parent", "project_number", "location", "resource"),)


# Where an LRO resource table's own columns sit among LroResourceColumns' (mapped_column sort_order, as for
# the job tables): the tables keep the column order their migrations created.
LRO_KEY_ORDER = -5  # project_number, location
LRO_ID_ORDER = -4  # the table's resource ID column
LRO_HEADER_ORDER = -3  # uid, display_name, state
LRO_BEFORE_SPEC = -2  # a table's own columns between state and spec
LRO_SPEC_ORDER = -1  # spec, labels
# (0: a table's own columns between labels and error)
LRO_ERROR_ORDER = 1  # error, operation_id
LRO_BEFORE_TIMES = 2  # a table's own columns between operation_id and create_time
LRO_TIMES_ORDER = 3  # create_time, update_time, start_time


class LroResourceColumns:
    """The columns of a resource with a client-chosen ID whose changes are LROs (kernel/lro_store.py):
    persistent resources and training clusters; and its index of the rows by state."""

    project_number: Mapped[str] = mapped_column(String(20), primary_key=True, sort_order=LRO_KEY_ORDER)
    location: Mapped[str] = mapped_column(String(64), primary_key=True, sort_order=LRO_KEY_ORDER)
    # Names this incarnation of the ID (a deleted and re-created resource gets a new one): billing spans.
    uid: Mapped[int] = mapped_column(BigInteger, nullable=False, unique=True, sort_order=LRO_HEADER_ORDER)
    display_name: Mapped[str] = mapped_column(String(512), nullable=False, sort_order=LRO_HEADER_ORDER)
    state: Mapped[int] = mapped_column(Integer, nullable=False, sort_order=LRO_HEADER_ORDER)
    # The user-settable part as canonical proto JSON (each table's docstring says how it is filled in).
    spec: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, sort_order=LRO_SPEC_ORDER)
    labels: Mapped[dict[str, str]] = mapped_column(
        JSON, nullable=False, default=dict, sort_order=LRO_SPEC_ORDER
    )
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True, sort_order=LRO_ERROR_ORDER)
    # The LRO of the transition in progress (create, update, reboot or delete).
    operation_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True, sort_order=LRO_ERROR_ORDER)
    create_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, sort_order=LRO_TIMES_ORDER)
    update_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, sort_order=LRO_TIMES_ORDER)
    start_time: Mapped[datetime | None] = mapped_column(
        UTCDateTime, nullable=True, sort_order=LRO_TIMES_ORDER
    )

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Index, ...]:
        return (Index(f"ix_{cls.__tablename__}_state", "state"),)  # type: ignore[attr-defined]


class PersistentResourceRow(LroResourceColumns, Base):
    """A PersistentResource; its ID is client-chosen and unique within a project and location. Its spec has
    the pools with their ids and replicaCount filled in."""

    __tablename__ = "persistent_resources"

    resource_id: Mapped[str] = mapped_column(String(63), primary_key=True, sort_order=LRO_ID_ORDER)
    # An accepted update the controller has still to apply (state UPDATING).
    pending_spec: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # Epoch of the warm state (pre-started interpreters): a reboot bumps it, so older ones are dropped.
    generation: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, server_default="0", sort_order=LRO_BEFORE_TIMES
    )


class ClusterRow(LroResourceColumns, Base):
    """A ModelDevelopmentCluster (training cluster) and what the controller realized of it on Slurm. Its spec
    is as reported (nodeImage empty until an update sets it)."""

    __tablename__ = "model_development_clusters"

    cluster_id: Mapped[str] = mapped_column(String(10), primary_key=True, sort_order=LRO_ID_ORDER)
    detail: Mapped[str] = mapped_column(
        Text, nullable=False, default="", server_default="", sort_order=LRO_BEFORE_SPEC
    )
    # An accepted update the controller has still to apply (state UPDATING): {"spec", "realized"}.
    pending: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # Service-side state: the image each pool runs, the service scripts release, ... (never on the wire).
    realized: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, default=dict)
    nodes: Mapped[list[dict[str, Any]]] = mapped_column(JSON, nullable=False, default=list)
    events: Mapped[list[dict[str, Any]]] = mapped_column(JSON, nullable=False, default=list)
    # First of the block of loopback ports its Slurm daemons listen on.
    slurm_port: Mapped[int] = mapped_column(Integer, nullable=False, unique=True)


class PersistentResourceSpanRow(Base):
    """Machines of one resource pool provisioned from start to end (None: still provisioned), for billing.

    Kept after the resource is deleted, so what it cost stays reportable."""

    __tablename__ = "persistent_resource_spans"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    project_number: Mapped[str] = mapped_column(String(20), nullable=False)
    location: Mapped[str] = mapped_column(String(64), nullable=False)
    resource_id: Mapped[str] = mapped_column(String(63), nullable=False)
    resource_uid: Mapped[int] = mapped_column(BigInteger, nullable=False, index=True)
    display_name: Mapped[str] = mapped_column(String(512), nullable=False)
    pool_id: Mapped[str] = mapped_column(String(63), nullable=False)
    machine_spec: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    machines: Mapped[int] = mapped_column(Integer, nullable=False)
    start_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)
    end_time: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    __table_args__ = (Index("ix_persistent_resource_spans_parent", "project_number", "location"),)


class TuningJobRow(JobColumns, Base):
    """A HyperparameterTuningJob; its study lives in Optuna's tables of the same database."""

    __tablename__ = "tuning_jobs"
    labels_row = TuningJobLabelRow

    outcome: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class TuningTrialRow(Base):
    """One trial: the study's trial number, its parameters, the CustomJob that runs it, its measurements."""

    __tablename__ = "tuning_trials"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tuning_job_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("tuning_jobs.id", ondelete="CASCADE"), nullable=False, index=True
    )
    trial_id: Mapped[int] = mapped_column(Integer, nullable=False)  # 1, 2, ... as Vertex numbers them
    study_number: Mapped[int] = mapped_column(Integer, nullable=False)
    state: Mapped[int] = mapped_column(Integer, nullable=False)
    parameters: Mapped[list[dict[str, Any]]] = mapped_column(JSON, nullable=False)
    args: Mapped[list[str]] = mapped_column(JSON, nullable=False)
    custom_job_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    measurements: Mapped[list[dict[str, Any]]] = mapped_column(JSON, nullable=False, default=list)
    final_measurement: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    infeasible_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    stopped_early: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    start_time: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    end_time: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    # A restarted server can neither duplicate a trial nor record one study trial twice.
    __table_args__ = (
        UniqueConstraint("tuning_job_id", "trial_id", name="uq_tuning_trials_trial"),
        UniqueConstraint("tuning_job_id", "study_number", name="uq_tuning_trials_study_number"),
    )


class ModelRow(Base):
    """A registered model: the versions hang off it; `next_version` numbers them "1", "2", ... for ever
    (a deleted version's number is never reused)."""

    __tablename__ = "models"

    project_number: Mapped[str] = mapped_column(String(20), primary_key=True)
    location: Mapped[str] = mapped_column(String(64), primary_key=True)
    model_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    next_version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    # The version the model-wide "default" alias points at (what a name without `@` means).
    default_version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    create_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)
    update_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)


class ModelVersionRow(Base):
    """One version of a model: its user fields as sent (`spec`), its aliases, and the registry's own copy of
    the artifacts (`artifact_path`), so later changes to the bucket do not change what was registered."""

    __tablename__ = "model_versions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    project_number: Mapped[str] = mapped_column(String(20), nullable=False)
    location: Mapped[str] = mapped_column(String(64), nullable=False)
    model_id: Mapped[str] = mapped_column(String(128), nullable=False)
    version_id: Mapped[int] = mapped_column(Integer, nullable=False)
    display_name: Mapped[str] = mapped_column(String(512), nullable=False)  # a column: list filters and sorts
    aliases: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)  # all but "default"
    spec: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    labels: Mapped[dict[str, str]] = mapped_column(JSON, nullable=False, default=dict)
    artifact_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    artifact_format: Mapped[str | None] = mapped_column(String(32), nullable=True)
    training_pipeline: Mapped[str | None] = mapped_column(Text, nullable=True)
    create_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)
    update_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)

    __table_args__ = (
        UniqueConstraint("project_number", "location", "model_id", "version_id", name="uq_model_versions"),
        Index("ix_model_versions_model", "project_number", "location", "model_id"),
    )


class DatasetRow(Base):
    """A managed dataset: its user fields, and the imported rows kept by the server (`data_path`)."""

    __tablename__ = "datasets"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    project_number: Mapped[str] = mapped_column(String(20), nullable=False)
    location: Mapped[str] = mapped_column(String(64), nullable=False)
    display_name: Mapped[str] = mapped_column(String(512), nullable=False)
    metadata_schema_uri: Mapped[str] = mapped_column(Text, nullable=False)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    labels: Mapped[dict[str, str]] = mapped_column(JSON, nullable=False, default=dict)
    data_format: Mapped[str] = mapped_column(String(16), nullable=False)  # csv (tabular) or jsonl
    item_count: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    columns: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    data_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    create_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)
    update_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)

    __table_args__ = (Index("ix_datasets_parent_created", "project_number", "location", "create_time", "id"),)


class TrainingPipelineRow(JobColumns, Base):
    """A TrainingPipeline: the backing CustomJob or HyperparameterTuningJob it created, the dataset export it
    made for it, and the model it uploaded."""

    __tablename__ = "training_pipelines"
    labels_row = TrainingPipelineLabelRow

    # custom or tuning
    backing_kind: Mapped[str | None] = mapped_column(String(16), nullable=True, sort_order=BEFORE_TIMES)
    backing_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True, sort_order=BEFORE_TIMES)
    export: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True, sort_order=BEFORE_TIMES)
    # {name, versionId}
    model: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True, sort_order=BEFORE_TIMES)


class ApiTokenRow(Base):
    """An API token: only its SHA-256 hash is kept, with the projects it may use."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    projects: Mapped[list[str]] = mapped_column(JSON, nullable=False)
    admin: Mapped[bool] = mapped_column(Boolean, nullable=False)
    description: Mapped[str] = mapped_column(Text, nullable=False)
    create_time: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)
    revoked: Mapped[bool] = mapped_column(Boolean, nullable=False)
    revoke_time: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class ChangeRow(Base):
    """One write to a row that a controller watches, recorded in the writer's own transaction
    (kernel/changes.py): controllers act on these instead of reading every active row on every pass."""

    __tablename__ = "changes"

    seq: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    kind: Mapped[str] = mapped_column(String(40), nullable=False)
    row_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)
    # AUTOINCREMENT: SQLite must never reuse a number once the rows below a cursor are pruned.
    __table_args__ = {"sqlite_autoincrement": True}
