"""Serves the console: its assets under ``/console/assets/`` and its index page for every other path.

The console is plain ES modules and CSS (no build step); it routes client-side, so ``/console/...`` paths
(such as the ``webAccessUris`` terminal links ``/console/terminal/P/L/JOB/REPLICA``) all get the index page.
Everything it shows comes from the same REST API the clients use.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"
INDEX = STATIC / "index.html"
PREFIX = "/console"
# The shell is tiny and changes with each release: revalidate instead of caching a stale app.
NO_CACHE = {"Cache-Control": "no-cache"}


def install(app: FastAPI) -> None:
    """Mount the assets and add the index routes (the assets mount first: it wins over the catch-all)."""
    app.mount(PREFIX + "/assets", StaticFiles(directory=STATIC / "assets"), name="console-assets")

    @app.get(PREFIX, include_in_schema=False)
    def console_root() -> RedirectResponse:
        return RedirectResponse(PREFIX + "/", status_code=307)

    @app.get(PREFIX + "/", include_in_schema=False)
    @app.get(PREFIX + "/{path:path}", include_in_schema=False)
    def console_index(path: str = "") -> FileResponse:
        return FileResponse(INDEX, media_type="text/html", headers=NO_CACHE)
