"""What a token is: the projects it may use ("*" for all), whether it is admin, and the checks on a new one.

A record keeps the SHA-256 of its token, never the token: the token is shown once, when it is made. An admin
token may use the /metrics endpoint, buckets no project owns and bucket listings across projects.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

ALL_PROJECTS = "*"
TOKEN_PREFIX = "tw_"  # lets log redaction spot a stored token anywhere in a line
MAX_DESCRIPTION = 1000
_PROJECT = re.compile(r"[a-z0-9][a-z0-9.:-]{0,62}")


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


def check_description(description: str) -> None:
    if len(description) > MAX_DESCRIPTION:
        raise TokenError(f"the description is longer than {MAX_DESCRIPTION} characters")
