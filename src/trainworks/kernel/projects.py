"""Projects: the path may name a project by ID or number; names the server returns use the number."""

from __future__ import annotations

import hashlib
import re

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.wire import now_utc
from trainworks.store.database import Database
from trainworks.store.tables import ProjectRow

_LOCATION = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
_PROJECT_ID_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-.:")


def _derived_number(project_id: str, attempt: int) -> str:
    digest = hashlib.sha256(f"{project_id}#{attempt}".encode()).hexdigest()
    return str(100_000_000_000 + int(digest, 16) % 900_000_000_000)


class Projects:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._cache: dict[str, str] = {}

    def number(self, project: str, location: str | None = None) -> str:
        """The project number for a project ID or number, registering new project IDs on first use.

        The location of the path is checked here too, since every resource is scoped by both."""
        if location is not None and not _LOCATION.fullmatch(location):
            raise invalid_argument(
                [
                    FieldViolation(
                        "parent", f"invalid location {location[:80]!r}: use a region such as us-central1"
                    )
                ]
            )
        if project.isdigit():
            if len(project) > 19:
                raise invalid_argument([FieldViolation("parent", "a project number has at most 19 digits")])
            return project
        cached = self._cache.get(project)
        if cached:
            return cached
        if not project or len(project) > 63 or not set(project) <= _PROJECT_ID_CHARS:
            raise invalid_argument([FieldViolation("parent", f"invalid project {project!r}")])
        number = self._lookup(project) or self._register(project)
        self._cache[project] = number
        return number

    def _lookup(self, project: str) -> str | None:
        with self.db.session() as session:
            return session.scalar(select(ProjectRow.project_number).where(ProjectRow.project_id == project))

    def _register(self, project: str) -> str:
        for attempt in range(50):
            number = _derived_number(project, attempt)
            try:
                with self.db.session() as session:
                    session.add(ProjectRow(project_id=project, project_number=number, create_time=now_utc()))
                return number
            except IntegrityError:
                existing = self._lookup(project)
                if existing:
                    return existing
        raise RuntimeError(f"could not assign a project number to {project!r}")
