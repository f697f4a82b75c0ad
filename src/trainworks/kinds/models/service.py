"""Model registry rules: upload (a new model, or a new version of one), copy (of a model's version, from any
location of the project), get by version or alias, list models and versions, patch, alias merges, and
deletion of a model or one version.

Version IDs are "1", "2", ... per model and never reused. Each version may carry aliases; an alias names
one version at a time (giving it to a version takes it from the others), and exactly one version holds
the model-wide "default" alias, which is what a name without `@` means.

Upload, copy and deletion are long-running operations on the wire; the work is done within the request and the
finished Operation is written in the same transaction as the change.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, literal
from sqlalchemy.exc import IntegrityError

from trainworks.kernel import listing
from trainworks.kernel.errors import (
    ApiError,
    FieldViolation,
    failed_precondition,
    invalid_argument,
    not_found,
)
from trainworks.kernel.filtering import (
    And,
    Comparison,
    FilterColumns,
    FilterError,
    Node,
    Not,
    Or,
    compile_filter,
)
from trainworks.kernel.filtering import parse_filter as parse_aip160
from trainworks.kernel.ids import new_numeric_id
from trainworks.kernel.list_query import ListQuery, OrderedSlice, order_terms
from trainworks.kernel.lro_service import already_exists
from trainworks.kernel.names import parent_name
from trainworks.kernel.operations import OperationService, aiplatform_type_url, operation_wire
from trainworks.kernel.projects import Projects
from trainworks.kernel.wire import format_timestamp, now_utc
from trainworks.kernel.wire_errors import parse_body, snake
from trainworks.kinds.custom_jobs.validation import MAX_DISPLAY_NAME, check_labels
from trainworks.kinds.models.artifacts import ArtifactRegistry
from trainworks.kinds.models.store import (
    ModelKey,
    ModelStore,
    delete_model_in,
    model_in,
    take_aliases_in,
    versions_in,
)
from trainworks.kinds.models.wire import (
    CopyModelRequest,
    MergeVersionAliasesRequest,
    Model,
    UploadModelRequest,
)
from trainworks.storage.output_buckets import OutputBuckets
from trainworks.store.tables import ModelRow, ModelVersionRow, OperationRow

DEFAULT = "default"
# UploadModelRequest.model_id: up to 63 characters of [a-z0-9_-], not starting with a digit or a hyphen.
MODEL_ID = re.compile(r"^[a-z_][a-z0-9_-]{0,62}$")
_SERVER_ID = re.compile(r"^[0-9]{1,19}$")
ALIAS = re.compile(r"^[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]$")
MAX_DEPLOYMENT_TIMEOUT_S = 2 * 3600

MUTABLE = ("display_name", "description", "version_description", "labels", "version_aliases")
OUTPUT_ONLY = {
    "version_id",
    "version_create_time",
    "version_update_time",
    "supported_export_formats",
    "training_pipeline",
    "supported_deployment_resources_types",
    "supported_input_storage_formats",
    "supported_output_storage_formats",
    "create_time",
    "update_time",
    "deployed_models",
    "model_source_info",
    "original_model_info",
    "metadata_artifact",
    "satisfies_pzs",
    "satisfies_pzi",
    "checkpoints",
}
UNSUPPORTED = ("explanation_spec", "data_stats", "base_model_source")


def model_name(project_number: str, location: str, model_id: str) -> str:
    return f"{parent_name(project_number, location)}/models/{model_id}"


def model_wire(model: ModelRow, version: ModelVersionRow, with_version: bool = False) -> dict[str, Any]:
    """The Model as Get returns it; `with_version` names it `...@{versionId}` (as listVersions does)."""
    name = model_name(model.project_number, model.location, model.model_id)
    out: dict[str, Any] = {"name": f"{name}@{version.version_id}" if with_version else name}
    out["versionId"] = str(version.version_id)
    aliases = ([DEFAULT] if model.default_version == version.version_id else []) + list(version.aliases)
    if aliases:
        out["versionAliases"] = aliases
    out["versionCreateTime"] = format_timestamp(version.create_time)
    out["versionUpdateTime"] = format_timestamp(version.update_time)
    out["displayName"] = version.display_name
    out.update(version.spec)
    if version.training_pipeline:
        out["trainingPipeline"] = version.training_pipeline
    out["createTime"] = format_timestamp(model.create_time)
    out["updateTime"] = format_timestamp(model.update_time)
    if version.labels:
        out["labels"] = dict(version.labels)
    return out


@dataclass(frozen=True)
class _NewVersion:
    """What a new version's row holds besides its model's key and the times."""

    display_name: str
    spec: dict[str, Any]
    labels: dict[str, str]
    aliases: list[str]  # besides "default"
    default: bool  # takes the model's default alias (a new model's first version always has it)
    artifact_path: str | None
    artifact_format: str | None
    training_pipeline: str | None


# What a copy does not take of its source's stored fields: its own are written instead.
_NOT_COPIED = ("encryptionSpec", "modelSourceInfo", "originalModelInfo")


# ---------------------------------------------------------------- request checks
def _check_model_id(model_id: str | None) -> list[FieldViolation]:
    if model_id is None or MODEL_ID.fullmatch(model_id):
        return []
    return [
        FieldViolation(
            "model_id",
            f"invalid model ID {model_id!r}: up to 63 characters of [a-z0-9_-], "
            "not starting with a digit or a hyphen",
        )
    ]


def _model_name_parts(name: str, field: str, versioned: bool) -> tuple[str, str, str]:
    """The project, location and model segment of `projects/P/locations/L/models/M` (`M@VERSION` too when
    `versioned`); INVALID_ARGUMENT naming `field` for anything else."""
    parts = name.strip("/").split("/")
    shape_ok = len(parts) == 6 and parts[0] == "projects" and parts[2] == "locations" and parts[4] == "models"
    if not shape_ok or (not versioned and "@" in parts[5]):
        form = "projects/P/locations/L/models/M" + ("[@VERSION]" if versioned else ", no @")
        raise invalid_argument([FieldViolation(field, f"{name!r} is not a model name ({form})")])
    return parts[1], parts[3], parts[5]


def _check_model(model: Model) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    if not model.display_name:
        out.append(FieldViolation("model.display_name", "Required field is not set."))
    elif len(model.display_name) > MAX_DISPLAY_NAME:
        out.append(FieldViolation("model.display_name", f"must be at most {MAX_DISPLAY_NAME} characters"))
    if not model.artifact_uri and model.container_spec is None:
        out.append(
            FieldViolation(
                "model.artifact_uri",
                "Required unless model.container_spec is set: the gs:// directory that holds the model files",
            )
        )
    if model.artifact_uri and not model.artifact_uri.startswith("gs://"):
        out.append(FieldViolation("model.artifact_uri", f"{model.artifact_uri!r} is not a gs:// URI"))
    spec = model.container_spec
    if spec is not None:
        if not spec.image_uri:
            out.append(FieldViolation("model.container_spec.image_uri", "Required field is not set."))
        for i, env in enumerate(spec.env):
            if not env.name:
                out.append(
                    FieldViolation(f"model.container_spec.env[{i}].name", "Required field is not set.")
                )
        timeout = spec.deployment_timeout
        if timeout is not None and not 0 <= timeout.total_seconds() <= MAX_DEPLOYMENT_TIMEOUT_S:
            out.append(
                FieldViolation("model.container_spec.deployment_timeout", "must be between 0s and 7200s")
            )
    out.extend(check_aliases(model.version_aliases, "model.version_aliases"))
    out.extend(check_labels(dict(model.labels), "model.labels"))
    for name in UNSUPPORTED:
        if getattr(model, name) is not None:
            out.append(FieldViolation(f"model.{name}", "is not supported by Trainworks"))
    return out


def check_aliases(aliases: list[str], path: str, allow_removal: bool = False) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    seen: set[str] = set()
    for i, raw in enumerate(aliases):
        alias = raw[1:] if allow_removal and raw.startswith("-") else raw
        where = f"{path}[{i}]"
        if not ALIAS.fullmatch(alias):
            out.append(
                FieldViolation(
                    where,
                    f"invalid alias {raw!r}: an alias is 2 to 128 characters matching "
                    "[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]",
                )
            )
        elif alias in seen:
            out.append(FieldViolation(where, f"the alias {alias!r} is given more than once"))
        seen.add(alias)
    return out


def _reject_state(node: Node) -> None:
    """Models have no state: say so rather than compile a filter on a column they lack."""
    if isinstance(node, And | Or):
        for child in node.operands:
            _reject_state(child)
    elif isinstance(node, Not):
        _reject_state(node.operand)
    elif isinstance(node, Comparison) and node.field[0] == "state":
        raise FilterError("models have no 'state'; filter on model, display_name, create_time or labels")


def _model_filter(filter_text: str, versions: bool) -> ColumnElement[bool] | None:
    if not filter_text.strip():
        return None
    try:
        _reject_state(parse_aip160(filter_text))
        return compile_filter(
            filter_text,
            FilterColumns(
                display_name=ModelVersionRow.display_name,
                state=literal(0),
                create_time=ModelVersionRow.create_time if versions else ModelRow.create_time,
                labels=ModelVersionRow.labels,
                extra={"model": ModelRow.model_id},
            ),
            {},
        )
    except FilterError as exc:
        raise invalid_argument([FieldViolation("filter", str(exc))]) from None


def _order(order_by: str, versions: bool) -> list[Any]:
    """`display_name desc, create_time` as SQL order terms (version times for listVersions)."""
    columns = {
        "display_name": ModelVersionRow.display_name,
        "create_time": ModelVersionRow.create_time if versions else ModelRow.create_time,
        "update_time": ModelVersionRow.update_time if versions else ModelRow.update_time,
    }
    return order_terms(order_by, columns, _bad_order)


def _bad_order(part: str) -> str:
    return (
        f"cannot order by {part!r}: use display_name, create_time or update_time, "
        "each optionally followed by desc"
    )


@dataclass(frozen=True)
class _Page:
    """A page of models or of one model's versions, as asked: its size, the rows it reads (filter, order and
    offset as SQL, one more than its size) and the fingerprint its page tokens carry."""

    size: int
    rows: OrderedSlice
    fingerprint: str

    @classmethod
    def of(cls, query: ListQuery, versions: bool) -> _Page:
        size = listing.page_size(query.page_size)
        where = _model_filter(query.filter, versions)
        order = _order(query.order_by, versions)
        fingerprint = listing.fingerprint(f"{query.filter}\n{query.order_by}")
        offset = (
            listing.read_offset_page_token(
                query.page_token, fingerprint, bound=2**31, issued_for="filter or order_by"
            )
            if query.page_token
            else 0
        )
        return cls(size, OrderedSlice(where, order, offset, size + 1), fingerprint)

    def answer(
        self, rows: list[tuple[ModelRow, ModelVersionRow]], read_mask: str, with_version: bool
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if rows:  # proto3 JSON omits an empty repeated field
            out["models"] = [
                listing.apply_read_mask(model_wire(m, v, with_version), read_mask)
                for m, v in rows[: self.size]
            ]
        if len(rows) > self.size:
            out["nextPageToken"] = listing.offset_page_token(self.rows.offset + self.size, self.fingerprint)
        return out


class ModelService:
    def __init__(
        self,
        store: ModelStore,
        projects: Projects,
        artifacts: ArtifactRegistry,
        output_buckets: OutputBuckets | None = None,  # a model is never read from another project's bucket
    ) -> None:
        self.output_buckets = output_buckets
        self.store = store
        self.projects = projects
        self.artifacts = artifacts

    # ------------------------------------------------------------ names
    def _key(self, project: str, location: str, ref: str) -> tuple[ModelKey, str | None]:
        """The model a path segment names (`ID`, `ID@VERSION` or `ID@ALIAS`) and its selector."""
        number = self.projects.number(project, location)
        model_id, at, selector = ref.partition("@")
        if not (MODEL_ID.fullmatch(model_id) or _SERVER_ID.fullmatch(model_id)):
            raise not_found(f"Model {model_name(number, location, model_id)!r}")
        if at and not selector:
            raise invalid_argument([FieldViolation("name", "a version or alias must follow '@'")])
        return ModelKey(number, location, model_id), (selector if at else None)

    def _parent_key(self, number: str, location: str, parent_model: str) -> ModelKey:
        project, model_location, model_id = _model_name_parts(parent_model, "parent_model", versioned=False)
        if model_location != location or self.projects.number(project) != number:
            raise invalid_argument(
                [FieldViolation("parent_model", "the parent model must be in the same project and location")]
            )
        return ModelKey(number, location, model_id)

    def _resolve(self, key: ModelKey, selector: str | None) -> tuple[ModelRow, ModelVersionRow]:
        with self.store.transaction() as session:
            return self._resolve_in(session, key, selector)

    def _resolve_in(
        self, session: Any, key: ModelKey, selector: str | None, lock: bool = False
    ) -> tuple[ModelRow, ModelVersionRow]:
        name = model_name(key.project_number, key.location, key.model_id)
        model = model_in(session, key, lock=lock)
        if model is None:
            raise not_found(f"Model {name!r}")
        versions = versions_in(session, key)
        if selector is None or selector == DEFAULT:
            wanted = [v for v in versions if v.version_id == model.default_version]
        elif selector.isdigit():
            wanted = [v for v in versions if v.version_id == int(selector)]
        else:
            wanted = [v for v in versions if selector in v.aliases]
        if not wanted:
            kind = "version" if selector and selector.isdigit() else "alias"
            raise not_found(f"Model version {name}@{selector} (no {kind} {selector!r} in this model)")
        return model, wanted[0]

    # ------------------------------------------------------------ upload
    def upload(self, project: str, location: str, body: Any, api_version: str = "v1") -> dict[str, Any]:
        """models:upload: registers the version and answers with its finished Operation."""
        request = parse_body(UploadModelRequest, body)
        if request.model is None:
            raise invalid_argument([FieldViolation("model", "Required field is not set.")])
        *_, op = self._register(
            project,
            location,
            request.model,
            parent_model=request.parent_model or None,
            model_id=request.model_id or None,
            training_pipeline=None,
            make_op=self._version_operation("upload_model", "Upload", api_version),
        )
        assert op is not None
        return operation_wire(op)

    def upload_version(
        self,
        project: str,
        location: str,
        model: dict[str, Any],
        *,
        parent_model: str | None = None,
        model_id: str | None = None,
        training_pipeline: str | None = None,
    ) -> tuple[str, str]:
        """Validate, copy and register `model` (a wire Model dict); (model name without @, version ID)."""
        parsed = parse_body(Model, model, "model")
        name, version, _ = self._register(
            project,
            location,
            parsed,
            parent_model=parent_model,
            model_id=model_id,
            training_pipeline=training_pipeline,
            make_op=None,
        )
        return name, version

    def _register(
        self,
        project: str,
        location: str,
        model: Model,
        *,
        parent_model: str | None,
        model_id: str | None,
        training_pipeline: str | None,
        make_op: Callable[[ModelKey, int], OperationRow] | None,
    ) -> tuple[str, str, OperationRow | None]:
        violations = _check_model(model) + _check_model_id(model_id)
        if violations:
            raise invalid_argument(violations)
        if self.output_buckets is not None:
            self.output_buckets.admit(project, location, "model", {"artifactUri": model.artifact_uri})
        number = self.projects.number(project, location)
        key, new = self._destination(number, location, parent_model, model_id)
        copied = (
            self.artifacts.register(model.artifact_uri, number, location, key.model_id)
            if model.artifact_uri
            else None
        )
        spec = model.user_fields()
        spec.pop("displayName", None)  # a column: list filters and sorts on it
        version = _NewVersion(
            model.display_name,
            spec,
            dict(model.labels),
            aliases=list(dict.fromkeys(a for a in model.version_aliases if a != DEFAULT)),
            default=DEFAULT in model.version_aliases,
            artifact_path=str(copied.path) if copied else None,
            artifact_format=copied.format if copied else None,
            training_pipeline=training_pipeline,
        )
        return self._insert(key, new, version, make_op)

    def _destination(
        self, number: str, location: str, parent_model: str | None, model_id: str | None
    ) -> tuple[ModelKey, bool]:
        """The model a new version goes to, and whether it is a new model: `parent_model` (which must exist),
        else a new model of ID `model_id` (or a server-chosen one), which must not."""
        if parent_model:
            key = self._parent_key(number, location, parent_model)
            if model_id is not None and model_id != key.model_id:
                raise invalid_argument(
                    [FieldViolation("model_id", "must be empty (or the parent model's ID) with parent_model")]
                )
            if self.store.model(key) is None:
                raise not_found(f"Model {model_name(number, location, key.model_id)!r} (parent_model)")
            return key, False
        key = ModelKey(number, location, model_id or str(new_numeric_id()))
        if self.store.model(key) is not None:
            raise _already_exists(key)
        return key, True

    def _insert(
        self,
        key: ModelKey,
        new: bool,
        version: _NewVersion,
        make_op: Callable[[ModelKey, int], OperationRow] | None,
    ) -> tuple[str, str, OperationRow | None]:
        """Writes the version (and the model, when new) and its operation in one transaction; the registry
        copy goes again when that fails."""
        op: OperationRow | None = None
        number, location = key.project_number, key.location
        try:
            with self.store.transaction() as session:
                now = now_utc()
                if new:
                    row = ModelRow(
                        project_number=number,
                        location=location,
                        model_id=key.model_id,
                        next_version=2,
                        default_version=1,
                        create_time=now,
                        update_time=now,
                    )
                    session.add(row)
                    session.flush()  # a model ID taken meanwhile fails here
                    version_id = 1
                else:
                    found = model_in(session, key, lock=True)
                    if found is None:
                        raise not_found(
                            f"Model {model_name(number, location, key.model_id)!r} (parent_model)"
                        )
                    version_id = found.next_version
                    found.next_version = version_id + 1
                    found.update_time = now
                    if version.default:
                        found.default_version = version_id
                take_aliases_in(session, key, version.aliases, version_id)
                session.add(
                    ModelVersionRow(
                        project_number=number,
                        location=location,
                        model_id=key.model_id,
                        version_id=version_id,
                        display_name=version.display_name,
                        aliases=version.aliases,
                        spec=version.spec,
                        labels=version.labels,
                        artifact_path=version.artifact_path,
                        artifact_format=version.artifact_format,
                        training_pipeline=version.training_pipeline,
                        create_time=now,
                        update_time=now,
                    )
                )
                if make_op is not None:
                    op = make_op(key, version_id)
                    session.add(op)
        except IntegrityError:
            self.artifacts.remove(version.artifact_path)
            raise _already_exists(key) from None
        except BaseException:
            self.artifacts.remove(version.artifact_path)
            raise
        return model_name(number, location, key.model_id), str(version_id), op

    # ------------------------------------------------------------ copy
    def copy(self, project: str, location: str, body: Any, api_version: str = "v1") -> dict[str, Any]:
        """models:copy: the source model's version (its default one, or the one `@VERSION`/`@ALIAS` names),
        from any location of the same project, copied into this location as a new model (`model_id`, or a
        server-chosen ID) or a new version of `parent_model`; its finished Operation's response is a
        CopyModelResponse.

        The copy has the source's display name, description, labels, container and artifacts (a registry
        copy of its own), no aliases but the new model's default, `modelSourceInfo.copy` and
        `originalModelInfo` naming the original version; `encryptionSpec` is the request's."""
        request = parse_body(CopyModelRequest, body)
        violations = _check_model_id(request.model_id)
        if not request.source_model:
            violations.append(FieldViolation("source_model", "Required field is not set."))
        if violations:
            raise invalid_argument(violations)
        number = self.projects.number(project, location)
        source_key, selector = self._source_key(number, request.source_model)
        source_row, source = self._resolve(source_key, selector)
        key, new = self._destination(number, location, request.parent_model, request.model_id)
        spec = {k: v for k, v in source.spec.items() if k not in _NOT_COPIED}
        original = source.spec.get("originalModelInfo") or {
            "model": f"{model_name(source_key.project_number, source_key.location, source_key.model_id)}"
            f"@{source.version_id}"
        }
        spec["modelSourceInfo"] = {"sourceType": "CUSTOM", "copy": True}
        spec["originalModelInfo"] = original
        if request.encryption_spec is not None and request.encryption_spec.kms_key_name:
            spec["encryptionSpec"] = request.encryption_spec.to_wire()
        path = (
            str(self.artifacts.duplicate(source.artifact_path, number, location, key.model_id))
            if source.artifact_path
            else None
        )
        version = _NewVersion(
            source.display_name,
            spec,
            dict(source.labels),
            aliases=[],
            default=False,
            artifact_path=path,
            artifact_format=source.artifact_format,
            training_pipeline=None,
        )
        *_, op = self._insert(key, new, version, self._version_operation("copy_model", "Copy", api_version))
        assert op is not None
        return operation_wire(op)

    def _source_key(self, number: str, source_model: str) -> tuple[ModelKey, str | None]:
        """The model `source_model` names (in any location of the project `number`) and its selector."""
        project, location, ref = _model_name_parts(source_model, "source_model", versioned=True)
        if self.projects.number(project, location) != number:
            raise invalid_argument(
                [FieldViolation("source_model", "the source model must be in the same project")]
            )
        return self._key(project, location, ref)

    def _version_operation(
        self, kind: str, method: str, api_version: str
    ) -> Callable[[ModelKey, int], OperationRow]:
        """How the finished operation of a new version is made: `{method}ModelOperationMetadata`, and a
        `{method}ModelResponse` (Upload, Copy) naming the model and the version."""

        def make_op(key: ModelKey, version_id: int) -> OperationRow:
            response = {
                "@type": aiplatform_type_url(f"{method}ModelResponse", api_version),
                "model": model_name(key.project_number, key.location, key.model_id),
                "modelVersionId": str(version_id),
            }
            return self._done_operation(key, kind, f"{method}ModelOperationMetadata", api_version, response)

        return make_op

    def _done_operation(
        self,
        key: ModelKey,
        kind: str,
        metadata_type: str,
        api_version: str,
        response: dict[str, Any],
    ) -> OperationRow:
        """A finished Operation under the model, written with the change it reports."""
        return OperationService.build(
            key.project_number,
            key.location,
            f"models/{key.model_id}",
            kind,
            metadata_type,
            api_version,
            response=response,
        )

    # ------------------------------------------------------------ read
    def get(self, project: str, location: str, ref: str) -> dict[str, Any]:
        key, selector = self._key(project, location, ref)
        return model_wire(*self._resolve(key, selector))

    def list(self, project: str, location: str, query: ListQuery) -> dict[str, Any]:
        """One entry per model: its default version."""
        page = _Page.of(query, versions=False)
        number = self.projects.number(project, location)
        rows = self.store.page_models(number, location, page.rows)
        return page.answer(rows, query.read_mask, with_version=False)

    def list_versions(self, project: str, location: str, ref: str, query: ListQuery) -> dict[str, Any]:
        key, selector = self._key(project, location, ref)
        if selector is not None:
            raise invalid_argument(
                [FieldViolation("name", "name the model without @version to list versions")]
            )
        page = _Page.of(query, versions=True)
        if self.store.model(key) is None:
            raise not_found(f"Model {model_name(key.project_number, key.location, key.model_id)!r}")
        rows = self.store.page_versions(key, page.rows)
        return page.answer(rows, query.read_mask, with_version=True)

    # ------------------------------------------------------------ change
    def update(self, project: str, location: str, ref: str, body: Any, update_mask: str) -> dict[str, Any]:
        """PATCH: the mutable fields named in `update_mask` of the version `ref` names (default: default)."""
        key, selector = self._key(project, location, ref)
        model = parse_body(Model, body if body is not None else {}, "model")
        paths = [snake(p.strip()) for p in update_mask.split(",") if p.strip()]
        if not paths:
            raise invalid_argument([FieldViolation("update_mask", "Required field is not set.")])
        violations: list[FieldViolation] = []
        for path in paths:
            top = path.split(".")[0]
            if top in MUTABLE and path == top:
                continue
            if top in MUTABLE:
                violations.append(FieldViolation("update_mask", f"{path!r}: update {top} as a whole"))
            elif top in OUTPUT_ONLY or top == "name":
                violations.append(FieldViolation(f"model.{top}", "is output only and cannot be updated"))
            elif top in Model.model_fields:
                violations.append(
                    FieldViolation(
                        f"model.{top}",
                        "is immutable: it cannot be changed after upload; upload a new version instead",
                    )
                )
            else:
                violations.append(FieldViolation("update_mask", f"{path!r} is not a field of Model"))
        if "display_name" in paths and not model.display_name:
            violations.append(FieldViolation("model.display_name", "Required field is not set."))
        if "labels" in paths:
            violations.extend(check_labels(dict(model.labels), "model.labels"))
        if "version_aliases" in paths:
            violations.extend(check_aliases(model.version_aliases, "model.version_aliases"))
        if violations:
            raise invalid_argument(violations)
        with self.store.transaction() as session:
            row, version = self._resolve_in(session, key, selector, lock=True)
            now = now_utc()
            if "display_name" in paths:
                version.display_name = model.display_name
            spec = dict(version.spec)
            for field, value in (
                ("description", model.description),
                ("version_description", model.version_description),
            ):
                if field in paths:
                    camel = "versionDescription" if field == "version_description" else field
                    if value:
                        spec[camel] = value
                    else:
                        spec.pop(camel, None)
            version.spec = spec
            if "labels" in paths:
                version.labels = dict(model.labels)
            if "version_aliases" in paths:
                self._set_aliases(session, key, row, version, model.version_aliases)
            version.update_time = now
            row.update_time = now
            return model_wire(row, version)

    def _set_aliases(
        self,
        session: Any,
        key: ModelKey,
        row: ModelRow,
        version: ModelVersionRow,
        aliases: builtins.list[str],
    ) -> None:
        """Give `version` exactly `aliases`; the ones other versions held move here."""
        if DEFAULT in aliases:
            row.default_version = version.version_id
        elif row.default_version == version.version_id:
            raise invalid_argument(
                [
                    FieldViolation(
                        "model.version_aliases",
                        f"version {version.version_id} holds the model's default alias, which cannot be "
                        "removed: give 'default' to another version instead",
                    )
                ]
            )
        others = list(dict.fromkeys(a for a in aliases if a != DEFAULT))
        take_aliases_in(session, key, others, version.version_id)
        version.aliases = others

    def merge_aliases(self, project: str, location: str, ref: str, body: Any) -> dict[str, Any]:
        """:mergeVersionAliases: `alias` adds (moving it from another version), `-alias` removes."""
        key, selector = self._key(project, location, ref)
        request = parse_body(MergeVersionAliasesRequest, body if body is not None else {})
        violations = check_aliases(request.version_aliases, "version_aliases", allow_removal=True)
        if not request.version_aliases:
            violations.append(FieldViolation("version_aliases", "Required field is not set."))
        if f"-{DEFAULT}" in request.version_aliases:
            violations.append(
                FieldViolation("version_aliases", "the default alias cannot be removed; move it instead")
            )
        if violations:
            raise invalid_argument(violations)
        with self.store.transaction() as session:
            row, version = self._resolve_in(session, key, selector, lock=True)
            current = ([DEFAULT] if row.default_version == version.version_id else []) + list(version.aliases)
            removed = {a[1:] for a in request.version_aliases if a.startswith("-")}
            added = [a for a in request.version_aliases if not a.startswith("-")]
            merged = [a for a in dict.fromkeys([*current, *added]) if a not in removed]
            self._set_aliases(session, key, row, version, merged)
            now = now_utc()
            version.update_time = now
            row.update_time = now
            return model_wire(row, version)

    # ------------------------------------------------------------ delete
    def delete(self, project: str, location: str, ref: str, api_version: str = "v1") -> dict[str, Any]:
        """Delete the model, all its versions and their registry copies; a finished Operation."""
        key, selector = self._key(project, location, ref)
        if selector is not None:
            raise invalid_argument(
                [
                    FieldViolation(
                        "name", "name the model without @version; use :deleteVersion for one version"
                    )
                ]
            )
        with self.store.transaction() as session:
            if model_in(session, key, lock=True) is None:
                raise not_found(f"Model {model_name(key.project_number, key.location, key.model_id)!r}")
            paths = delete_model_in(session, key)
            op = self._empty_operation(key, "delete_model", api_version)
            session.add(op)
        for path in paths:
            self.artifacts.remove(path)
        return operation_wire(op)

    def delete_version(
        self, project: str, location: str, ref: str, api_version: str = "v1"
    ) -> dict[str, Any]:
        """Delete one version; the default version goes only when it is the last (and the model with it)."""
        key, selector = self._key(project, location, ref)
        if selector is None:
            raise invalid_argument(
                [FieldViolation("name", "name a version: MODEL@VERSION_ID or MODEL@ALIAS")]
            )
        with self.store.transaction() as session:
            row, version = self._resolve_in(session, key, selector, lock=True)
            count = len(versions_in(session, key))
            if version.version_id == row.default_version and count > 1:
                raise failed_precondition(
                    f"Version {version.version_id} is the default version of the model "
                    f"{model_name(key.project_number, key.location, key.model_id)}; give the 'default' alias "
                    "to another version before deleting it."
                )
            if count == 1:
                paths = delete_model_in(session, key)
            else:
                paths = [version.artifact_path] if version.artifact_path else []
                session.delete(version)
                row.update_time = now_utc()
            op = self._empty_operation(key, "delete_model_version", api_version)
            session.add(op)
        for path in paths:
            self.artifacts.remove(path)
        return operation_wire(op)

    def _empty_operation(self, key: ModelKey, kind: str, api_version: str) -> OperationRow:
        empty = {"@type": "type.googleapis.com/google.protobuf.Empty"}
        return self._done_operation(key, kind, "DeleteOperationMetadata", api_version, empty)


def _already_exists(key: ModelKey) -> ApiError:
    return already_exists("Model", model_name(key.project_number, key.location, key.model_id))


__all__ = ["ALIAS", "DEFAULT", "MODEL_ID", "ModelService", "check_aliases", "model_name", "model_wire"]
