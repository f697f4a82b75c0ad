"""`trainworks serve`: the API server with its controllers, in the foreground."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import typer
import uvicorn

from trainworks.config import Settings, default_home

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
    log_level: str = typer.Option("info", "--log-level"),
) -> None:
    """Run the Trainworks server in the foreground."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    tokens = frozenset(t for item in api_token for t in item.split(",") if t)
    settings = Settings(
        home=home or default_home(),
        database_url=database_url,
        container_runtime="host",
        api_tokens=tokens,
        bucket_root=bucket_root,
        gcs_protocol="gcs" if gcs else "file",
        cancel_grace_seconds=cancel_grace,
        inventory_path=inventory,
        preemption_notice_seconds=preemption_notice,
        insecure_registries=tuple(insecure_registry),
    )
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
    settings.container_runtime = resolve_runtime(container_runtime, settings)
    log.info("home %s, database %s", settings.home, settings.db_url.split("@")[-1])
    if tokens:
        log.info("auth: %d token(s) required", len(tokens))
    from trainworks.api.app import create_app

    os.environ.setdefault("TRAINWORKS_HOME", str(settings.home))
    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level.lower(), access_log=False)
