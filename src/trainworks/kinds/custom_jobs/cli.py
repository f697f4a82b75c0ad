"""`trainworks custom-jobs`: create and manage custom training jobs, modelled on `gcloud ai custom-jobs`.

Only the commands live here: flag parsing is in `pool_specs`, output in `render`, the shared options,
client and error handling in `common`, and packaging of --local-package-path in `submit.autopackage`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from trainworks.cli.common import (
    DEFAULT_ENDPOINT,
    ApiKeyOpt,
    EndpointOpt,
    FormatOpt,
    JobArg,
    ProjectOpt,
    RegionOpt,
    endpoint_flag,
    handle_errors,
    job_name,
    make_client,
    poll_until_done,
    require_region,
)
from trainworks.cli.render import (
    OutputFormat,
    _console,
    print_data,
    print_job_summary,
    print_job_table,
    print_log_entry,
    print_status,
)
from trainworks.client.rest import ApiError
from trainworks.kinds.custom_jobs.pool_specs import (
    FlagError,
    LocalPackage,
    build_custom_job,
    check_local_package_flags,
    split_lists,
)
from trainworks.submit.autopackage import (
    AutopackageError,
    PackageBuildError,
    PackagePlan,
    plan_package,
    stage_package,
)
from trainworks.submit.storage import CodeStore, StagingError

app = typer.Typer(
    name="custom-jobs",
    no_args_is_help=True,
    add_completion=False,
    help="Create and manage custom training jobs (like `gcloud ai custom-jobs`).",
)


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
            help="gs://BUCKET the package is uploaded to (under trainworks-packages/).",
        ),
    ] = None,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Create a custom job from --worker-pool-spec flags and/or a --config file, optionally running local
    code from --local-package-path."""
    location = require_region(region)
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
        _stage(plan, endpoint, api_key, format == OutputFormat.human)
    with make_client(endpoint, api_key) as client:
        job = client.create_custom_job(f"projects/{project}/locations/{location}", body)
    if format != OutputFormat.human:
        print_data(job, format)
        return
    name = job.get("name", "")
    print_status(f"CustomJob [{name}] is submitted successfully.")
    print_job_summary(job)
    flags = endpoint_flag(endpoint)
    print_status(
        "\nView its status with:\n"
        f"  trainworks custom-jobs describe {name}{flags}\n"
        "or stream its logs with:\n"
        f"  trainworks custom-jobs stream-logs {name}{flags}"
    )


def _stage(plan: PackagePlan, endpoint: str, api_key: str | None, human: bool) -> None:
    """Build and upload the package (a progress bar for humans), or say that it is staged already."""
    print_status(f"Packaging [{plan.root}] as [{plan.name}] ({len(plan.files)} files).")
    progress: Any = None
    task: Any = None

    def started(total: int) -> None:
        nonlocal progress, task
        if not human:
            return
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

        progress = Progress(
            TextColumn(f"uploading {plan.object_name}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            console=_console(stderr=True),
        )
        progress.start()
        task = progress.add_task("upload", total=total)

    def advance(done: int) -> None:
        if progress is not None:
            progress.update(task, advance=done)

    try:
        staged = stage_package(
            CodeStore.for_endpoint(endpoint or DEFAULT_ENDPOINT, api_key), plan, advance, started
        )
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
    location = require_region(region)
    jobs: list[dict[str, Any]] = []
    with make_client(endpoint, api_key) as client:
        size = page_size or (min(limit, 1000) if limit else 0)
        for job in client.list_custom_jobs(f"projects/{project}/locations/{location}", filter, size):
            jobs.append(job)
            if limit is not None and len(jobs) >= limit:
                break
    if format != OutputFormat.human:
        print_data(jobs, format)
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
    with make_client(endpoint, api_key) as client:
        job = client.get_custom_job(name)
        status = None
        if format == OutputFormat.human:
            try:
                status = client.get_custom_job_status(name)
            except ApiError:  # a plain Vertex endpoint has no status extension
                status = None
    if format != OutputFormat.human:
        print_data(job, format)
    else:
        print_job_summary(job, status)


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
    with make_client(endpoint, api_key) as client:
        result = client.cancel_custom_job(name)
    if format != OutputFormat.human:
        print_data(result, format)
        return
    print_status(
        f"Request to cancel CustomJob [{name}] has been sent.\n"
        f"Wait for it to end with:\n  trainworks custom-jobs wait {name}{endpoint_flag(endpoint)}"
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
    with make_client(endpoint, api_key) as client:
        op = client.delete_custom_job(name)
        if not async_ and not op.get("done"):
            if format == OutputFormat.human:
                print_status(f"Waiting for operation [{op.get('name', '')}] to complete...")
            op = client.wait_operation(op["name"], timeout)
    if format != OutputFormat.human:
        print_data(op, format)
    elif op.get("error"):
        error = op["error"]
        print_status(
            f"ERROR: deleting CustomJob [{name}] failed: code {error.get('code')}: {error.get('message')}"
        )
        raise typer.Exit(1)
    elif op.get("done"):
        print_status(f"Deleted CustomJob [{name}].")
    else:
        print_status(f"Deletion of CustomJob [{name}] is in progress: operation [{op.get('name', '')}].")
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
    with make_client(endpoint, api_key) as client:
        for entry in client.stream_logs(name, task=task, follow=follow):
            print_log_entry(entry, format)


@app.command()
@handle_errors
def shell(
    custom_job: JobArg,
    replica: Annotated[
        str, typer.Option("--replica", help="The replica to open the shell in, e.g. workerpool1-0.")
    ] = "workerpool0-0",
    command: Annotated[
        str | None, typer.Option("--command", help="Run this command instead, and exit with its status.")
    ] = None,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
) -> None:
    """Open an interactive shell in a running replica (its namespaces, working directory and env)."""
    from trainworks.kinds.custom_jobs.shell_cli import (
        open_shell,  # the WebSocket client loads only for this command
    )

    name = job_name(custom_job, project, region)
    raise typer.Exit(open_shell(endpoint or DEFAULT_ENDPOINT, api_key, name, replica, command))


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
    with make_client(endpoint, api_key) as client:
        job = poll_until_done(
            lambda: client.get_custom_job(name), f"CustomJob [{name}]", timeout, poll_interval, format
        )
    state = job.get("state", "")
    if format != OutputFormat.human:
        print_data(job, format)
    else:
        print_job_summary(job)
    if state != "JOB_STATE_SUCCEEDED":
        raise typer.Exit(1)


__all__ = ["app"]
