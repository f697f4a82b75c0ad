"""Stored API tokens: who may call the server, for which projects.

A record keeps the SHA-256 of its token, never the token: the token is shown once, when it is made. A token
names the projects it may use ("*" for all) and whether it is an admin token (the /metrics endpoint, buckets
no project owns, bucket listings across projects). Tokens are revoked, never deleted, so the server knows
that auth is on for as long as any record exists. Lookups read by hash on a plain connection (no write
lock), cheap enough for every request.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from trainworks.kernel.wire import now_utc
from trainworks.store.database import Database
from trainworks.store.tables import ApiTokenRow

ALL_PROJECTS = "*"
TOKEN_PREFIX = "tw_"  # lets log redaction spot a stored token anywhere in a line
_PROJECT = re.compile(r"[a-z0-9][a-z0-9.:-]{0,62}")
_MAX_DESCRIPTION = 1000


@dataclass(frozen=True)
class TokenRecord:
    """A token's record, without any secret."""

    id: str
    projects: tuple[str, ...]
    admin: bool
    description: str
    create_time: datetime
    revoked: bool
    revoke_time: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "projects": list(self.projects),
            "admin": self.admin,
            "description": self.description,
            "createTime": self.create_time.isoformat(),
            "revoked": self.revoked,
        }
        if self.revoke_time is not None:
            out["revokeTime"] = self.revoke_time.isoformat()
        return out


class TokenError(ValueError):
    """A token request that cannot be met (a bad project name, an unknown ID)."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def check_projects(projects: list[str], admin: bool) -> tuple[str, ...]:
    """The projects of a new token: IDs or numbers, or "*"; an admin token without any gets "*"."""
    if not projects:
        if admin:
            return (ALL_PROJECTS,)
        raise TokenError("a token needs at least one --project (or --admin)")
    for project in projects:
        if project != ALL_PROJECTS and not _PROJECT.fullmatch(project):
            raise TokenError(
                f"invalid project {project[:80]!r}: use a project ID (lowercase letters, digits, dashes), "
                "a project number, or * for all projects"
            )
    return tuple(dict.fromkeys(projects))


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
        if len(description) > _MAX_DESCRIPTION:
            raise TokenError(f"the description is longer than {_MAX_DESCRIPTION} characters")
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
