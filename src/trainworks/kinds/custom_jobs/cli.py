"""`trainworks custom-jobs`: create and manage custom training jobs, modelled on `gcloud ai custom-jobs`.

Only the commands live here: flag parsing is in `pool_specs`, output in `render`, the common options,
client and error handling in `kernel.cli`, and packaging of --local-package-path in `autopackage`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from trainworks.code_staging.store import CodeStore, StagingError
from trainworks.jobs.render import print_log_entry
from trainworks.kernel import cli
from trainworks.kernel.cli import Options, command
from trainworks.kernel.client import ApiError
from trainworks.kernel.flags import split_lists
from trainworks.kernel.names import FlagError, NameSpec, parse_name
from trainworks.kernel.render import console, print_status
from trainworks.kinds.custom_jobs.autopackage import (
    AutopackageError,
    PackageBuildError,
    PackagePlan,
    plan_package,
    stage_package,
)
from trainworks.kinds.custom_jobs.client import CustomJobsClient, JobStatus
from trainworks.kinds.custom_jobs.pool_specs import LocalPackage, build_custom_job, check_local_package_flags
from trainworks.kinds.custom_jobs.render import print_job_summary, print_job_table

app = cli.group("custom-jobs", "Create and manage custom training jobs (like `gcloud ai custom-jobs`).")

CUSTOM_JOBS = NameSpec("customJobs", "CUSTOM_JOB", "CustomJob", "job", "CustomJob")
JobArg = Annotated[str, cli.name_argument(CUSTOM_JOBS)]


def job_name(value: str, project: str, region: str | None) -> str:
    """A full CustomJob name, from a name or a bare job ID (expanded with --project and --region)."""
    return parse_name(CUSTOM_JOBS, value, project, region)


def _job_status(client: CustomJobsClient, name: str) -> JobStatus | None:
    """The server's status extension of a job (scheduling, restarts, cost) for `describe`."""
    try:
        return client.get_custom_job_status(name)
    except ApiError:  # a plain Vertex endpoint has no status extension
        return None


@command(app)
def create(
    display_name: cli.JobDisplayNameOpt = None,
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
    labels: cli.LabelsOpt = None,
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
    local_package_path: Annotated[
        Path | None,
        typer.Option(
            "--local-package-path",
            help="Folder of local code to package (an sdist; its own setup.py or pyproject.toml if it has "
            "one), stage in --staging-bucket and run in every pool without a container-image-uri.",
        ),
    ] = None,
    script: Annotated[
        str | None,
        typer.Option(
            "--script",
            help="Python file in --local-package-path to run, e.g. trainer/task.py (trainer.task).",
        ),
    ] = None,
    python_module: Annotated[
        str | None, typer.Option("--python-module", help="Module of the package to run, instead of --script.")
    ] = None,
    executor_image_uri: Annotated[
        str | None,
        typer.Option(
            "--executor-image-uri",
            help="Image that runs the package, unless a --worker-pool-spec names its executor-image-uri.",
        ),
    ] = None,
    requirements: Annotated[
        list[str] | None,
        typer.Option("--requirements", metavar="PACKAGE,...", help="Requirements of the package to install."),
    ] = None,
    staging_bucket: Annotated[
        str | None,
        typer.Option(
            "--staging-bucket",
            envvar="TRAINWORKS_STAGING_BUCKET",
            help="gs://BUCKET the package is uploaded to (under trainworks-packages/). It must exist, "
            "unless --create-staging-bucket.",
        ),
    ] = None,
    create_staging_bucket: Annotated[
        bool,
        typer.Option(
            "--create-staging-bucket", help="Create the --staging-bucket bucket if it does not exist."
        ),
    ] = False,
    *,
    opts: Options,
) -> None:
    """Create a custom job from --worker-pool-spec flags and/or a --config file, optionally running local
    code from --local-package-path."""
    parent = opts.parent()
    check_local_package_flags(local_package_path, script, python_module, requirements, executor_image_uri)
    plan: PackagePlan | None = None
    local: LocalPackage | None = None
    if local_package_path is not None:
        try:
            plan = plan_package(
                local_package_path, staging_bucket, script, python_module, split_lists(requirements)
            )
        except AutopackageError as exc:
            raise FlagError(exc.flag, exc.message) from None
        local = LocalPackage(plan.uri, plan.module, executor_image_uri)
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
        local_package=local,
    )
    if plan is not None:
        _stage(plan, opts, create_staging_bucket)
    job = opts.call(CustomJobsClient, lambda client: client.create_custom_job(parent, body))
    hints = [("View its status", "describe"), ("stream its logs", "stream-logs")]
    cli.report_submitted(opts, job, "CustomJob", print_job_summary, "custom-jobs", hints)


def _stage(plan: PackagePlan, opts: Options, create_bucket: bool) -> None:
    """Build and upload the package (a progress bar for humans), or say that it is staged already. A
    missing bucket is a --staging-bucket error unless `create_bucket`."""
    print_status(f"Packaging [{plan.root}] as [{plan.name}] ({len(plan.files)} files).")
    progress: Any = None
    task: Any = None

    def started(total: int) -> None:
        nonlocal progress, task
        if not opts.human:
            return
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

        progress = Progress(
            TextColumn(f"uploading {plan.object_name}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            console=console(stderr=True),
        )
        progress.start()
        task = progress.add_task("upload", total=total)

    def advance(done: int) -> None:
        if progress is not None:
            progress.update(task, advance=done)

    try:
        store = CodeStore.for_endpoint(opts.url, opts.api_key)
        staged = stage_package(store, plan, advance, started, create_bucket)
    except AutopackageError as exc:
        raise FlagError(exc.flag, exc.message) from None
    except (StagingError, PackageBuildError) as exc:
        print_status(f"ERROR: {exc}")
        raise typer.Exit(1) from None
    finally:
        if progress is not None:
            progress.stop()
    if staged.uploaded:
        print_status(f"Uploaded the package to [{staged.uri}] ({staged.size} bytes).")
    else:
        print_status(f"The package is already staged at [{staged.uri}] (same content): not uploaded again.")


COMMANDS = cli.ResourceCommands(app, CUSTOM_JOBS, JobArg, CustomJobsClient)
COMMANDS.list_(
    "List custom jobs of a project and region, newest first.",
    cli.JOB_LIST_FLAGS,
    lambda client, query: client.list_custom_jobs(query.parent, query.filter, query.size),
    print_job_table,
)
COMMANDS.describe(
    "Show a custom job.", CustomJobsClient.get_custom_job, print_job_summary, detail=_job_status
)
COMMANDS.cancel(
    "Ask a running custom job to stop; it ends JOB_STATE_CANCELLED (cancellation is asynchronous).",
    CustomJobsClient.cancel_custom_job,
    "custom-jobs",
    CustomJobsClient.get_custom_job,
)
COMMANDS.delete_job(
    "Delete a finished custom job (a running one must be cancelled first).",
    CustomJobsClient.delete_custom_job,
    unfinished_fails=False,
    timeout_opt=Annotated[float, typer.Option("--timeout", help="Seconds to wait for the deletion.")],
)


@command(app, "stream-logs")
def stream_logs(
    custom_job: JobArg,
    task: Annotated[
        list[str] | None,
        typer.Option(
            "--task", help="Only this replica, e.g. workerpool0-0 (repeatable; with service messages)."
        ),
    ] = None,
    severity: Annotated[
        str | None, typer.Option("--severity", help="Only entries at least this severe, e.g. WARNING.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only entries from this time: RFC 3339, or a duration back (10m, 2h)."),
    ] = None,
    tail: Annotated[int | None, typer.Option("--tail", min=1, help="Start with the last N entries.")] = None,
    follow: Annotated[
        bool, typer.Option("--follow/--no-follow", help="Keep streaming until the job ends.")
    ] = True,
    timestamps: Annotated[
        bool, typer.Option("--timestamps/--no-timestamps", help="Start each line with its time and severity.")
    ] = True,
    *,
    opts: Options,
) -> None:
    """Print a job's log in time order across its replicas, each line with its time, severity and task
    (workerpool0-0..., service for the platform's messages), until the job ends."""
    name = opts.name(CUSTOM_JOBS, custom_job)
    with opts.client(CustomJobsClient) as client:
        entries = client.stream_logs(
            name, task=task or None, follow=follow, severity=severity, since=since, tail=tail
        )
        for entry in entries:
            print_log_entry(entry, opts.format, timestamps=timestamps)


@command(app, options=cli.NO_FORMAT)
def shell(
    custom_job: JobArg,
    replica: Annotated[
        str, typer.Option("--replica", help="The replica to open the shell in, e.g. workerpool1-0.")
    ] = "workerpool0-0",
    command: Annotated[
        str | None, typer.Option("--command", help="Run this command instead, and exit with its status.")
    ] = None,
    *,
    opts: Options,
) -> None:
    """Open an interactive shell in a running replica (its namespaces, working directory and env)."""
    from trainworks.kinds.custom_jobs.shell_cli import (
        open_shell,  # the WebSocket client loads only for this command
    )

    name = opts.name(CUSTOM_JOBS, custom_job)
    raise typer.Exit(open_shell(opts.url, opts.api_key, name, replica, command))


COMMANDS.wait(
    "Block until the job ends, showing its state changes and the time elapsed on a terminal (stderr).",
    CustomJobsClient.get_custom_job,
    print_job_summary,
)


# `trainworks admin preempt`: an operator's tool, in the admin group (cli.main adds it there).
@command()
def preempt(
    custom_job: JobArg,
    replica: Annotated[
        str | None, typer.Option("--replica", help="Only this replica, e.g. workerpool1-0 (default: all).")
    ] = None,
    *,
    opts: Options,
) -> None:
    """Preempt a running SPOT job as a Spot VM reclaim would: SIGTERM, the notice period, then a restart."""
    name = opts.name(CUSTOM_JOBS, custom_job)
    with opts.client(CustomJobsClient) as client:
        result = client.preempt_custom_job(name, replica)
    opts.show(
        result, lambda found: print_status(f"Preempted {', '.join(found.get('preempted', []))} of [{name}].")
    )


__all__ = ["CUSTOM_JOBS", "JobArg", "app", "job_name", "preempt"]
