"""Stored API tokens, and the project names a token's scope is matched against.

Tokens are revoked, never deleted, so the server knows that auth is on for as long as any record exists.
Look-ups read by hash on a plain connection (no write lock), cheap enough for every request.
"""

from __future__ import annotations

import secrets

from sqlalchemy import select, update

from trainworks.kernel.wire import now_utc
from trainworks.store.database import Database
from trainworks.store.tables import ApiTokenRow, ProjectRow
from trainworks.tokens.rules import (
    TOKEN_PREFIX,
    TokenError,
    TokenRecord,
    check_description,
    check_projects,
    token_hash,
)


def _record(row: ApiTokenRow) -> TokenRecord:
    return TokenRecord(
        row.id,
        tuple(row.projects),
        row.admin,
        row.description,
        row.create_time,
        row.revoked,
        row.revoke_time,
    )


class TokenStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(
        self, projects: list[str], admin: bool = False, description: str = ""
    ) -> tuple[TokenRecord, str]:
        """A new token and its record; the token itself is returned here only."""
        scoped = check_projects(projects, admin)
        check_description(description)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = ApiTokenRow(
            id=secrets.token_hex(6),
            token_hash=token_hash(token),
            projects=list(scoped),
            admin=admin,
            description=description,
            create_time=now_utc(),
            revoked=False,
        )
        with self.db.session() as session:
            session.add(row)
        return _record(row), token

    def list(self) -> list[TokenRecord]:
        with self.db.session() as session:
            rows = session.scalars(select(ApiTokenRow).order_by(ApiTokenRow.create_time, ApiTokenRow.id))
            return [_record(row) for row in rows]

    def revoke(self, token_id: str) -> TokenRecord:
        """Revoke a token (again is fine); it is refused from the next request on."""
        with self.db.session() as session:
            session.execute(
                update(ApiTokenRow)
                .where(ApiTokenRow.id == token_id, ApiTokenRow.revoked.is_(False))
                .values(revoked=True, revoke_time=now_utc())
            )
            row = session.get(ApiTokenRow, token_id)
            if row is None:
                raise TokenError(f"no token has the ID {token_id[:40]!r}")
            return _record(row)

    def find(self, token: str) -> TokenRecord | None:
        """The live (not revoked) record of a presented token, or None."""
        digest = token_hash(token)
        with self.db.engine.connect() as conn:
            row = conn.execute(
                select(
                    ApiTokenRow.id,
                    ApiTokenRow.projects,
                    ApiTokenRow.admin,
                    ApiTokenRow.description,
                    ApiTokenRow.create_time,
                ).where(ApiTokenRow.token_hash == digest, ApiTokenRow.revoked.is_(False))
            ).first()
        if row is None:
            return None
        return TokenRecord(row.id, tuple(row.projects), row.admin, row.description, row.create_time, False)

    def any_exist(self) -> bool:
        """Whether any token was ever made (revoked ones count: the last revoked leaves the server shut)."""
        with self.db.engine.connect() as conn:
            return conn.execute(select(ApiTokenRow.id).limit(1)).first() is not None

    def other_project_name(self, project: str) -> str | None:
        """A registered project's other name: its number for an ID, its ID for a number; None if unknown."""
        column, wanted = (
            (ProjectRow.project_id, ProjectRow.project_number)
            if project.isdigit()
            else (ProjectRow.project_number, ProjectRow.project_id)
        )
        with self.db.engine.connect() as conn:
            found: str | None = conn.execute(select(column).where(wanted == project)).scalar()
        return found
