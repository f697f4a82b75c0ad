"""Serves the console: its assets under ``/console/assets/``, the vendored libraries under
``/console/vendor/``, its defaults, and its index page for every other path.

The console is plain ES modules and CSS (no build step); it routes client-side, so ``/console/...`` paths
(such as the ``webAccessUris`` terminal links ``/console/terminal/P/L/JOB/REPLICA``) all get the index page.
Everything it shows comes from the same REST API the clients use; ``/console/defaults.json`` only says
which project and location to open on (open like the pages: it carries no data).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from trainworks.api.state import services
from trainworks.kernel.names import DEFAULT_PROJECT

STATIC = Path(__file__).parent / "static"
INDEX = STATIC / "index.html"
PREFIX = "/console"
# The shell is tiny and changes with each release: revalidate instead of caching a stale app.
NO_CACHE = {"Cache-Control": "no-cache"}


def install(app: FastAPI) -> None:
    """Mount the assets and add the index routes (the mounts first: they win over the catch-all)."""
    app.mount(PREFIX + "/assets", StaticFiles(directory=STATIC / "assets"), name="console-assets")
    app.mount(PREFIX + "/vendor", StaticFiles(directory=STATIC / "vendor"), name="console-vendor")

    @app.get(PREFIX, include_in_schema=False)
    def console_root() -> RedirectResponse:
        return RedirectResponse(PREFIX + "/", status_code=307)

    @app.get(PREFIX + "/defaults.json", include_in_schema=False)
    def console_defaults(request: Request) -> dict[str, str]:
        location = services(request).settings.default_location
        return {"project": DEFAULT_PROJECT, "location": location}

    @app.get(PREFIX + "/", include_in_schema=False)
    @app.get(PREFIX + "/{path:path}", include_in_schema=False)
    def console_index(path: str = "") -> FileResponse:
        return FileResponse(INDEX, media_type="text/html", headers=NO_CACHE)
