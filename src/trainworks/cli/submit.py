"""`trainworks submit RUN.yaml`: stage the code, find capacity across regions, submit, and follow the job."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from trainworks.jobs.render import print_log_entry
from trainworks.kernel.cli import Options, comma_separated, command, usage_errors
from trainworks.kernel.render import OutputFormat, console, print_data, print_rows, print_status

if TYPE_CHECKING:
    from trainworks.submit.capacity import CapacityLedger
    from trainworks.submit.submitter import JobHandle


class CliEvents:
    """Progress on stderr (a bar while code uploads), job logs on stdout."""

    def __init__(self, fmt: OutputFormat, quiet: bool = False) -> None:
        self.fmt = fmt
        self.quiet = quiet
        self.progress: Any = None
        self.task: Any = None

    def info(self, message: str) -> None:
        if not self.quiet:
            print_status(message)

    def warning(self, message: str) -> None:
        print_status(f"WARNING: {message}")

    def upload_started(self, total: int) -> None:
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

        self.progress = Progress(
            TextColumn("staging code"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            console=console(stderr=True),
            transient=False,
        )
        self.progress.start()
        self.task = self.progress.add_task("upload", total=total)

    def upload_progress(self, done: int) -> None:
        if self.progress is None:
            return
        self.progress.update(self.task, advance=done)
        if self.progress.finished:
            self.progress.stop()
            self.progress = None

    def state(self, name: str, state: str) -> None:
        self.info(f"{name.rsplit('/', 1)[-1]}: {state}")

    def stalled(self, name: str, state: str, seconds: float) -> None:
        self.warning(f"{name} has been {state} for {seconds:.0f}s without a change")

    def log(self, entry: Mapping[str, Any]) -> None:
        print_log_entry(entry, self.fmt)


def print_ledger(ledger: CapacityLedger) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"Capacity walk ({ledger.policy})", title_justify="left", box=None, pad_edge=False)
    for column in ("REGION", "TRY", "OUTCOME", "WORKERS", "DETAIL"):
        table.add_column(column)
    for a in ledger.attempts:
        detail = a.job_name or a.detail
        workers = "" if a.workers is None else str(a.workers)
        table.add_row(a.region, str(a.try_number or "-"), a.outcome, workers, escape(detail))
    console(stderr=True).print(table)


def print_handle(handle: JobHandle, fmt: OutputFormat) -> None:
    if fmt != OutputFormat.human:
        print_data(handle.to_dict(), fmt)
        return
    plan = handle.plan
    hardware = plan.machine_type + (
        f" + {plan.accelerator_count} x {plan.accelerator_type}" if plan.accelerator_count else ""
    )
    rows = [
        ("Run", handle.run_id),
        ("Job", handle.job_name),
        ("State", handle.state or "submitted"),
        ("Target", f"{handle.target} / {handle.region}"),
        ("Workers", f"{plan.worker_count} (asked {plan.requested_workers}) x {hardware}"),
        ("Code", f"{handle.code.uri} ({'uploaded' if handle.code.uploaded else 'unchanged'})"),
        ("Config", handle.config_uri),
        ("Ledger", handle.ledger_uri),
    ]
    print_rows(rows, markup=True)


@command(options=("api_key", "format"))
def submit(
    run_file: Annotated[Path, typer.Argument(metavar="RUN.yaml", help="The run configuration.")],
    region: Annotated[
        list[str] | None,
        typer.Option(
            "--region", metavar="REGION,...", help="Candidate regions in order (overrides regions)."
        ),
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="Total replicas (overrides workers).")
    ] = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Follow the job until it ends.")] = False,
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint", help="Server URL (overrides target.endpoint; default $TRAINWORKS_ENDPOINT)."
        ),
    ] = None,
    *,
    opts: Options,
) -> None:
    """Stage the code as a content-hashed zip, walk the regions for capacity, submit, and maybe follow."""
    # The submitter's modules (every kind's client, fsspec, the run file's models) only when it runs: the
    # other commands start without them.
    from trainworks.code_staging.store import StagingError
    from trainworks.submit.capacity import CapacityExhausted
    from trainworks.submit.config import RunConfigError, load_run_config
    from trainworks.submit.follow import FollowTimeout, JobFailed
    from trainworks.submit.plan import PlanError
    from trainworks.submit.staging import PackageError
    from trainworks.submit.submitter import submit_run
    from trainworks.submit.targets import TargetUnavailable, make_target

    with usage_errors(RunConfigError):
        regions = comma_separated(region) or None
        cfg = load_run_config(run_file).with_overrides(regions=regions, workers=workers)
    events = CliEvents(opts.format)
    target = make_target(cfg.target.kind, cfg.target.project, endpoint or cfg.target.endpoint, opts.api_key)
    try:
        with usage_errors(PlanError, PackageError, TargetUnavailable):
            _run_id, _job_name, handle = submit_run(cfg, target=target, wait=wait, events=events)
    except StagingError as exc:
        print_status(f"ERROR: staging failed: {exc}")
        raise typer.Exit(1) from None
    except CapacityExhausted as exc:
        print_ledger(exc.ledger)
        print_status(f"ERROR: {exc}")
        raise typer.Exit(1) from None
    except (JobFailed, FollowTimeout) as exc:
        if exc.handle is not None:
            print_ledger(exc.handle.ledger)
            print_handle(exc.handle, opts.format)
        print_status(f"ERROR: {exc}")
        raise typer.Exit(1) from None
    finally:
        target.close()
    if opts.human:
        print_ledger(handle.ledger)
    print_handle(handle, opts.format)
