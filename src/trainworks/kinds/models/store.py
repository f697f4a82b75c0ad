"""Repository for the model registry: models, their versions, and the rows a change writes together.

Changes that touch several rows (a new version and its model's counters, aliases moving between versions,
a deletion and its finished Operation) run in one transaction: the service opens it with `transaction()`
and calls the `*_in` functions with its session.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Row, Select, and_, delete, select
from sqlalchemy.orm import Session

from trainworks.kernel.list_query import OrderedSlice
from trainworks.store.database import Database
from trainworks.store.tables import ModelRow, ModelVersionRow


@dataclass(frozen=True)
class ModelKey:
    project_number: str
    location: str
    model_id: str


def _with_versions(*also: ColumnElement[bool]) -> Select[ModelRow, ModelVersionRow]:
    """Models joined with their versions (those `also` keeps)."""
    same_model = (
        (ModelVersionRow.project_number == ModelRow.project_number)
        & (ModelVersionRow.location == ModelRow.location)
        & (ModelVersionRow.model_id == ModelRow.model_id)
    )
    return select(ModelRow, ModelVersionRow).join(ModelVersionRow, and_(same_model, *also))


def _model_where(key: ModelKey) -> tuple[ColumnElement[bool], ...]:
    return (
        ModelRow.project_number == key.project_number,
        ModelRow.location == key.location,
        ModelRow.model_id == key.model_id,
    )


def _version_where(key: ModelKey) -> tuple[ColumnElement[bool], ...]:
    return (
        ModelVersionRow.project_number == key.project_number,
        ModelVersionRow.location == key.location,
        ModelVersionRow.model_id == key.model_id,
    )


# ---------------------------------------------------------------- inside a transaction
def model_in(session: Session, key: ModelKey, lock: bool = False) -> ModelRow | None:
    query = select(ModelRow).where(*_model_where(key))
    if lock:
        query = query.with_for_update()  # PostgreSQL: version numbers and aliases change one at a time
    return session.scalars(query).first()


def versions_in(session: Session, key: ModelKey) -> list[ModelVersionRow]:
    query = select(ModelVersionRow).where(*_version_where(key)).order_by(ModelVersionRow.version_id)
    return list(session.scalars(query))


def take_aliases_in(session: Session, key: ModelKey, aliases: Sequence[str], keep_version: int) -> None:
    """Remove `aliases` from every other version of the model: an alias names one version at a time."""
    wanted = set(aliases)
    if not wanted:
        return
    for other in versions_in(session, key):
        if other.version_id != keep_version and wanted & set(other.aliases):
            other.aliases = [a for a in other.aliases if a not in wanted]


def delete_model_in(session: Session, key: ModelKey) -> list[str]:
    """Remove the model and all its versions; the registry copies they held (for the caller to remove)."""
    paths = [v.artifact_path for v in versions_in(session, key) if v.artifact_path]
    session.execute(delete(ModelVersionRow).where(*_version_where(key)))
    session.execute(delete(ModelRow).where(*_model_where(key)))
    return paths


# ---------------------------------------------------------------- the repository
class ModelStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        with self.db.session() as session:
            yield session

    def model(self, key: ModelKey) -> ModelRow | None:
        with self.db.session() as session:
            return model_in(session, key)

    def versions(self, key: ModelKey) -> list[ModelVersionRow]:
        with self.db.session() as session:
            return versions_in(session, key)

    def version(self, key: ModelKey, version_id: int) -> ModelVersionRow | None:
        with self.db.session() as session:
            query = select(ModelVersionRow).where(
                *_version_where(key), ModelVersionRow.version_id == version_id
            )
            return session.scalars(query).first()

    def page_models(
        self, project_number: str, location: str, rows: OrderedSlice
    ) -> list[tuple[ModelRow, ModelVersionRow]]:
        """Models with their default versions, in `rows.order` (then by model ID)."""
        query = _with_versions(ModelVersionRow.version_id == ModelRow.default_version).where(
            ModelRow.project_number == project_number, ModelRow.location == location
        )
        return self._pairs(rows.narrow(query, ModelRow.model_id))

    def page_versions(self, key: ModelKey, rows: OrderedSlice) -> list[tuple[ModelRow, ModelVersionRow]]:
        """Versions of one model in `rows.order` (then by version ID), each with its model row."""
        return self._pairs(
            rows.narrow(_with_versions().where(*_model_where(key)), ModelVersionRow.version_id)
        )

    def _pairs(self, query: Select[ModelRow, ModelVersionRow]) -> list[tuple[ModelRow, ModelVersionRow]]:
        with self.db.session() as session:
            return [_pair(r) for r in session.execute(query)]


def _pair(row: Row[ModelRow, ModelVersionRow]) -> tuple[ModelRow, ModelVersionRow]:
    return row[0], row[1]


__all__ = [
    "ModelKey",
    "ModelStore",
    "delete_model_in",
    "model_in",
    "take_aliases_in",
    "versions_in",
]
