"""`trainworks serve`: the API server with its controllers, in the foreground."""

from __future__ import annotations

import importlib.util
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from trainworks.config import Settings, default_home, parse_replica_bind
from trainworks.observability.log_format import FORMATS, configure_logging, uvicorn_log_config

if TYPE_CHECKING:
    from trainworks.tls import ServerTls

log = logging.getLogger("trainworks")


def podman_works(settings: Settings) -> tuple[bool, str]:
    """Podman counts as available when it runs here with the server's own configuration (under the home)."""
    from trainworks.backends.podman import podman_works as check

    return check(settings)


def resolve_runtime(requested: str | None, settings: Settings) -> str:
    if requested in ("host", "podman"):
        if requested == "podman":
            ok, why = podman_works(settings)
            if not ok:
                raise typer.BadParameter(f"--container-runtime podman: {why}")
            log.info("container runtime: %s", why)
        else:
            log.info("container runtime: host (commands run on this host; images are not used)")
        return requested
    if requested not in (None, "", "auto"):
        raise typer.BadParameter("--container-runtime must be podman, host or auto")
    ok, why = podman_works(settings)
    log.info("container runtime: %s (%s)", "podman" if ok else "host", why)
    return "podman" if ok else "host"


def resolve_executor(
    settings: Settings, executor: str, slurm_conf: Path | None, partition: str | None
) -> None:
    if executor not in ("local", "slurm"):
        raise typer.BadParameter("--executor must be local or slurm")
    if slurm_conf is not None and not slurm_conf.is_file():
        raise typer.BadParameter(f"{slurm_conf} is not a file", param_hint="--slurm-conf")
    if executor == "slurm" and slurm_conf is None:
        raise typer.BadParameter("--executor slurm needs --slurm-conf")
    settings.executor = executor
    settings.slurm_conf = slurm_conf.resolve() if slurm_conf is not None else None
    settings.slurm_partition = partition or None
    if slurm_conf is not None:
        log.info(
            "slurm: %s (partition %s); %s",
            settings.slurm_conf,
            partition or "default",
            "every job runs there" if executor == "slurm" else "for jobs labelled trainworks-executor: slurm",
        )


def storage_url(host: str, port: int, tls: bool = False) -> str:
    """The URL replicas reach this server at, for STORAGE_EMULATOR_HOST: a wildcard address means loopback;
    https:// when the server speaks TLS."""
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    return f"{'https' if tls else 'http'}://{host}:{port}"


def resolve_tls(cert: Path | None, key: Path | None) -> ServerTls | None:
    """`--tls-cert` and `--tls-key`, both or neither, checked now: a wrong file is one clear message, not a
    traceback from inside uvicorn or gRPC."""
    if cert is None and key is None:
        return None
    from trainworks.tls import TlsError, load_server_tls  # cryptography: only when TLS is asked for

    if cert is None or key is None:
        given, missing = ("--tls-cert", "--tls-key") if key is None else ("--tls-key", "--tls-cert")
        raise typer.BadParameter(f"{given} needs {missing} too (HTTPS and gRPC over TLS need both files)")
    try:
        tls = load_server_tls(cert, key)
    except TlsError as exc:
        raise typer.BadParameter(
            str(exc), param_hint="--tls-cert" if exc.path == cert else "--tls-key"
        ) from None
    names = ", ".join(tls.names) or "no subject alternative names"
    expires = tls.expires.strftime("%Y-%m-%d")
    if tls.expires < datetime.now(UTC):
        log.warning("TLS: the certificate in %s expired on %s: clients will refuse it", cert, expires)
    trust = "replicas trust its CA" if tls.ca else "a CA the system trusts"
    log.info("TLS: certificate for %s, until %s (%s)", names, expires, trust)
    return tls


def check_grpc_types() -> None:
    """gRPC serves the official messages of google-cloud-aiplatform (the `vertex` extra): fail here."""
    try:
        found = importlib.util.find_spec("google.cloud.aiplatform_v1") is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        raise typer.BadParameter(
            "gRPC serving needs google-cloud-aiplatform: pip install 'trainworks[vertex]'",
            param_hint="--grpc-port",
        )


def serve(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8080, help="Port to listen on."),
    grpc_port: int = typer.Option(
        0,
        "--grpc-port",
        min=0,
        help="Also serve the API over gRPC on this port, at the same address (0: no gRPC; needs "
        "google-cloud-aiplatform). Insecure, or TLS with --tls-cert and --tls-key.",
    ),
    tls_cert: Path = typer.Option(
        None,
        "--tls-cert",
        help="Serve HTTPS, and gRPC over TLS, with this PEM certificate (then its chain; with --tls-key). "
        "`trainworks admin tls init` makes a local CA and one.",
    ),
    tls_key: Path = typer.Option(None, "--tls-key", help="The certificate's PEM private key, unencrypted."),
    home: Path = typer.Option(None, help="State folder (default $TRAINWORKS_HOME or ~/.trainworks)."),
    database_url: str = typer.Option(
        None,
        "--database-url",
        envvar="TRAINWORKS_DATABASE_URL",
        help="SQLAlchemy URL; default SQLite under the home.",
    ),
    container_runtime: str = typer.Option(
        "auto", "--container-runtime", help="podman, host, or auto (podman when it works here)."
    ),
    api_token: list[str] = typer.Option(
        [],
        "--api-token",
        envvar="TRAINWORKS_API_TOKENS",
        help="An admin token: a bearer token or API key for every project (repeatable). Tokens scoped to "
        "projects: `trainworks admin tokens create`.",
    ),
    bucket_root: Path = typer.Option(None, "--bucket-root", help="Folder holding local buckets."),
    gcs: bool = typer.Option(False, "--gcs", help="Send gs:// to real Cloud Storage (needs gcsfs)."),
    cancel_grace: float = typer.Option(10.0, "--cancel-grace", help="Seconds between SIGTERM and SIGKILL."),
    insecure_registry: list[str] = typer.Option(
        [],
        "--insecure-registry",
        help="A plain-HTTP registry on loopback (127.0.0.1:PORT) podman may pull images from (repeatable).",
    ),
    inventory: Path = typer.Option(
        None, "--inventory", help="YAML/JSON file of regions, zones, machines and quotas (default: elastic)."
    ),
    preemption_notice: float = typer.Option(
        30.0, "--preemption-notice", help="Seconds a preempted SPOT replica gets between SIGTERM and SIGKILL."
    ),
    executor: str = typer.Option(
        "local",
        "--executor",
        help="Where CustomJobs run: local (processes on this host) or slurm (one Slurm job each, "
        "needs --slurm-conf). A job's label trainworks-executor: local|slurm overrides it.",
    ),
    slurm_conf: Path = typer.Option(
        None, "--slurm-conf", help="slurm.conf of the Slurm cluster that runs Slurm jobs."
    ),
    slurm_partition: str = typer.Option(
        None, "--slurm-partition", help="Slurm partition for those jobs (default: the cluster's default)."
    ),
    clusters_dir: Path = typer.Option(
        None,
        "--clusters-dir",
        help="Where training clusters' Slurm daemons keep their state (a short path searchable by all users; "
        "default: a folder in /tmp named after --home).",
    ),
    max_request_bytes: int = typer.Option(
        16 << 20, "--max-request-bytes", min=1, help="Largest JSON request body; larger ones get 413."
    ),
    max_object_bytes: int = typer.Option(
        5 << 40, "--max-object-bytes", min=1, help="Largest object a Cloud Storage upload may write."
    ),
    log_limit_replica: int = typer.Option(
        1 << 30,
        "--log-limit-replica",
        min=0,
        help="Bytes of log a replica keeps: past it the oldest part goes, and an entry says so (0: all).",
    ),
    log_limit_job: int = typer.Option(
        0,
        "--log-limit-job",
        min=0,
        help="Bytes of log a job's replicas keep together, divided among them (0: only --log-limit-replica).",
    ),
    sandbox: bool = typer.Option(
        True,
        "--sandbox/--no-sandbox",
        help="Run host replicas sandboxed (docs/isolation.md); --no-sandbox is for debugging only.",
    ),
    fork_server: bool = typer.Option(
        True,
        "--fork-server/--cold-supervisors",
        help="Fork each replica's supervisor from a warm fork server (docs/scaling.md); "
        "--cold-supervisors starts each one as a new interpreter (slower; for comparison and debugging).",
    ),
    replica_slots: int = typer.Option(
        2,
        "--replica-slots",
        min=0,
        help="Keep this many sandboxes built, each with an interpreter waiting, for the next python "
        "replicas: they start in a fraction of the time (docs/scaling.md). Each costs an idle interpreter "
        "(about 13 MiB); 0: none.",
    ),
    replica_memory_scale: float = typer.Option(
        1.0,
        "--replica-memory-scale",
        min=0.0,
        help="A host replica's memory limit is its machine type's memory times this, for a host smaller "
        "than the machines it emulates (0: no limits).",
    ),
    replica_tmp: str = typer.Option(
        "private",
        "--replica-tmp",
        help="private: each sandboxed host replica gets /tmp and /var/tmp of its own (a folder in its run "
        "folder, removed when it ends), as a separate machine would; shared: the host's.",
    ),
    replica_bind: list[str] = typer.Option(
        [],
        "--replica-bind",
        envvar="TRAINWORKS_REPLICA_BIND",
        help="A host folder every sandboxed replica sees at the same path, read-write (PATH:ro: read-only); "
        "the server's own places stay hidden inside it (repeatable; the variable: paths split by spaces).",
    ),
    log_level: str = typer.Option("info", "--log-level"),
    log_format: str = typer.Option(
        "text", "--log-format", help="text, or json: one JSON object per line (time, level, logger, message)."
    ),
    access_log: bool | None = typer.Option(
        None,
        "--access-log/--no-access-log",
        help="A line per request (method, route, status, duration_ms); default: on with --log-format json.",
        show_default=False,
    ),
    metrics_open: bool = typer.Option(
        False,
        "--metrics-open",
        help="Serve /metrics without a token even when --api-token is set (for a Prometheus without one).",
    ),
) -> None:
    """Run the Trainworks server in the foreground."""
    tokens = frozenset(t for item in api_token for t in item.split(",") if t)
    if log_format not in FORMATS:
        raise typer.BadParameter("--log-format must be text or json")
    if replica_tmp not in ("private", "shared"):
        raise typer.BadParameter("must be private or shared", param_hint="--replica-tmp")
    json_logs = log_format == "json"
    configure_logging(log_format, log_level, json_logs if access_log is None else access_log, redact=tokens)
    tls = resolve_tls(tls_cert, tls_key)
    settings = Settings(
        home=home or default_home(),
        database_url=database_url,
        container_runtime="host",
        api_tokens=tokens,
        metrics_open=metrics_open,
        bucket_root=bucket_root,
        gcs_protocol="gcs" if gcs else "file",
        cancel_grace_seconds=cancel_grace,
        inventory_path=inventory,
        preemption_notice_seconds=preemption_notice,
        insecure_registries=tuple(insecure_registry),
        clusters_root=clusters_dir,
        max_request_bytes=max_request_bytes,
        grpc_host=host,
        grpc_port=grpc_port,
        max_object_bytes=max_object_bytes,
        log_limit_replica_bytes=log_limit_replica,
        log_limit_job_bytes=log_limit_job,
        storage_url=storage_url(host, port, tls is not None),
        tls=tls,
        sandbox=sandbox,
        fork_server=fork_server,
        replica_slots=replica_slots,
        replica_memory_scale=replica_memory_scale,
        replica_tmp=replica_tmp,
    )
    try:
        settings.replica_binds = tuple(parse_replica_bind(item, settings.home) for item in replica_bind)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--replica-bind") from None
    if insecure_registry:
        from trainworks.backends.podman import check_registry

        try:
            settings.insecure_registries = tuple(check_registry(r) for r in insecure_registry)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    if inventory is not None:
        from trainworks.scheduling.inventory import InventoryError, load_inventory

        try:
            load_inventory(inventory)  # fail here, clearly, rather than inside the server's start-up
        except InventoryError as exc:
            raise typer.BadParameter(str(exc), param_hint="--inventory") from None
    if grpc_port:
        check_grpc_types()
    settings.container_runtime = resolve_runtime(container_runtime, settings)
    resolve_executor(settings, executor, slurm_conf, slurm_partition)
    log.info("home %s, database %s", settings.home, settings.db_url.split("@")[-1])
    if tokens:
        log.info("auth: %d admin token(s) from --api-token, and any stored tokens", len(tokens))
    from trainworks.api.app import create_app

    os.environ.setdefault("TRAINWORKS_HOME", str(settings.home))
    import uvicorn  # only for serve: every other command starts without it

    # JSON: uvicorn's own loggers propagate to the root logger's JSON handler instead of its text config.
    log_config = None if json_logs else uvicorn_log_config(uvicorn.config.LOGGING_CONFIG, tokens)
    uvicorn.run(
        create_app(settings),
        host=host,
        port=port,
        log_level=log_level.lower(),
        access_log=False,  # the access log is trainworks.access (observability/http.py)
        log_config=log_config,
        # The production stack, named rather than left to uvicorn's "auto" (which silently falls back to
        # asyncio and h11, about half the requests per second, when the packages are missing).
        loop="uvloop",
        http="httptools",
        ssl_certfile=str(tls.cert) if tls else None,
        ssl_keyfile=str(tls.key) if tls else None,
    )
