"""`trainworks custom-jobs`: create and manage custom training jobs, modelled on `gcloud ai custom-jobs`."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
import yaml

from trainworks.client.rest import TERMINAL_STATES, ApiError, TrainworksClient, TrainworksConnectionError

app = typer.Typer(
    name="custom-jobs",
    no_args_is_help=True,
    add_completion=False,
    help="Create and manage custom training jobs (like `gcloud ai custom-jobs`).",
)

DEFAULT_ENDPOINT = "http://127.0.0.1:8080"


class OutputFormat(StrEnum):
    human = "human"
    json = "json"
    yaml = "yaml"


# ====================================================================== flag parsing (pure, unit tested)
class FlagError(Exception):
    """A command-line value is wrong; `flag` names the flag, the message says what and why."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(f"Invalid value for [{flag}]: {message}")
        self.flag = flag
        self.message = message


def split_list(value: str, delim: str = ",") -> list[str]:
    """Split a gcloud ArgList value. `^D^` at the start picks another delimiter D (gcloud escaping).

    `a,b` -> [a, b]; `^:^python3:-c:print(1, 2)` -> [python3, -c, print(1, 2)].
    """
    if value.startswith("^"):
        end = value.find("^", 1)
        if end > 1:
            delim, value = value[1:end], value[end + 1 :]
    if value == "":
        return []
    return value.split(delim)


def split_lists(values: Iterable[str] | None) -> list[str] | None:
    """A repeated ArgList flag: every occurrence is split and the parts are concatenated."""
    if not values:
        return None
    out: list[str] = []
    for value in values:
        out.extend(split_list(value))
    return out


def parse_dict(value: str, flag: str, spec: dict[str, type] | None = None) -> dict[str, Any]:
    """Parse a gcloud ArgDict value `k=v,k2=v2` (`^D^` escaping too); with `spec`, only its keys are valid."""
    out: dict[str, Any] = {}
    for item in split_list(value):
        if item == "":
            continue
        if "=" not in item:
            raise FlagError(
                flag,
                f"bad syntax for dict arg: [{item}]; expected KEY=VALUE pairs separated by commas "
                "(use the ^D^ prefix to pick another separator, e.g. ^:^k=a,b:k2=c)",
            )
        key, val = item.split("=", 1)
        key = key.strip()
        if not key:
            raise FlagError(flag, f"bad syntax for dict arg: [{item}]; the key is empty")
        if key in out:
            raise FlagError(flag, f"key [{key}] is given more than once")
        if spec is not None:
            if key not in spec:
                raise FlagError(flag, f"unknown key [{key}]; valid keys are [{', '.join(sorted(spec))}]")
            if spec[key] is int:
                try:
                    out[key] = int(val)
                except ValueError:
                    raise FlagError(flag, f"key [{key}] needs an integer, got [{val}]") from None
                continue
        out[key] = val
    return out


#: Keys of --worker-pool-spec, as gcloud's custom-jobs create has them (plus disk-type/disk-size).
WORKER_POOL_SPEC_KEYS: dict[str, type] = {
    "machine-type": str,
    "replica-count": int,
    "accelerator-type": str,
    "accelerator-count": int,
    "container-image-uri": str,
    "executor-image-uri": str,
    "python-module": str,
    "disk-type": str,
    "disk-size": int,
}

#: gcloud keys that build and push an image from local code, which this server cannot do.
LOCAL_PACKAGING_KEYS = (
    "local-package-path",
    "script",
    "requirements",
    "extra-packages",
    "extra-dirs",
    "output-image-uri",
)

_WPS = "--worker-pool-spec"


def _accelerator_types() -> list[str]:
    from trainworks.resources.enums import AcceleratorType

    return sorted(a.name for a in AcceleratorType if a.name.startswith(("NVIDIA", "TPU")))


def parse_worker_pool_spec(value: str, python_package_uris: list[str] | None = None) -> dict[str, Any]:
    """One `--worker-pool-spec` value -> a WorkerPoolSpec (camelCase JSON), checked as gcloud does.

    An empty value gives `{}`, which skips that pool.
    """
    spec = value.strip()
    if not spec:
        return {}
    keys = set(parse_dict(spec, _WPS, None))
    unsupported = sorted(keys.intersection(LOCAL_PACKAGING_KEYS))
    if unsupported:
        raise FlagError(
            _WPS,
            f"key [{unsupported[0]}] is not supported: trainworks does not build images from local code. "
            "Upload a Python package and use executor-image-uri, python-module and --python-package-uris, "
            "or use container-image-uri",
        )
    fields = parse_dict(spec, _WPS, WORKER_POOL_SPEC_KEYS)
    if "machine-type" not in fields or not fields["machine-type"]:
        raise FlagError(_WPS, "key [machine-type] required in dict arg but not provided")
    if "accelerator-count" in fields and "accelerator-type" not in fields:
        raise FlagError(_WPS, "key [accelerator-type] required as [accelerator-count] is specified")
    accelerator = fields.get("accelerator-type")
    if accelerator is not None:
        valid = _accelerator_types()
        if accelerator not in valid:
            raise FlagError(
                _WPS,
                f"found invalid value of [accelerator-type]: {accelerator}. "
                f"Available values are [{', '.join(valid)}]",
            )
    has_container = "container-image-uri" in fields
    has_executor = "executor-image-uri" in fields
    if has_container == has_executor:
        raise FlagError(_WPS, "exactly one of keys [executor-image-uri, container-image-uri] is required")
    if has_container and "python-module" in fields:
        raise FlagError(_WPS, "key [python-module] is not allowed together with key [container-image-uri]")
    if has_executor and not fields.get("python-module"):
        raise FlagError(_WPS, "key [python-module] is required with key [executor-image-uri]")
    replicas = fields.get("replica-count", 1)
    if replicas < 1:
        raise FlagError(_WPS, f"key [replica-count] must be at least 1, got {replicas}")

    machine: dict[str, Any] = {"machineType": fields["machine-type"]}
    if accelerator:
        machine["acceleratorType"] = accelerator
        machine["acceleratorCount"] = fields.get("accelerator-count", 1)
    pool: dict[str, Any] = {"machineSpec": machine, "replicaCount": str(replicas)}
    if "disk-type" in fields or "disk-size" in fields:
        disk: dict[str, Any] = {}
        if fields.get("disk-type"):
            disk["bootDiskType"] = fields["disk-type"]
        if "disk-size" in fields:
            disk["bootDiskSizeGb"] = fields["disk-size"]
        pool["diskSpec"] = disk
    if has_container:
        pool["containerSpec"] = {"imageUri": fields["container-image-uri"]}
    else:
        pool["pythonPackageSpec"] = {
            "executorImageUri": fields["executor-image-uri"],
            "packageUris": list(python_package_uris or []),
            "pythonModule": fields["python-module"],
        }
    return pool


def parse_worker_pool_specs(
    values: list[str], python_package_uris: list[str] | None = None
) -> list[dict[str, Any]]:
    """Every `--worker-pool-spec` flag in order: the Nth flag is pool N."""
    if len(values) > 4:
        raise FlagError(_WPS, f"at most 4 worker pools are allowed, got {len(values)}")
    pools = [parse_worker_pool_spec(v, python_package_uris) for v in values]
    if pools and not pools[0]:
        raise FlagError(_WPS, "empty value is not allowed for the first --worker-pool-spec flag")
    return pools


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(value: str, flag: str = "--timeout") -> str:
    """`3600`, `3600s`, `90m`, `1h30m`, `2d` -> proto Duration JSON (`"5400s"`)."""
    text = value.strip().lower()
    seconds: float
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        seconds = float(text)
    else:
        pos, seconds = 0, 0.0
        for match in _DURATION_PART.finditer(text):
            if match.start() != pos:
                break
            seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
            pos = match.end()
        if not text or pos != len(text):
            raise FlagError(flag, f"[{value}] is not a duration; use e.g. 3600s, 90m, 1h30m or 2d")
    if seconds <= 0:
        raise FlagError(flag, f"[{value}] must be a positive duration")
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds:.9f}".rstrip("0") + "s"


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def camelize(value: Any, _map_keys: bool = False) -> Any:
    """snake_case keys -> lowerCamelCase, recursively; keys inside `labels` (a map) are left alone."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key) if _map_keys else _camel(str(key))
            out[name] = item if name == "labels" and not _map_keys else camelize(item)
        return out
    if isinstance(value, list):
        return [camelize(v) for v in value]
    return value


def load_config(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read a --config file (YAML or JSON). Returns (job fields, CustomJobSpec).

    The file holds a CustomJobSpec like gcloud's --config; a whole CustomJob (with `jobSpec`) is also
    accepted, its displayName and labels then serve as defaults for the flags.
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise FlagError("--config", f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FlagError("--config", f"{path} is not valid YAML or JSON: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FlagError(
            "--config", f"{path} must hold a mapping (a CustomJobSpec), not {type(data).__name__}"
        )
    data = camelize(data)
    job: dict[str, Any] = {}
    spec = data
    if "jobSpec" in data:
        spec = data.pop("jobSpec") or {}
        job = data
        if not isinstance(spec, dict):
            raise FlagError("--config", "jobSpec must be a mapping")
    pools = spec.get("workerPoolSpecs")
    if isinstance(pools, dict):  # gcloud's own help shows a single pool without a list
        spec["workerPoolSpecs"] = [pools]
    elif pools is not None and not isinstance(pools, list):
        raise FlagError("--config", "workerPoolSpecs must be a list of worker pool specs")
    return job, spec


def _merge_env(existing: list[dict[str, Any]], updates: dict[str, str]) -> list[dict[str, Any]]:
    out = [dict(e) for e in existing if e.get("name") not in updates]
    out.extend({"name": k, "value": v} for k, v in updates.items())
    return out


def build_custom_job(
    *,
    display_name: str | None,
    worker_pool_specs: list[str] | None = None,
    config: Path | None = None,
    args: list[str] | None = None,
    command: list[str] | None = None,
    labels: list[str] | None = None,
    env_vars: list[str] | None = None,
    python_package_uris: list[str] | None = None,
    base_output_dir: str | None = None,
    timeout: str | None = None,
    service_account: str | None = None,
    network: str | None = None,
    persistent_resource_id: str | None = None,
    enable_web_access: bool = False,
    enable_dashboard_access: bool = False,
) -> dict[str, Any]:
    """The CustomJob body of `create`: --config first, then the flags on top (as gcloud merges them)."""
    job: dict[str, Any] = {}
    spec: dict[str, Any] = {}
    if config is not None:
        job, spec = load_config(config)
    package_uris = split_lists(python_package_uris)
    if worker_pool_specs:
        spec["workerPoolSpecs"] = parse_worker_pool_specs(list(worker_pool_specs), package_uris)
    pools: list[dict[str, Any]] = spec.get("workerPoolSpecs") or []
    if not pools:
        raise FlagError(
            _WPS, "at least one --worker-pool-spec (or a --config with workerPoolSpecs) is required"
        )
    if not all(isinstance(p, dict) for p in pools):
        raise FlagError("--config", "every entry of workerPoolSpecs must be a mapping")

    arg_list = split_lists(args)
    command_list = split_lists(command)
    env: dict[str, str] = {}
    for item in env_vars or []:
        env.update(parse_dict(item, "--env-vars"))
    for pool in pools:
        container, package = pool.get("containerSpec"), pool.get("pythonPackageSpec")
        for task in (container, package):
            if not isinstance(task, dict):
                continue
            if arg_list is not None:
                task["args"] = list(arg_list)
            if env:
                task["env"] = _merge_env(task.get("env") or [], env)
        if isinstance(container, dict) and command_list is not None:
            container["command"] = list(command_list)
        if isinstance(package, dict) and package_uris is not None:
            package["packageUris"] = list(package_uris)

    if base_output_dir:
        spec["baseOutputDirectory"] = {"outputUriPrefix": base_output_dir}
    if timeout:
        if not isinstance(spec.get("scheduling"), dict):
            spec["scheduling"] = {}
        spec["scheduling"]["timeout"] = parse_duration(timeout)
    if service_account:
        spec["serviceAccount"] = service_account
    if network:
        spec["network"] = network
    if persistent_resource_id:
        spec["persistentResourceId"] = persistent_resource_id
    if enable_web_access:
        spec["enableWebAccess"] = True
    if enable_dashboard_access:
        spec["enableDashboardAccess"] = True

    name = display_name or job.get("displayName")
    if not name:
        raise FlagError("--display-name", "a display name is required")
    body: dict[str, Any] = {k: v for k, v in job.items() if k not in ("displayName", "labels")}
    body["displayName"] = name
    body["jobSpec"] = spec
    merged_labels = dict(job.get("labels") or {})
    for item in labels or []:
        merged_labels.update(parse_dict(item, "--labels"))
    if merged_labels:
        body["labels"] = merged_labels
    return body


def job_name(value: str, project: str, region: str | None) -> str:
    """A full CustomJob name, from a name or a bare job ID (expanded with --project and --region)."""
    value = value.strip().strip("/")
    if value.startswith("projects/"):
        if "/customJobs/" not in value:
            raise FlagError(
                "CUSTOM_JOB", f"[{value}] is not a CustomJob name (projects/P/locations/L/customJobs/ID)"
            )
        return value
    if "/" in value or not value:
        raise FlagError("CUSTOM_JOB", f"[{value}] is neither a job ID nor a full CustomJob name")
    if not region:
        raise FlagError("--region", f"a region is needed to expand the job ID [{value}]; pass --region")
    return f"projects/{project}/locations/{region}/customJobs/{value}"


# ====================================================================== output
def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else int(os.environ.get("COLUMNS", "0") or 0) or 200
    return Console(file=stream, width=width, highlight=False, soft_wrap=False)


def _print_data(data: Any, fmt: OutputFormat) -> None:
    if fmt == OutputFormat.yaml:
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    sys.stdout.flush()


def _short_id(name: str) -> str:
    return name.rsplit("/", 1)[-1]


_STATE_STYLE = {
    "JOB_STATE_SUCCEEDED": "green",
    "JOB_STATE_FAILED": "red",
    "JOB_STATE_CANCELLED": "yellow",
    "JOB_STATE_CANCELLING": "yellow",
    "JOB_STATE_RUNNING": "cyan",
}


def _styled_state(state: str) -> str:
    style = _STATE_STYLE.get(state)
    return f"[{style}]{state}[/{style}]" if style else state


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _elapsed(job: dict[str, Any]) -> str:
    start = _parse_time(job.get("startTime"))
    if start is None:
        return ""
    end = _parse_time(job.get("endTime"))
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


def _pool_line(index: int, pool: dict[str, Any]) -> str:
    if not pool:
        return f"pool {index}: (skipped)"
    machine = pool.get("machineSpec") or {}
    text = f"pool {index}: {pool.get('replicaCount', '0')} x {machine.get('machineType', '?')}"
    if machine.get("acceleratorType"):
        text += f" + {machine.get('acceleratorCount', 1)} x {machine['acceleratorType']}"
    container, package = pool.get("containerSpec"), pool.get("pythonPackageSpec")
    if container:
        text += f"\n      image    {container.get('imageUri', '')}"
        if container.get("command"):
            text += f"\n      command  {json.dumps(container['command'])}"
        if container.get("args"):
            text += f"\n      args     {json.dumps(container['args'])}"
    elif package:
        text += f"\n      executor {package.get('executorImageUri', '')}"
        text += f"\n      module   {package.get('pythonModule', '')}"
        if package.get("packageUris"):
            text += f"\n      packages {', '.join(package['packageUris'])}"
        if package.get("args"):
            text += f"\n      args     {json.dumps(package['args'])}"
    return text


def print_job_summary(job: dict[str, Any]) -> None:
    from rich.markup import escape

    console = _console()
    rows: list[tuple[str, str]] = [
        ("Name", escape(job.get("name", ""))),
        ("Display name", escape(job.get("displayName", ""))),
        ("State", _styled_state(job.get("state", "JOB_STATE_UNSPECIFIED"))),
        ("Created", job.get("createTime", "")),
    ]
    for label, key in (("Started", "startTime"), ("Ended", "endTime"), ("Updated", "updateTime")):
        if job.get(key):
            rows.append((label, job[key]))
    if _elapsed(job):
        rows.append(("Run time", _elapsed(job)))
    error = job.get("error")
    if error:
        rows.append(
            ("Error", f"[red]code {error.get('code', 0)}: {escape(str(error.get('message', '')))}[/red]")
        )
    if job.get("labels"):
        rows.append(("Labels", escape(", ".join(f"{k}={v}" for k, v in sorted(job["labels"].items())))))
    spec = job.get("jobSpec") or {}
    timeout = (spec.get("scheduling") or {}).get("timeout")
    if timeout:
        rows.append(("Timeout", timeout))
    output_dir = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if output_dir:
        rows.append(("Output dir", escape(output_dir)))
    for label, key in (("Service account", "serviceAccount"), ("Network", "network")):
        if spec.get(key):
            rows.append((label, escape(spec[key])))
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        console.print(f"[bold]{label + ':':<{width}}[/bold]{value}", soft_wrap=True)
    pools = spec.get("workerPoolSpecs") or []
    if pools:
        console.print("[bold]Worker pools:[/bold]")
        for i, pool in enumerate(pools):
            console.print("  " + escape(_pool_line(i, pool)), soft_wrap=True)


def print_job_table(jobs: list[dict[str, Any]]) -> None:
    from rich.markup import escape
    from rich.table import Table

    console = _console()
    if not jobs:
        console.print("Listed 0 items.")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("CUSTOM_JOB_ID", no_wrap=True)
    table.add_column("DISPLAY_NAME", overflow="fold")
    table.add_column("STATE", no_wrap=True)
    table.add_column("CREATE_TIME", no_wrap=True)
    table.add_column("RUN_TIME", no_wrap=True)
    for job in jobs:
        table.add_row(
            _short_id(job.get("name", "")),
            escape(job.get("displayName", "")),
            _styled_state(job.get("state", "")),
            job.get("createTime", ""),
            _elapsed(job),
        )
    console.print(table)


def _status(message: str) -> None:
    """Progress and hints go to stderr, like gcloud, so stdout stays the command's result."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


# ====================================================================== common options
EndpointOpt = Annotated[
    str,
    typer.Option("--endpoint", envvar="TRAINWORKS_ENDPOINT", help="Base URL of the Trainworks server."),
]
ProjectOpt = Annotated[
    str, typer.Option("--project", envvar="TRAINWORKS_PROJECT", help="Project ID or number.")
]
RegionOpt = Annotated[
    str | None,
    typer.Option(
        "--region", envvar="TRAINWORKS_REGION", help="Region (location) of the jobs, e.g. us-central1."
    ),
]
ApiKeyOpt = Annotated[
    str | None,
    typer.Option(
        "--api-key", envvar="TRAINWORKS_API_KEY", help="API key or bearer token.", show_default=False
    ),
]
FormatOpt = Annotated[
    OutputFormat,
    typer.Option("--format", case_sensitive=False, help="human (default), or json / yaml for scripts."),
]
JobArg = Annotated[
    str,
    typer.Argument(metavar="CUSTOM_JOB", help="Job ID, or full name projects/P/locations/L/customJobs/ID."),
]

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """API, connection and flag errors become a message on stderr and exit 1 (2 for bad flags)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except FlagError as exc:
            _status(f"ERROR: {exc}")
            raise typer.Exit(2) from None
        except ApiError as exc:
            _status(f"ERROR: {exc.status}: {exc.message}")
            for field, description in exc.violations:
                _status(f"  - {field}: {description}")
            raise typer.Exit(1) from None
        except TrainworksConnectionError as exc:
            _status(f"ERROR: {exc}")
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            _status("Interrupted.")
            raise typer.Exit(130) from None
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): stop quietly, as the Python docs recommend.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def _client(endpoint: str, api_key: str | None) -> TrainworksClient:
    return TrainworksClient(endpoint or DEFAULT_ENDPOINT, api_key=api_key)


def _need_region(region: str | None) -> str:
    if not region:
        raise FlagError("--region", "a region is required (or set TRAINWORKS_REGION)")
    return region


# ====================================================================== commands
@app.command()
@handle_errors
def create(
    display_name: Annotated[
        str | None,
        typer.Option("--display-name", help="Display name of the job (required unless in --config)."),
    ] = None,
    worker_pool_spec: Annotated[
        list[str] | None,
        typer.Option(
            "--worker-pool-spec",
            metavar="WORKER_POOL_SPEC",
            help="Repeatable; the Nth flag is pool N. Keys: machine-type (required), replica-count, "
            "accelerator-type, accelerator-count, container-image-uri | executor-image-uri + python-module, "
            "disk-type, disk-size. An empty value skips a pool.",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="YAML/JSON file with a CustomJobSpec (camelCase or snake_case); flags override it.",
        ),
    ] = None,
    args: Annotated[
        list[str] | None,
        typer.Option(
            "--args", metavar="ARG,...", help="Arguments for every pool's container or Python module."
        ),
    ] = None,
    command: Annotated[
        list[str] | None,
        typer.Option("--command", metavar="COMMAND,...", help="Entrypoint for every container pool."),
    ] = None,
    labels: Annotated[list[str] | None, typer.Option("--labels", metavar="KEY=VALUE,...")] = None,
    env_vars: Annotated[
        list[str] | None,
        typer.Option("--env-vars", metavar="NAME=VALUE,...", help="Environment variables for every pool."),
    ] = None,
    python_package_uris: Annotated[
        list[str] | None,
        typer.Option(
            "--python-package-uris", metavar="URI,...", help="Packages for executor-image-uri pools."
        ),
    ] = None,
    base_output_dir: Annotated[
        str | None, typer.Option("--base-output-dir", help="gs:// prefix; sets the AIP_*_DIR variables.")
    ] = None,
    timeout: Annotated[
        str | None, typer.Option("--timeout", help="Maximum run time, e.g. 3600s, 90m, 2h (default 7 days).")
    ] = None,
    service_account: Annotated[str | None, typer.Option("--service-account")] = None,
    network: Annotated[str | None, typer.Option("--network")] = None,
    persistent_resource_id: Annotated[str | None, typer.Option("--persistent-resource-id")] = None,
    enable_web_access: Annotated[bool, typer.Option("--enable-web-access")] = False,
    enable_dashboard_access: Annotated[bool, typer.Option("--enable-dashboard-access")] = False,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Create a custom job from --worker-pool-spec flags and/or a --config file."""
    location = _need_region(region)
    body = build_custom_job(
        display_name=display_name,
        worker_pool_specs=worker_pool_spec,
        config=config,
        args=args,
        command=command,
        labels=labels,
        env_vars=env_vars,
        python_package_uris=python_package_uris,
        base_output_dir=base_output_dir,
        timeout=timeout,
        service_account=service_account,
        network=network,
        persistent_resource_id=persistent_resource_id,
        enable_web_access=enable_web_access,
        enable_dashboard_access=enable_dashboard_access,
    )
    with _client(endpoint, api_key) as client:
        job = client.create_custom_job(f"projects/{project}/locations/{location}", body)
    if format != OutputFormat.human:
        _print_data(job, format)
        return
    name = job.get("name", "")
    _status(f"CustomJob [{name}] is submitted successfully.")
    print_job_summary(job)
    flags = "" if endpoint == DEFAULT_ENDPOINT else f" --endpoint={endpoint}"
    _status(
        "\nView its status with:\n"
        f"  trainworks custom-jobs describe {name}{flags}\n"
        "or stream its logs with:\n"
        f"  trainworks custom-jobs stream-logs {name}{flags}"
    )


@app.command("list")
@handle_errors
def list_(
    filter: Annotated[
        str,
        typer.Option("--filter", help='AIP-160 filter, e.g. state="JOB_STATE_RUNNING" AND labels.team=ml'),
    ] = "",
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Show at most this many jobs.")] = None,
    page_size: Annotated[
        int, typer.Option("--page-size", min=0, help="Jobs per request (0: server default).")
    ] = 0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """List custom jobs of a project and region, newest first."""
    location = _need_region(region)
    jobs: list[dict[str, Any]] = []
    with _client(endpoint, api_key) as client:
        size = page_size or (min(limit, 1000) if limit else 0)
        for job in client.list_custom_jobs(f"projects/{project}/locations/{location}", filter, size):
            jobs.append(job)
            if limit is not None and len(jobs) >= limit:
                break
    if format != OutputFormat.human:
        _print_data(jobs, format)
    else:
        print_job_table(jobs)


@app.command()
@handle_errors
def describe(
    custom_job: JobArg,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Show a custom job."""
    name = job_name(custom_job, project, region)
    with _client(endpoint, api_key) as client:
        job = client.get_custom_job(name)
    if format != OutputFormat.human:
        _print_data(job, format)
    else:
        print_job_summary(job)


@app.command()
@handle_errors
def cancel(
    custom_job: JobArg,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Ask a running custom job to stop; it ends JOB_STATE_CANCELLED (cancellation is asynchronous)."""
    name = job_name(custom_job, project, region)
    with _client(endpoint, api_key) as client:
        result = client.cancel_custom_job(name)
    if format != OutputFormat.human:
        _print_data(result, format)
        return
    _status(
        f"Request to cancel CustomJob [{name}] has been sent.\n"
        f"Wait for it to end with:\n  trainworks custom-jobs wait {name}"
        + ("" if endpoint == DEFAULT_ENDPOINT else f" --endpoint={endpoint}")
    )


@app.command()
@handle_errors
def delete(
    custom_job: JobArg,
    async_: Annotated[bool, typer.Option("--async", help="Return without waiting for the deletion.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the deletion.")] = 300.0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Delete a finished custom job (a running one must be cancelled first)."""
    name = job_name(custom_job, project, region)
    with _client(endpoint, api_key) as client:
        op = client.delete_custom_job(name)
        if not async_ and not op.get("done"):
            if format == OutputFormat.human:
                _status(f"Waiting for operation [{op.get('name', '')}] to complete...")
            op = client.wait_operation(op["name"], timeout)
    if format != OutputFormat.human:
        _print_data(op, format)
    elif op.get("error"):
        error = op["error"]
        _status(
            f"ERROR: deleting CustomJob [{name}] failed: code {error.get('code')}: {error.get('message')}"
        )
        raise typer.Exit(1)
    elif op.get("done"):
        _status(f"Deleted CustomJob [{name}].")
    else:
        _status(f"Deletion of CustomJob [{name}] is in progress: operation [{op.get('name', '')}].")
    if op.get("error"):
        raise typer.Exit(1)


@app.command("stream-logs")
@handle_errors
def stream_logs(
    custom_job: JobArg,
    task: Annotated[
        str | None,
        typer.Option("--task", help="Only this replica, e.g. workerpool0-0 (plus service messages)."),
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow/--no-follow", help="Keep streaming until the job ends.")
    ] = True,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Print a job's logs, each line prefixed with its task (workerpool0-0...), until the job ends."""
    name = job_name(custom_job, project, region)
    out = sys.stdout
    with _client(endpoint, api_key) as client:
        for entry in client.stream_logs(name, task=task, follow=follow):
            if format == OutputFormat.human:
                out.write(f"[{entry.get('task', '')}] {entry.get('text', '')}\n")
            else:
                out.write(json.dumps(entry) + "\n")
            out.flush()


@app.command()
@handle_errors
def wait(
    custom_job: JobArg,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Give up (exit 1) after this many seconds.")
    ] = None,
    poll_interval: Annotated[
        float, typer.Option("--poll-interval", min=0.05, help="Longest pause between polls.")
    ] = 2.0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Block until the job ends. Exit 0 if it SUCCEEDED, 1 otherwise (failed, cancelled or timed out)."""
    name = job_name(custom_job, project, region)
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = 0.1
    with _client(endpoint, api_key) as client:
        job = client.get_custom_job(name)
        while job.get("state") not in TERMINAL_STATES:
            if deadline is not None and time.monotonic() >= deadline:
                if format != OutputFormat.human:
                    _print_data(job, format)
                _status(f"ERROR: timed out after {timeout:g}s; CustomJob [{name}] is {job.get('state')}.")
                raise typer.Exit(1)
            sleep = pause if deadline is None else min(pause, max(deadline - time.monotonic(), 0.0))
            time.sleep(sleep)
            pause = min(pause * 1.5, poll_interval)
            job = client.get_custom_job(name)
    state = job.get("state", "")
    if format != OutputFormat.human:
        _print_data(job, format)
    else:
        print_job_summary(job)
    if state != "JOB_STATE_SUCCEEDED":
        raise typer.Exit(1)


__all__ = [
    "FlagError",
    "app",
    "build_custom_job",
    "camelize",
    "job_name",
    "load_config",
    "parse_dict",
    "parse_duration",
    "parse_worker_pool_spec",
    "parse_worker_pool_specs",
    "split_list",
]
