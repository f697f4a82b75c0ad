"""`trainworks serve`: the API server with its controllers, in the foreground."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

import typer
import uvicorn

from trainworks.config import Settings, default_home

log = logging.getLogger("trainworks")


def podman_works() -> tuple[bool, str]:
    """Podman counts as available when it can report its own info here."""
    podman = shutil.which("podman")
    if podman is None:
        return False, "podman is not installed"
    try:
        run = subprocess.run(
            [podman, "info", "--format", "{{.Host.OCIRuntime.Name}}"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"podman info failed: {exc}"
    if run.returncode != 0:
        return False, f"podman info failed: {run.stderr.strip()[:200]}"
    return True, f"podman with {run.stdout.strip() or 'its default OCI runtime'}"


def resolve_runtime(requested: str | None) -> str:
    if requested in ("host", "podman"):
        if requested == "podman":
            ok, why = podman_works()
            if not ok:
                raise typer.BadParameter(f"--container-runtime podman: {why}")
        return requested
    if requested not in (None, "", "auto"):
        raise typer.BadParameter("--container-runtime must be podman, host or auto")
    ok, why = podman_works()
    return "podman" if ok else "host"


def serve(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8080, help="Port to listen on."),
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
        help="Require this bearer token or API key (repeatable).",
    ),
    bucket_root: Path = typer.Option(None, "--bucket-root", help="Folder holding local buckets."),
    gcs: bool = typer.Option(False, "--gcs", help="Send gs:// to real Cloud Storage (needs gcsfs)."),
    cancel_grace: float = typer.Option(10.0, "--cancel-grace", help="Seconds between SIGTERM and SIGKILL."),
    log_level: str = typer.Option("info", "--log-level"),
) -> None:
    """Run the Trainworks server in the foreground."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    runtime = resolve_runtime(container_runtime)
    tokens = frozenset(t for item in api_token for t in item.split(",") if t)
    settings = Settings(
        home=home or default_home(),
        database_url=database_url,
        container_runtime=runtime,
        api_tokens=tokens,
        bucket_root=bucket_root,
        gcs_protocol="gcs" if gcs else "file",
        cancel_grace_seconds=cancel_grace,
    )
    log.info("home %s, database %s", settings.home, settings.db_url.split("@")[-1])
    log.info("container runtime: %s%s", runtime, "" if runtime == "podman" else f" ({podman_works()[1]})")
    if tokens:
        log.info("auth: %d token(s) required", len(tokens))
    from trainworks.api.app import create_app

    os.environ.setdefault("TRAINWORKS_HOME", str(settings.home))
    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level.lower(), access_log=False)
