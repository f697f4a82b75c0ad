"""What every CLI command shares, whatever the kind: the common options (declared here once), the REST client
they make, the one error handler, waiting for jobs and operations, and output in the format asked for.

`command` adds --region, --project, --endpoint, --api-key and --format to a command, after its own
options, so they go after the subcommand as with gcloud (`trainworks custom-jobs list --region r`); the
command gets them as one `Options`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Generic, Protocol, TypeVar

import typer

from trainworks.kernel.client import (
    TERMINAL_STATES,
    ApiError,
    Client,
    NotTrainworksError,
    TrainworksConnectionError,
)
from trainworks.kernel.longrunning import Operation
from trainworks.kernel.names import DEFAULT_PROJECT, FlagError, NameSpec, parse_name
from trainworks.kernel.render import (
    FormatError,
    OutputFormat,
    elapsed_text,
    parse_format,
    parse_sort_by,
    print_data,
    print_status,
    sort_records,
)
from trainworks.kernel.wire import WireModel

DEFAULT_ENDPOINT = "http://127.0.0.1:8080"
T = TypeVar("T")
#: The client class a command asks for: its kind's (`kinds/<kind>/client.py`), or one composed of several.
C = TypeVar("C", bound=Client)
#: A resource as the client returns it: its kind's wire model.
R = TypeVar("R", bound=WireModel)


class Job(Protocol):
    """What waiting for a job reads of it (a CustomJob, HyperparameterTuningJob or TrainingPipeline)."""

    name: str
    state: Any  # its kind's ProtoEnum

    def to_wire(self) -> dict[str, Any]: ...


J = TypeVar("J", bound=Job)

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


def _format(value: OutputFormat | str) -> OutputFormat:
    """--format as typer reads it: a bad one is a usage error (exit 2) naming the problem."""
    if isinstance(value, OutputFormat):
        return value
    try:
        return parse_format(value)
    except FormatError as exc:
        raise typer.BadParameter(str(exc)) from None


FormatOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        parser=_format,
        metavar="FORMAT",
        help="human (default); json or yaml; or gcloud's value(KEY,...), table(KEY,...), csv(KEY,...) "
        "with keys such as name.basename() or labels.team, and attributes [no-heading], "
        "[separator=S]. See docs/cli.md.",
    ),
]
#: --async and --timeout of the commands that wait for a long-running operation.
AsyncOpt = Annotated[
    bool, typer.Option("--async", help="Return at once with the operation instead of waiting for it.")
]
OperationTimeoutOpt = Annotated[
    float, typer.Option("--timeout", min=0.0, help="Seconds to wait for the operation (exit 1 after).")
]
#: --timeout and --poll-interval of the `wait` commands.
WaitTimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout", help="Give up after this many seconds (exit 4, the job goes on)."),
]
PollIntervalOpt = Annotated[
    float, typer.Option("--poll-interval", min=0.05, help="Longest pause between polls.")
]
#: --async and --timeout of the `delete` commands that wait for the deletion.
DeleteAsyncOpt = Annotated[bool, typer.Option("--async", help="Return without waiting for the deletion.")]
DeleteTimeoutOpt = Annotated[
    float, typer.Option("--timeout", min=0.0, help="Seconds to wait for the deletion.")
]
#: --quiet of the commands that ask before they destroy something (gcloud's global flag).
QuietOpt = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="Do not ask for confirmation (asked only on a terminal)."),
]
#: --labels of the commands that create a resource (repeatable, merged).
LabelsOpt = Annotated[list[str] | None, typer.Option("--labels", metavar="KEY=VALUE,...")]
#: --display-name of the commands that create a job.
JobDisplayNameOpt = Annotated[
    str | None,
    typer.Option("--display-name", help="Display name of the job (required unless in --config)."),
]


#: How every command group is made. Help is click's plain help, which wraps long lines (rich's panels cut
#: words such as an env var's name with `…` at 80 columns).
TYPER_SETTINGS: dict[str, Any] = {"no_args_is_help": True, "add_completion": False, "rich_markup_mode": None}


def group(name: str, help: str) -> typer.Typer:
    """A command group (`trainworks <name> ...`), such as a kind's: bare, it shows its help."""
    return typer.Typer(name=name, help=help, **TYPER_SETTINGS)


def name_argument(spec: NameSpec, help: str | None = None) -> Any:
    """The argument naming one resource of `spec`'s collection: an ID, or a full name (see `parse_name`)."""
    if help is None:
        help = f"{spec.noun.capitalize()} ID, or full name projects/P/locations/L/{spec.collection}/ID."
    return typer.Argument(metavar=spec.argument, help=help)


@dataclass(frozen=True)
class Options:
    """The common options of one command run."""

    region: str | None = None
    project: str = DEFAULT_PROJECT
    endpoint: str = DEFAULT_ENDPOINT
    api_key: str | None = None
    format: OutputFormat = OutputFormat.human

    @property
    def human(self) -> bool:
        return self.format.name == "human"

    @property
    def url(self) -> str:
        """The server's base URL (the default endpoint when --endpoint is empty)."""
        return self.endpoint or DEFAULT_ENDPOINT

    def client(self, client_type: type[C]) -> C:
        """A `client_type` for the server of these options."""
        return client_type(self.url, api_key=self.api_key)

    def call(self, client_type: type[C], request: Callable[[C], T]) -> T:
        """What `request` returns, made on a `client_type` of its own."""
        with self.client(client_type) as client:
            return request(client)

    def location(self) -> str:
        """The --region value; a FlagError when there is none."""
        if not self.region:
            raise FlagError("--region", "a region is required (or set TRAINWORKS_REGION)")
        return self.region

    def parent(self) -> str:
        """projects/P/locations/L of --project and --region (which must be given)."""
        return f"projects/{self.project}/locations/{self.location()}"

    def name(self, spec: NameSpec, value: str) -> str:
        """The full resource name of an argument: a name, or an ID expanded with --project and --region."""
        return parse_name(spec, value, self.project, self.region)

    def endpoint_flag(self) -> str:
        """` --endpoint=URL` for the command hints we print; empty for the default endpoint."""
        return "" if self.endpoint == DEFAULT_ENDPOINT else f" --endpoint={self.endpoint}"

    def show(self, data: T, human: Callable[[T], None]) -> None:
        """`data` as json/yaml (a wire model as its wire JSON), or shown to humans by `human`."""
        if self.human:
            human(data)
        else:
            print_data(data, self.format)


# ====================================================================== exit codes
#: What `wait` exits with, so that scripts tell the outcomes apart (documented in docs/cli.md). Errors (API,
#: connection) exit 1 and bad flags 2, as every command does.
EXIT_SUCCEEDED = 0
EXIT_FAILED = 1  # the job ended FAILED, EXPIRED or PARTIALLY_SUCCEEDED
EXIT_CANCELLED = 3  # the job ended CANCELLED
EXIT_TIMEOUT = 4  # --timeout passed first; the job goes on
WAIT_EXIT_CODES_HELP = (
    "Exit codes: 0 the job succeeded, 1 it failed (or an error), 2 bad flags, 3 it was cancelled, "
    "4 --timeout passed first (the job goes on)."
)


def exit_code_of(state: str, succeeded: str) -> int:
    """The exit code of `wait` for a job that ended in `state`."""
    if state == succeeded:
        return EXIT_SUCCEEDED
    return EXIT_CANCELLED if state.endswith("_CANCELLED") else EXIT_FAILED


# ====================================================================== confirmation
#: The --quiet option of `resource_command`.
QUIET = ("quiet", QuietOpt, False)


def confirm_deletion(kind: str, name: str, quiet: bool) -> None:
    """gcloud's question before a deletion (`confirm`)."""
    confirm(f"You are about to delete {kind} [{name}].", quiet)


def confirm(message: str, quiet: bool) -> None:
    """Ask `message` and `Do you want to continue (Y/n)?` as gcloud does before it deletes, when stdin and
    stderr are a terminal and not --quiet; "n" aborts (exit 1). Without a terminal (a script, CI, output
    captured) it goes on without asking, as gcloud does: it takes the default answer, yes."""
    if quiet or not (sys.stdin.isatty() and sys.stderr.isatty()):
        return
    sys.stderr.write(f"{message}\n\nDo you want to continue (Y/n)?  ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    if answer.strip().lower() not in ("", "y", "yes"):
        print_status("Aborted by user.")
        raise typer.Exit(1)


# ====================================================================== errors
F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def usage_errors(*errors: type[Exception]) -> Iterator[None]:
    """`errors` raised inside (the command line's own mistakes) become `ERROR: ...` on stderr and exit 2.
    Also a decorator."""
    try:
        yield
    except errors as exc:
        print_status(f"ERROR: {exc}")
        raise typer.Exit(2) from None


def handle_errors(func: F) -> F:
    """API, connection and flag errors become a message on stderr and exit 1 (2 for bad flags)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with usage_errors(FlagError):
                return func(*args, **kwargs)
        except NotTrainworksError as exc:
            print_status(f"ERROR: {exc.message}")
            raise typer.Exit(1) from None
        except ApiError as exc:
            print_status(f"ERROR: {exc.status}: {exc.message}")
            for field, description in exc.violations:
                print_status(f"  - {field}: {description}")
            raise typer.Exit(1) from None
        except TrainworksConnectionError as exc:
            print_status(f"ERROR: {exc}")
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            print_status("Interrupted.")
            raise typer.Exit(130) from None
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): stop quietly, as the Python docs recommend.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


# ====================================================================== the command decorator
ALL_OPTIONS = ("region", "project", "endpoint", "api_key", "format")
#: Commands that print no data (an interactive shell, a server) take no --format.
NO_FORMAT = ALL_OPTIONS[:-1]

_OPTION_TYPES: dict[str, Any] = {
    "region": RegionOpt,
    "project": ProjectOpt,
    "endpoint": EndpointOpt,
    "api_key": ApiKeyOpt,
    "format": FormatOpt,
}
_DEFAULTS = Options()


def command(
    app: typer.Typer | None = None, name: str | None = None, *, options: Sequence[str] = ALL_OPTIONS
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A CLI command: `func(..., *, opts: Options)` gets the common `options` as flags after its own, and
    the one error handler. With `app` it is registered there (as `name`, else the function's name)."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(func, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "opts"]
        common = [
            inspect.Parameter(
                option,
                inspect.Parameter.KEYWORD_ONLY,
                default=getattr(_DEFAULTS, option),
                annotation=_OPTION_TYPES[option],
            )
            for option in options
        ]

        @functools.wraps(func)
        def wrapper(**kwargs: Any) -> Any:
            opts = Options(**{option: kwargs.pop(option) for option in options})
            return func(**kwargs, opts=opts)

        params = own + common
        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params} | {
            "return": signature.return_annotation
        }
        handled = handle_errors(wrapper)
        if app is not None:
            app.command(name)(handled)
        return handled

    return decorate


def comma_separated(values: Iterable[str] | None) -> list[str]:
    """Every value of a repeatable option, each split on commas: the parts stripped, empty ones dropped."""
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


# ====================================================================== listing
def page_size_for(page_size: int, limit: int | None) -> int:
    """The page size to ask for: --page-size, else no more than --limit needs (at most 1000)."""
    return page_size or (min(limit, 1000) if limit else 0)


def take(items: Iterable[T], limit: int | None) -> list[T]:
    """The first `limit` items (all without a limit), fetching no page beyond them."""
    taken: list[T] = []
    for item in items:
        taken.append(item)
        if limit is not None and len(taken) >= limit:
            break
    return taken


@dataclass(frozen=True)
class ListQuery:
    """What a `list` command asks for: the parent, then its options as given (defaults for those it lacks)."""

    parent: str
    filter: str = ""
    order_by: str = ""
    page_size: int = 0
    limit: int | None = None
    sort_by: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        """The page size to ask for (`page_size_for`); --sort-by reads every page, whatever --limit."""
        return page_size_for(self.page_size, None if self.sort_by else self.limit)


@dataclass(frozen=True)
class ListFlags:
    """The help text of each option of a `list` command; an option without one is not offered. Every list
    takes gcloud's --sort-by, --limit and --page-size."""

    filter: str | None = None
    order_by: tuple[str, str] | None = None  # the server's orderBy: its flag (--order-by) and help
    limit: str | None = "Show at most this many (after --sort-by)."
    page_size: str | None = "Items per request (0: server default)."

    def options(self) -> list[tuple[str, Any, Any]]:
        """The options offered, in help order, as `resource_command` takes them."""
        options: list[tuple[str, Any, Any]] = []
        if self.filter is not None:
            options.append(("filter", Annotated[str, typer.Option("--filter", help=self.filter)], ""))
        if self.order_by is not None:
            flag, help = self.order_by
            options.append(("order_by", Annotated[str, typer.Option(flag, help=help)], ""))
        sort_by = typer.Option(
            "--sort-by",
            metavar="[~]KEY,...",
            help="Sort by these keys of the resource (e.g. createTime, displayName); ~KEY sorts "
            "descending. Sorted here, after listing every page.",
        )
        options.append(("sort_by", Annotated[list[str] | None, sort_by], None))
        if self.limit is not None:
            limit = typer.Option("--limit", min=1, help=self.limit)
            options.append(("limit", Annotated[int | None, limit], None))
        if self.page_size is not None:
            page_size = typer.Option("--page-size", min=0, help=self.page_size)
            options.append(("page_size", Annotated[int, page_size], 0))
        return options


#: The list options of the job kinds (custom jobs, tuning jobs).
JOB_LIST_FLAGS = ListFlags(
    filter='AIP-160 filter, e.g. state="JOB_STATE_RUNNING" AND labels.team=ml',
    limit="Show at most this many jobs.",
    page_size="Jobs per request (0: server default).",
)


# ====================================================================== waiting for jobs
class WaitProgress:
    """What `wait` shows on a terminal (stderr): a line per state change with the time since the wait
    began, and a live `elapsed` line while the job runs. Nothing when stderr is not a terminal."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.started = time.monotonic()
        self.state: str | None = None
        self.status: Any = None
        if sys.stderr.isatty():
            from trainworks.kernel.render import console

            self.status = console(stderr=True).status(f"Waiting for {what}...")
            self.status.start()

    def seen(self, state: str) -> None:
        if self.status is None:
            return
        from rich.markup import escape

        elapsed = elapsed_text(time.monotonic() - self.started)
        if state != self.state:
            self.status.console.print(escape(f"[{elapsed}] {self.what} is {state}"), highlight=False)
            self.state = state
        self.status.update(escape(f"Waiting for {self.what}: {state}, {elapsed} elapsed"))

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()


def poll_until_done(
    fetch: Callable[[], J],
    what: str,
    timeout: float | None,
    poll_interval: float,
    format: OutputFormat,
    terminal: Iterable[str] = TERMINAL_STATES,
) -> J:
    """Poll `fetch` (with growing pauses up to `poll_interval`) until the job is in a `terminal` state,
    showing its progress on a terminal (`WaitProgress`).

    On timeout it prints the job (for json/yaml) and the error, and exits EXIT_TIMEOUT."""
    terminal = frozenset(terminal)
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = 0.1
    job = fetch()
    what = re.sub(r"\[[^\]]*\]", lambda _: f"[{job.name}]", what, count=1)  # the server's name
    progress = WaitProgress(what)
    try:
        while job.state.name not in terminal:
            progress.seen(job.state.name)
            if deadline is not None and time.monotonic() >= deadline:
                progress.stop()
                if format.name != "human":
                    print_data(job.to_wire(), format)
                state = job.state.name if job.state else None  # an unspecified state is not on the wire
                print_status(f"ERROR: timed out after {timeout:g}s; {what} is {state}.")
                raise typer.Exit(EXIT_TIMEOUT)
            time.sleep(pause if deadline is None else min(pause, max(deadline - time.monotonic(), 0.0)))
            pause = min(pause * 1.5, poll_interval)
            job = fetch()
        progress.seen(job.state.name)
    finally:
        progress.stop()
    return job


def show_final(opts: Options, job: J, summary: Callable[[J], None], succeeded: str) -> None:
    """Show a job that `wait` saw end; exit with its code (`exit_code_of`) unless it succeeded."""
    opts.show(job, summary)
    code = exit_code_of(job.state.name, succeeded)
    if code:
        raise typer.Exit(code)


def wait_for_end(
    opts: Options,
    client_type: type[C],
    get: Callable[[C], J],
    what: str,
    timeout: float | None,
    poll_interval: float,
    summary: Callable[[J], None],
    succeeded: str,
    terminal: Iterable[str] = TERMINAL_STATES,
    timeout_format: OutputFormat | None = None,
) -> None:
    """`wait`: poll the job until it ends (`poll_until_done`; on timeout its output in `timeout_format`,
    else --format), then show it (`show_final`)."""
    with opts.client(client_type) as client:
        job = poll_until_done(
            lambda: get(client), what, timeout, poll_interval, timeout_format or opts.format, terminal
        )
    show_final(opts, job, summary, succeeded)


def report_submitted(
    opts: Options,
    job: J,
    kind: str,
    summary: Callable[[J], None],
    group: str,
    hints: Sequence[tuple[str, str]],
) -> None:
    """What `create` prints: the job (json/yaml), or that it is submitted, its summary and the commands
    `hints` name as (what for, subcommand of `group`)."""
    if not opts.human:
        print_data(job.to_wire(), opts.format)
        return
    name = job.name
    print_status(f"{kind} [{name}] is submitted successfully.")
    summary(job)
    lines = [
        f"{'or ' if i else ''}{why} with:\n  trainworks {group} {sub} {name}{opts.endpoint_flag()}"
        for i, (why, sub) in enumerate(hints)
    ]
    print_status("\n" + "\n".join(lines))


def report_cancel(opts: Options, kind: str, name: str, wait_command: str | None) -> None:
    """What `cancel` prints: its answer, google.protobuf.Empty (json/yaml), or that the request was sent and
    how to wait."""
    if not opts.human:
        print_data({}, opts.format)
        return
    message = f"Request to cancel {kind} [{name}] has been sent."
    if wait_command:
        message += (
            f"\nWait for it to end with:\n  trainworks {wait_command} wait {name}{opts.endpoint_flag()}"
        )
    print_status(message)


def server_name(answered: str, name: str) -> str:
    """`name` as the server spells it: with the `projects/<number>/locations/L` of a name it answered with
    (an operation's, a resource's), so that every command prints one name whatever --project was."""
    theirs, ours = answered.split("/"), name.split("/")
    if len(theirs) >= 4 and len(ours) >= 4 and theirs[0] == ours[0] == "projects" and theirs[3] == ours[3]:
        return "/".join(theirs[:4] + ours[4:])
    return name


def delete_job(
    opts: Options,
    kind: str,
    name: str,
    client_type: type[C],
    delete: Callable[[C], Operation],
    async_: bool,
    timeout: float,
    unfinished_fails: bool,
) -> None:
    """Delete a job through its operation, waiting for it unless --async.

    An operation that failed exits 1; one still running after the wait exits 1 when `unfinished_fails`
    (else it is reported as in progress)."""
    with opts.client(client_type) as client:
        op = delete(client)
        name = server_name(op.name, name)
        if not async_ and not op.done:
            if opts.human:
                print_status(f"Waiting for operation [{op.name}] to complete...")
            op = client.wait_operation(op.name, timeout)
    error = op.error
    if not opts.human:
        print_data(op.to_wire(), opts.format)
    elif error:
        print_status(f"ERROR: deleting {kind} [{name}] failed: code {error.code}: {error.message}")
    elif op.done:
        print_status(f"Deleted {kind} [{name}].")
    elif async_ or not unfinished_fails:
        print_status(f"Deletion of {kind} [{name}] is in progress: operation [{op.name}].")
    else:
        print_status(
            f"ERROR: operation [{op.name}] to delete {kind} [{name}] is not done "
            f"after {timeout:g}s; it goes on in the background."
        )
    if error or (unfinished_fails and not async_ and not op.done):
        raise typer.Exit(1)


# ====================================================================== long-running operations
@dataclass(frozen=True)
class OperationTarget(Generic[C, R]):
    """What a resource's create/update/delete LRO is about, for `run`."""

    client_type: type[C]  # the client `run` starts the operation with
    model: type[R]  # the resource an operation returns

    kind: str  # e.g. "PersistentResource"
    command: str  # its CLI group, e.g. "persistent-resources"
    summary: Callable[[R], None]  # prints the resource an operation returned
    # The resource's full name from the operation's name and the name the user gave.
    name_from_operation: Callable[[str, str], str]

    def run(
        self,
        opts: Options,
        action: str,
        name: str,
        async_: bool,
        timeout: float,
        start: Callable[[C], Operation],
    ) -> None:
        """Start the operation with `start`, then wait for it and report it (`report_operation`)."""
        with opts.client(self.client_type) as client:
            report_operation(client, start(client), self, action, name, async_, timeout, opts)


_DONE_VERBS = {"create": "Created", "update": "Updated", "reboot": "Rebooted", "delete": "Deleted"}


def report_operation(
    client: Client,
    op: Operation,
    target: OperationTarget[Any, R],
    action: str,
    name: str,
    async_: bool,
    timeout: float,
    opts: Options,
) -> None:
    """Wait for a create/update/reboot/delete operation (unless --async) and print its outcome.

    json/yaml print the resource when the operation returned one, else the operation. A failed or
    unfinished operation exits 1.
    """
    op_name = op.name
    if "/operations/" in op_name:  # the server's name of the resource (with the project number)
        name = target.name_from_operation(op_name, name)
    if not async_ and not op.done:
        if opts.human:
            print_status(f"Waiting for operation [{op_name}] to complete...")
        op = client.wait_operation(op_name, timeout)
    resource = op.result(target.model)
    what = f"{target.kind} [{name}]"
    if not opts.human:
        print_data(op if resource is None else resource, opts.format)
    if op.error is not None:
        print_status(
            f"ERROR: operation [{op_name}] to {action} {what} failed: "
            f"code {op.error.code}: {op.error.message}"
        )
        for detail in op.error.details:
            for violation in (detail or {}).get("fieldViolations") or []:
                print_status(f"  - {violation.get('field', '')}: {violation.get('description', '')}")
        raise typer.Exit(1)
    if op.done:
        if opts.human:
            print_status(f"{_DONE_VERBS[action]} {what}.")
            if resource is not None:
                target.summary(resource)
        return
    hint = f"trainworks {target.command} describe {name}{opts.endpoint_flag()}"
    if async_:
        if opts.human:
            print_status(
                f"Operation [{op_name}] to {action} {what} is submitted.\nCheck its state with:\n  {hint}"
            )
        return
    progress = op.progress_message
    print_status(
        f"ERROR: operation [{op_name}] to {action} {what} is not done after {timeout:g}s"
        f"{f' ({progress})' if progress else ''}; it goes on in the background.\n"
        f"Check it with:\n  {hint}"
    )
    raise typer.Exit(1)


# ====================================================================== operations run in the foreground
def operation_done(client: Client, op: Operation, timeout: float) -> Operation:
    """The operation once done, or as it stands after `timeout` seconds."""
    return op if op.done else client.wait_operation(op.name, timeout)


def run_operation(
    opts: Options, client_type: type[C], start: Callable[[C], Operation], what: str, timeout: float
) -> Operation:
    """Start an operation and wait up to `timeout` for it; json/yaml print it. One that failed or is still
    running exits 1 (`exit_unless_succeeded`, with `what` it was doing)."""
    with opts.client(client_type) as client:
        op = operation_done(client, start(client), timeout)
    if not opts.human:
        print_data(op, opts.format)
    exit_unless_succeeded(op, what, timeout)
    return op


def run_deletion(
    opts: Options,
    client_type: type[C],
    delete: Callable[[C], Operation],
    kind: str,
    name: str,
    timeout: float,
    doing: str = "delete",
) -> None:
    """Delete `kind [name]` through its operation in the foreground (`run_operation`, failing as
    `doing kind [name]`), then say so to humans (with the server's name)."""
    op = run_operation(opts, client_type, delete, f"{doing} {kind} [{name}]", timeout)
    if opts.human:
        print_status(f"Deleted {kind} [{server_name(op.name, name)}].")


def exit_unless_succeeded(op: Operation, what: str, timeout: float) -> None:
    """An operation that failed, or is still running after the wait, prints why and exits 1."""
    if op.error is not None:
        print_status(f"ERROR: {what} failed: code {op.error.code}: {op.error.message}")
        raise typer.Exit(1)
    if not op.done:
        print_status(
            f"ERROR: {what} is not done after {timeout:g}s: operation [{op.name}] goes on in the background."
        )
        raise typer.Exit(1)


# ====================================================================== standard commands, declared once
_ARG = inspect.Parameter.POSITIONAL_OR_KEYWORD


def resource_command(
    app: typer.Typer,
    name: str,
    doc: str,
    arg: Any,
    run: Callable[..., None],
    options: Sequence[tuple[str, Any, Any]] = (),
) -> None:
    """Register command `name` (help text `doc`) on `app`: the resource argument `arg` (an Annotated type;
    None for a command of the whole collection), then `options` as (parameter, Annotated type, default);
    `run(opts, resource=..., **options)` does the work (without `resource` when there is no `arg`)."""

    def func(*, opts: Options, **values: Any) -> None:
        run(opts, **values)

    params = [] if arg is None else [inspect.Parameter("resource", _ARG, annotation=arg)]
    params += [inspect.Parameter(p, _ARG, default=d, annotation=a) for p, a, d in options]
    params.append(inspect.Parameter("opts", inspect.Parameter.KEYWORD_ONLY, annotation=Options))
    func.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    func.__doc__ = doc
    func.__name__ = func.__qualname__ = name.replace("-", "_")
    command(app, name)(func)


@dataclass(frozen=True)
class ResourceCommands(Generic[C]):
    """The standard commands of one kind's group, each declared in one call: what differs is the help text
    and the client call (an unbound client method taking the resource's full name)."""

    app: typer.Typer
    spec: NameSpec  # names the resource (its `kind` is the one in messages)
    arg: Any  # the resource argument, Annotated[str, name_argument(...)]
    client_type: type[C]

    def describe(
        self,
        doc: str,
        get: Callable[[C, str], WireModel],
        summary: Callable[..., None],
        detail: Callable[[C, str], Any] | None = None,
    ) -> None:
        """`describe`: the resource, shown by `summary` (json/yaml: raw). With `detail`, humans see more:
        what it returns (on the same client) is `summary`'s second argument."""

        def run(opts: Options, resource: str) -> None:
            name = opts.name(self.spec, resource)
            with opts.client(self.client_type) as client:
                found = get(client, name)
                more = detail(client, name) if detail is not None and opts.human else None
            opts.show(found, summary if detail is None else lambda shown: summary(shown, more))

        resource_command(self.app, "describe", doc, self.arg, run)

    def cancel(
        self,
        doc: str,
        cancel: Callable[[C, str], None],
        wait_group: str | None,
        get: Callable[[C, str], Job],
    ) -> None:
        """`cancel`: ask the job to stop (`report_cancel`, hinting `wait_group`'s wait). The job is read
        back (`get`) for the name the server gives it."""

        def run(opts: Options, resource: str) -> None:
            name = opts.name(self.spec, resource)
            with opts.client(self.client_type) as client:
                cancel(client, name)
                if opts.human:
                    name = get(client, name).name
            report_cancel(opts, self.spec.kind, name, wait_group)

        resource_command(self.app, "cancel", doc, self.arg, run)

    def delete_job(
        self,
        doc: str,
        delete: Callable[[C, str], Operation],
        unfinished_fails: bool,
        timeout_opt: Any = DeleteTimeoutOpt,
    ) -> None:
        """`delete` of a job: --async, --timeout (`timeout_opt`, 300s), then `delete_job`."""

        def run(opts: Options, resource: str, async_: bool, timeout: float, quiet: bool) -> None:
            name = opts.name(self.spec, resource)
            confirm_deletion(self.spec.kind, name, quiet)
            delete_job(
                opts,
                self.spec.kind,
                name,
                self.client_type,
                lambda client: delete(client, name),
                async_,
                timeout,
                unfinished_fails,
            )

        options = (("async_", DeleteAsyncOpt, False), ("timeout", timeout_opt, 300.0), QUIET)
        resource_command(self.app, "delete", doc, self.arg, run, options)

    def wait(
        self,
        doc: str,
        get: Callable[[C, str], J],
        summary: Callable[[J], None],
        succeeded: str = "JOB_STATE_SUCCEEDED",
    ) -> None:
        """`wait`: --timeout, --poll-interval, then `wait_for_end`; the help ends with the exit codes."""

        def run(opts: Options, resource: str, timeout: float | None, poll_interval: float) -> None:
            name = opts.name(self.spec, resource)
            what = f"{self.spec.kind} [{name}]"

            def fetch(client: C) -> J:
                return get(client, name)

            wait_for_end(opts, self.client_type, fetch, what, timeout, poll_interval, summary, succeeded)

        options = (("timeout", WaitTimeoutOpt, None), ("poll_interval", PollIntervalOpt, 2.0))
        resource_command(self.app, "wait", f"{doc}\n\n{WAIT_EXIT_CODES_HELP}", self.arg, run, options)

    def operation(
        self, action: str, doc: str, target: OperationTarget[C, Any], start: Callable[[C, str], Operation]
    ) -> None:
        """Command `action` (e.g. delete, reboot): --async, --timeout (600s), then `target.run`. `delete`
        asks first (--quiet does not)."""

        def run(opts: Options, resource: str, async_: bool, timeout: float, quiet: bool = True) -> None:
            name = opts.name(self.spec, resource)
            if action == "delete":
                confirm_deletion(target.kind, name, quiet)
            target.run(opts, action, name, async_, timeout, lambda client: start(client, name))

        options: tuple[tuple[str, Any, Any], ...] = (
            ("async_", AsyncOpt, False),
            ("timeout", OperationTimeoutOpt, 600.0),
        )
        resource_command(
            self.app, action, doc, self.arg, run, options + ((QUIET,) if action == "delete" else ())
        )

    def delete_and_wait(
        self,
        doc: str,
        delete: Callable[[C, str], Operation],
        *,
        command: str = "delete",
        what: str | None = None,
        doing: str = "delete",
        check: Callable[[str, str], None] | None = None,
    ) -> None:
        """Command `command` (`delete`) that waits for the deletion: --timeout (300s), then `run_deletion` of
        `what` (default: the spec's kind) [name]. `check(argument, name)` may refuse the name first."""

        def run(opts: Options, resource: str, timeout: float, quiet: bool) -> None:
            name = opts.name(self.spec, resource)
            if check is not None:
                check(resource, name)
            kind = what or self.spec.kind
            confirm_deletion(kind, name, quiet)
            run_deletion(
                opts, self.client_type, lambda client: delete(client, name), kind, name, timeout, doing
            )

        options = (("timeout", DeleteTimeoutOpt, 300.0), QUIET)
        resource_command(self.app, command, doc, self.arg, run, options)

    def list_(
        self,
        doc: str,
        flags: ListFlags,
        fetch: Callable[[C, ListQuery], Iterable[R]],
        table: Callable[[list[R]], None],
        complete: Callable[[C, list[R]], list[R]] | None = None,
    ) -> None:
        """`list`: the options of `flags`, then the first --limit items `fetch` gives for them (all without
        --limit), shown by `table`. For humans, `complete` (same client) may add what List leaves out."""

        def run(opts: Options, sort_by: list[str] | None, **values: Any) -> None:
            with usage_errors(FormatError):
                keys = parse_sort_by(sort_by or [])
            query = ListQuery(opts.parent(), sort_by=tuple(sort_by or ()), **values)
            with opts.client(self.client_type) as client:
                if keys:  # every item first: the first --limit in the asked order (gcloud does the same)
                    items = take(sort_records(list(fetch(client, query)), keys), query.limit)
                else:
                    items = take(fetch(client, query), query.limit)
                if complete is not None and opts.human:
                    items = complete(client, items)
            opts.show(items, table)

        resource_command(self.app, "list", doc, None, run, flags.options())


__all__ = [
    "ALL_OPTIONS",
    "ApiKeyOpt",
    "AsyncOpt",
    "DEFAULT_ENDPOINT",
    "DeleteAsyncOpt",
    "DeleteTimeoutOpt",
    "EXIT_CANCELLED",
    "EXIT_FAILED",
    "EXIT_SUCCEEDED",
    "EXIT_TIMEOUT",
    "EndpointOpt",
    "FormatOpt",
    "JOB_LIST_FLAGS",
    "JobDisplayNameOpt",
    "LabelsOpt",
    "ListFlags",
    "ListQuery",
    "NO_FORMAT",
    "OperationTarget",
    "OperationTimeoutOpt",
    "Options",
    "PollIntervalOpt",
    "ProjectOpt",
    "QUIET",
    "QuietOpt",
    "RegionOpt",
    "ResourceCommands",
    "TYPER_SETTINGS",
    "WAIT_EXIT_CODES_HELP",
    "WaitProgress",
    "WaitTimeoutOpt",
    "comma_separated",
    "command",
    "confirm",
    "confirm_deletion",
    "delete_job",
    "exit_code_of",
    "exit_unless_succeeded",
    "group",
    "handle_errors",
    "name_argument",
    "operation_done",
    "page_size_for",
    "poll_until_done",
    "report_cancel",
    "report_operation",
    "report_submitted",
    "resource_command",
    "run_deletion",
    "run_operation",
    "server_name",
    "show_final",
    "take",
    "usage_errors",
    "wait_for_end",
]
