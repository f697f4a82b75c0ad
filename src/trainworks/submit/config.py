"""The submitter's run configuration: a YAML file loaded into a validated, immutable :class:`RunConfig`.

Every problem is reported at once, one line each, as ``<file>: <field path>: <what is wrong>``; unknown keys
get a "did you mean". Relative paths are taken from the YAML file's folder.
"""

from __future__ import annotations

import difflib
import keyword
import re
import types
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from trainworks.catalog import machines
from trainworks.kernel.flags import duration_seconds
from trainworks.storage.gcs import StoragePathError, parse_gcs_uri

# Short GPU names accepted in `hardware.gpu_type`, and the AcceleratorType enum names they stand for.
GPU_TYPES: dict[str, str] = {
    "T4": "NVIDIA_TESLA_T4",
    "L4": "NVIDIA_L4",
    "V100": "NVIDIA_TESLA_V100",
    "P100": "NVIDIA_TESLA_P100",
    "P4": "NVIDIA_TESLA_P4",
    "K80": "NVIDIA_TESLA_K80",
    "A100": "NVIDIA_TESLA_A100",
    "A100_80GB": "NVIDIA_A100_80GB",
    "H100": "NVIDIA_H100_80GB",
    "H100_MEGA": "NVIDIA_H100_MEGA_80GB",
    "H200": "NVIDIA_H200_141GB",
}
GPU_SHORT_NAMES: dict[str, str] = {enum: short for short, enum in GPU_TYPES.items()}

RUN_ID_LABEL = "trainworks-run-id"
# Keys starting with this are the submitter's own (run id, code hash, capacity ledger...).
RESERVED_LABEL_PREFIX = "trainworks-"
MAX_LABELS = 64  # per job, ours included
# The submitter keeps four label slots for its trainworks-* labels.
MAX_USER_LABELS = MAX_LABELS - 4
MAX_LABEL_CHARS = 63
RESERVED_ENV = frozenset({"TRAINWORKS_RUN_ID", "TRAINWORKS_CONFIG_URI"})
MAX_ENV = 100
MAX_NAME_CHARS = 40  # leaves room for "-yyyymmdd-hhmmss-hhhhhh" in a 63-character run id

_NAME = re.compile(r"^[a-z]([a-z0-9-]*[a-z0-9])?$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REGION = re.compile(r"^[a-z]+(-[a-z]+)+[0-9]+$")
_PROJECT = re.compile(r"^[a-z0-9][a-z0-9.:-]{0,62}$")
_HOST_PORT = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?$")


class RunConfigError(ValueError):
    """A run configuration that cannot be used; the message has one line per problem."""

    def __init__(self, source: str, problems: Sequence[tuple[str, str]]) -> None:
        self.source = source
        self.problems = list(problems)
        lines = [f"{source}: {path}: {msg}" if path else f"{source}: {msg}" for path, msg in self.problems]
        super().__init__("\n".join(lines))


class _Problems(ValueError):
    """Raised by cross-field validators: several problems, each at a path relative to the model."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p}: {m}" for p, m in problems))


# ----------------------------------------------------------------------------------------- value coercion
def _scalar_text(value: Any) -> Any:
    """YAML numbers and booleans as the strings a command line or environment would hold."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


def _strings(value: Any) -> Any:
    return [_scalar_text(v) for v in value] if isinstance(value, list) else value


def _string_map(value: Any) -> Any:
    return {k: _scalar_text(v) for k, v in value.items()} if isinstance(value, dict) else value


def parse_duration(value: Any) -> float:
    """Seconds from a number or a string: ``600``, ``"600"``, ``"600s"``, ``"10m"``, ``"1h30m"``, ``"2d"``."""
    if isinstance(value, bool):
        raise ValueError("must be a duration such as 600, 600s, 10m or 1h")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        parsed = duration_seconds(value, ascii_digits=True)
        if parsed is None:
            raise ValueError(f"{value!r} is not a duration; use e.g. 600, 600s, 10m, 1h or 1h30m")
        seconds = parsed
    else:
        raise ValueError("must be a duration such as 600, 600s, 10m or 1h")
    if seconds < 0:
        raise ValueError("must not be negative")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]
TextList = Annotated[list[str], BeforeValidator(_strings)]
TextMap = Annotated[dict[str, str], BeforeValidator(_string_map)]


def _upper(value: Any) -> Any:
    return value.strip().upper().replace("-", "_") if isinstance(value, str) else value


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _label_char_ok(ch: str) -> bool:
    # GCP label rules: lowercase letters (international ones too), digits, '_' and '-'.
    return ch in "_-" or ch.isdigit() or ch.islower() or unicodedata.category(ch) == "Lo"


def label_problems(labels: Mapping[str, str]) -> list[tuple[str, str]]:
    """GCP label rules, as (key, problem) pairs; the count limit is the caller's."""
    out: list[tuple[str, str]] = []
    for key, value in labels.items():
        if not key or len(key) > MAX_LABEL_CHARS:
            out.append((key, f"label keys must be 1 to {MAX_LABEL_CHARS} characters long"))
        elif not (key[0].islower() or unicodedata.category(key[0]) == "Lo"):
            out.append((key, "label keys must start with a lowercase letter"))
        elif not all(_label_char_ok(c) for c in key):
            out.append((key, "label keys may contain only lowercase letters, digits, '_' and '-'"))
        if len(value) > MAX_LABEL_CHARS:
            out.append((key, f"label values must be at most {MAX_LABEL_CHARS} characters long"))
        elif not all(_label_char_ok(c) for c in value):
            out.append(
                (key, f"label value {value!r} may contain only lowercase letters, digits, '_' and '-'")
            )
    return out


def normalise_bucket(value: str) -> str:
    """``gs://name``, ``gs://name/`` or ``name`` -> ``name``; anything with an object path is refused."""
    text = value.strip()
    name = text[len("gs://") :] if text.startswith("gs://") else text
    name = name.rstrip("/")
    if not name:
        raise ValueError("a bucket name is required, e.g. gs://my-code")
    if "/" in name:
        raise ValueError(
            f"{value!r} has an object path; give only the bucket, e.g. gs://{name.split('/')[0]}"
        )
    try:
        parse_gcs_uri(f"gs://{name}/")
    except StoragePathError:
        raise ValueError(
            f"{name!r} is not a valid bucket name (3-222 lowercase letters, digits, '-', '_' and '.', "
            "starting and ending with a letter or digit)"
        ) from None
    return name


# ----------------------------------------------------------------------------------------- the models
class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HardwareConfig(_Model):
    profile: Literal["cpu", "gpu"] = "cpu"
    machine_type: str | None = None
    gpu_type: str | None = None  # normalised to the short name (T4, A100_80GB, ...)
    # None: 1, or the built-in count of an explicit accelerator-optimized machine type (a2, a3, g2)
    gpu_count: int | None = None
    threads: int | None = Field(default=None, ge=1)

    _lower_profile = field_validator("profile", mode="before")(_lower)

    @field_validator("machine_type")
    @classmethod
    def _known_machine(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        if machines.machine_type(value) is None:
            hint = machines.suggest(value)
            raise ValueError(
                f"unknown machine type {value!r}" + (f"; did you mean {', '.join(hint)}?" if hint else "")
            )
        return value

    @field_validator("gpu_type", mode="before")
    @classmethod
    def _known_gpu(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        name = _upper(value)
        if name in GPU_TYPES:
            return name
        if name in GPU_SHORT_NAMES:
            return GPU_SHORT_NAMES[name]
        hint = difflib.get_close_matches(name, [*GPU_TYPES, *GPU_SHORT_NAMES], n=1, cutoff=0.6)
        raise ValueError(
            f"unknown GPU type {value!r}; use one of {', '.join(GPU_TYPES)} or the AcceleratorType enum name"
            + (f" (did you mean {hint[0]}?)" if hint else "")
        )

    @model_validator(mode="after")
    def _consistent(self) -> HardwareConfig:
        problems: list[tuple[str, str]] = []
        machine = machines.machine_type(self.machine_type) if self.machine_type else None
        built_in = machine is not None and machine.accelerator_type is not None
        if self.profile == "cpu":
            if self.gpu_type is not None:
                problems.append(("gpu_type", "only allowed when profile is gpu"))
            if self.gpu_count is not None:
                problems.append(("gpu_count", "only allowed when profile is gpu"))
            if machine is not None and built_in:
                problems.append(
                    (
                        "machine_type",
                        f"{machine.name} comes with {machine.accelerator_count} x "
                        f"{machine.accelerator_type}; set profile: gpu to use it",
                    )
                )
        else:
            if self.gpu_count is not None and self.gpu_count < 1:
                problems.append(("gpu_count", "must be >= 1 when profile is gpu"))
            if self.gpu_type is None and not built_in:
                problems.append(("gpu_type", f"required when profile is gpu: one of {', '.join(GPU_TYPES)}"))
        if not problems and self.profile == "gpu":
            # Whatever the planner cannot turn into a machine is a configuration problem: say so at load.
            from trainworks.submit.plan import PlanError, resolve_hardware

            try:
                resolve_hardware(self)
            except PlanError as exc:
                problems.append(((exc.field or "").removeprefix("hardware").lstrip("."), exc.message))
        if problems:
            raise _Problems(problems)
        return self


class TargetConfig(_Model):
    kind: Literal["trainworks", "vertex"] = "trainworks"
    # trainworks: the server URL, None = $TRAINWORKS_ENDPOINT or http://127.0.0.1:8080 (resolved by the
    # target); vertex: an api endpoint override (host[:port] or an http(s) URL), None = the regional one.
    endpoint: str | None = None
    project: str = "default"

    _lower_kind = field_validator("kind", mode="before")(_lower)

    @field_validator("project")
    @classmethod
    def _project_id(cls, value: str) -> str:
        if not _PROJECT.match(value):
            raise ValueError(f"{value!r} is not a project id (lowercase letters, digits, '-', '.' and ':')")
        return value

    @model_validator(mode="after")
    def _endpoint_form(self) -> TargetConfig:
        value = self.endpoint
        if value is None:
            return self
        is_url = re.match(r"^https?://[^/\s]+/?$", value) is not None
        if self.kind == "trainworks" and not is_url:
            raise _Problems([("endpoint", f"{value!r} is not a server URL such as http://127.0.0.1:8080")])
        if self.kind == "vertex" and not (is_url or _HOST_PORT.match(value)):
            raise _Problems(
                [
                    (
                        "endpoint",
                        f"{value!r} is not an API endpoint: use host[:port] (us-central1-aiplatform."
                        "googleapis.com) or an http(s) URL",
                    )
                ]
            )
        return self


class CapacityConfig(_Model):
    policy: Literal["FAILOVER", "EAGER_NEXT_REGION"] = "FAILOVER"
    preflight: bool = True
    same_region_retries: int = Field(default=2, ge=0)
    rounds: int = Field(default=1, ge=1)
    backoff_seconds: float = Field(default=2.0, ge=0)
    backoff_max_seconds: float = Field(default=60.0, ge=0)
    provisioning_timeout: Duration = Field(default=600.0, gt=0)

    _upper_policy = field_validator("policy", mode="before")(_upper)

    @model_validator(mode="after")
    def _backoff_order(self) -> CapacityConfig:
        if self.backoff_max_seconds < self.backoff_seconds:
            raise _Problems(
                [("backoff_max_seconds", f"must be >= backoff_seconds ({self.backoff_seconds:g})")]
            )
        return self


class FollowConfig(_Model):
    wait_timeout: Duration = Field(default=86400.0, ge=0)  # 0 = no limit
    stall_grace: Duration = Field(default=1800.0, gt=0)
    poll_interval: float = Field(default=5.0, gt=0)
    stream_logs: bool = True


class SchedulingConfig(_Model):
    timeout: Duration | None = Field(default=None, gt=0)
    restart_job_on_worker_restart: bool = False
    strategy: Literal["STANDARD", "SPOT", "FLEX_START"] | None = None

    _upper_strategy = field_validator("strategy", mode="before")(_upper)


class RunConfig(_Model):
    name: str
    entry_module: str
    package_dir: Path
    args: TextList = Field(default_factory=list)
    hardware: HardwareConfig = Field(default_factory=HardwareConfig)
    workers: int = Field(default=1, ge=1)
    regions: list[str] = Field(default_factory=lambda: ["us-central1"])
    image: str
    python: str = "python3"
    code_bucket: str
    base_output_dir: str | None = None
    service_account: str = ""
    labels: TextMap = Field(default_factory=dict)
    env: TextMap = Field(default_factory=dict)
    target: TargetConfig = Field(default_factory=TargetConfig)
    capacity: CapacityConfig = Field(default_factory=CapacityConfig)
    follow: FollowConfig = Field(default_factory=FollowConfig)
    scheduling: SchedulingConfig = Field(default_factory=SchedulingConfig)

    # Where the configuration came from, for error messages of later overrides.
    _source: str = PrivateAttr(default="run configuration")

    @field_validator("name")
    @classmethod
    def _run_name(cls, value: str) -> str:
        if len(value) > MAX_NAME_CHARS:
            raise ValueError(f"must be at most {MAX_NAME_CHARS} characters, got {len(value)}")
        if not _NAME.match(value):
            raise ValueError(
                f"{value!r} must be lowercase letters, digits and hyphens, starting with a letter and not "
                "ending with a hyphen"
            )
        return value

    @field_validator("entry_module")
    @classmethod
    def _module_name(cls, value: str) -> str:
        if not _MODULE.match(value) or any(keyword.iskeyword(p) for p in value.split(".")):
            raise ValueError(f"{value!r} is not a Python module name such as forecast.train")
        return value

    @field_validator("package_dir", mode="before")
    @classmethod
    def _package_dir(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str | Path):
            return value
        path = Path(value).expanduser()
        base = (info.context or {}).get("base_dir")
        if not path.is_absolute():
            path = Path(base or Path.cwd()) / path
        path = path.resolve()
        if not path.exists():
            raise ValueError(f"{value} does not exist (looked at {path})")
        if not path.is_dir():
            raise ValueError(f"{value} is not a directory")
        if not path.name.isidentifier() or keyword.iskeyword(path.name):
            raise ValueError(
                f"the folder name {path.name!r} is the top-level package name, so it must be a Python "
                "identifier"
            )
        return path

    @field_validator("regions")
    @classmethod
    def _regions(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("at least one region is required, e.g. [us-central1]")
        problems: list[tuple[str, str]] = []
        seen: set[str] = set()
        for i, region in enumerate(value):
            if not _REGION.match(region):
                problems.append((f"[{i}]", f"{region!r} is not a region name such as us-central1"))
            elif region in seen:
                problems.append((f"[{i}]", f"{region} is listed twice"))
            seen.add(region)
        if problems:
            raise _Problems(problems)
        return value

    @field_validator("image", "python")
    @classmethod
    def _word(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        if any(c.isspace() for c in value):
            raise ValueError(f"{value!r} must not contain spaces")
        return value

    @field_validator("code_bucket")
    @classmethod
    def _bucket(cls, value: str) -> str:
        return normalise_bucket(value)

    @field_validator("base_output_dir")
    @classmethod
    def _output_dir(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            path = parse_gcs_uri(value)
        except StoragePathError as exc:
            raise ValueError(f"must be a gs:// prefix: {exc}") from None
        if not path.key.strip("/"):
            return f"gs://{path.bucket}/"
        return value

    @field_validator("service_account")
    @classmethod
    def _account(cls, value: str) -> str:
        if value and not re.fullmatch(r"[^@\s]+@[^@\s]+", value):
            raise ValueError(f"{value!r} is not a service account email")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        problems = [(f".{k}" if k else "", msg) for k, msg in label_problems(value)]
        problems += [
            (f".{k}", f"keys starting with {RESERVED_LABEL_PREFIX!r} are the submitter's own")
            for k in value
            if k.startswith(RESERVED_LABEL_PREFIX)
        ]
        if len(value) > MAX_USER_LABELS:
            problems.append(
                (
                    "",
                    f"at most {MAX_USER_LABELS} labels are allowed ({MAX_LABELS} per job, some kept for the "
                    f"submitter), got {len(value)}",
                )
            )
        if problems:
            raise _Problems(problems)
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        problems: list[tuple[str, str]] = []
        for name, text in value.items():
            if not _ENV_NAME.match(name):
                problems.append(
                    (
                        f".{name}",
                        "not a valid variable name (letters, digits and '_', not starting with a digit)",
                    )
                )
            elif name in RESERVED_ENV:
                problems.append((f".{name}", "set by the submitter; choose another name"))
            if not text:
                # Vertex AI treats an empty value as unset and rejects the job.
                problems.append((f".{name}", "the value must not be empty"))
        if len(value) > MAX_ENV:
            problems.append(("", f"at most {MAX_ENV} variables are allowed, got {len(value)}"))
        if problems:
            raise _Problems(problems)
        return value

    @model_validator(mode="after")
    def _module_in_package(self) -> RunConfig:
        package = self.package_dir.name
        top, _, rest = self.entry_module.partition(".")
        if top != package:
            raise _Problems(
                [
                    (
                        "entry_module",
                        f"must be inside the staged package {package!r} (from package_dir), e.g. "
                        f"{package}.{rest or 'train'}",
                    )
                ]
            )
        parts = rest.split(".") if rest else []
        inner = self.package_dir.joinpath(*parts)
        candidates = (
            [inner / "__main__.py"] if not parts else [inner.with_suffix(".py"), inner / "__main__.py"]
        )
        if not any(c.is_file() for c in candidates):
            looked = " or ".join(str(c.relative_to(self.package_dir.parent)) for c in candidates)
            raise _Problems([("entry_module", f"{self.entry_module} is not in package_dir (no {looked})")])
        return self

    @property
    def source(self) -> str:
        return self._source

    def with_overrides(self, regions: Sequence[str] | None = None, workers: int | None = None) -> RunConfig:
        """A validated copy with command-line overrides applied (None leaves a setting as it is)."""
        data = self.model_dump(exclude_unset=True)
        if regions is not None:
            data["regions"] = list(regions)
        if workers is not None:
            data["workers"] = workers
        return parse_run_config(data, f"{self._source} (with overrides)")


# ----------------------------------------------------------------------------------------- loading
def load_run_config(path: Path) -> RunConfig:
    """Read and validate a YAML run configuration; relative paths in it are from the file's folder."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RunConfigError(source, [("", f"cannot read the file: {exc.strerror or exc}")]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise RunConfigError(source, [("", f"not valid YAML: {where}{problem}")]) from None
    if data is None:
        raise RunConfigError(source, [("", "the file is empty; expected a mapping of settings")])
    if not isinstance(data, Mapping):
        raise RunConfigError(source, [("", f"expected a mapping of settings, got a {type(data).__name__}")])
    config = parse_run_config(data, source, base_dir=Path(path).resolve().parent)
    return config


def parse_run_config(data: Mapping[str, Any], source: str, *, base_dir: Path | None = None) -> RunConfig:
    """Validate already-parsed settings; `source` names them in errors, `base_dir` anchors relative paths
    (default: the current directory)."""
    if not isinstance(data, Mapping):
        raise RunConfigError(source, [("", f"expected a mapping of settings, got a {type(data).__name__}")])
    try:
        config = RunConfig.model_validate(dict(data), context={"base_dir": base_dir})
    except ValidationError as exc:
        raise RunConfigError(source, _problems_of(exc)) from None
    config._source = source
    return config


def _problems_of(exc: ValidationError) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if p != "[key]")
        ctx = err.get("ctx") or {}
        cause = ctx.get("error")
        if isinstance(cause, _Problems):
            base = _path(loc)
            out += [(_join(base, sub), msg) for sub, msg in cause.problems]
            continue
        out.append((_path(loc), _message(err, loc)))
    return out


def _join(base: str, sub: str) -> str:
    """`base` + a relative path that is empty, `.key`, `[i]` or a bare field name."""
    if not sub:
        return base
    if sub.startswith("["):
        return base + sub
    sub = sub.removeprefix(".")
    return f"{base}.{sub}" if base else sub


def _path(loc: Sequence[str | int]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _message(err: Any, loc: tuple[str | int, ...]) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return "unknown key" + _suggestion(loc)
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    bounds = {
        "greater_than_equal": (">=", "ge"),
        "greater_than": (">", "gt"),
        "less_than_equal": ("<=", "le"),
        "less_than": ("<", "lt"),
    }
    if kind in bounds:
        sign, key = bounds[kind]
        return f"must be {sign} {_show(ctx[key])}, got {_show(err['input'])}"
    if kind == "literal_error":
        return f"must be {ctx['expected']}, got {_show(err['input'])}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a mapping, got {_kind_of(err['input'])}"
    if kind == "list_type":
        return f"must be a list, got {_kind_of(err['input'])}"
    text = str(err["msg"]).replace("Input should be", "must be")
    return f"{text}, got {_show(err['input'])}"


def _show(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:g}"
    return repr(value)[:60]


def _kind_of(value: Any) -> str:
    names = {str: "a string", int: "a number", float: "a number", bool: "a boolean", list: "a list"}
    if value is None:
        return "nothing (null)"
    return names.get(type(value), f"a {type(value).__name__}")


def _suggestion(loc: tuple[str | int, ...]) -> str:
    model = _model_at(loc[:-1])
    key = str(loc[-1])
    if model is None:
        return ""
    fields = list(model.model_fields)
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower().replace("-", "_")
    if snake in fields and snake != key:
        return f"; did you mean {snake!r}?"
    hint = difflib.get_close_matches(key, fields, n=1, cutoff=0.6) or difflib.get_close_matches(
        snake, fields, n=1, cutoff=0.6
    )
    return f"; did you mean {hint[0]!r}?" if hint else f"; known keys: {', '.join(fields)}"


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] = RunConfig
    for part in loc:
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        found = _model_in(field.annotation)
        if found is None:
            return None
        model = found
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        for arg in get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
