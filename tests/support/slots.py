"""A server's replica slots (backends/slots.py), as its fork server reports them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.server import ServerProcess, wait_for
from trainworks.backends.slots import STATE


def slots_folder(home: Path) -> Path:
    return home / "fork-server" / "slots"


def slot_state(home: Path) -> dict[str, list[int]]:
    try:
        return dict(json.loads((slots_folder(home) / STATE).read_text()))
    except (OSError, ValueError):
        return {"ready": [], "building": []}


def wait_for_slots(server: ServerProcess, count: int) -> list[int]:
    """Wait until `count` slots are ready: all built for the plan of the last replica launched (the fork
    server drops the others as that launch comes)."""
    wait_for(
        lambda: len(slot_state(server.home)["ready"]) == count,
        timeout=120,
        what=f"{count} replica slot(s) ready",
    )
    return slot_state(server.home)["ready"]


def slot_folders(home: Path) -> list[Path]:
    """The folders of the slots that are, or were, there (one per slot supervisor)."""
    folder = slots_folder(home)
    return sorted(p for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []
