"""The token look-ups the HTTP app makes for every request: a presented token's record, whether auth is on,
and the names of a project a token's scope may list it by (ID or number)."""

from __future__ import annotations

from trainworks.store.database import Database
from trainworks.tokens.rules import TokenRecord
from trainworks.tokens.store import TokenStore


class TokenService:
    def __init__(self, db: Database) -> None:
        self.tokens = TokenStore(db)
        self._names: dict[str, str] = {}  # registrations never change: found pairs are kept for good

    def find(self, token: str) -> TokenRecord | None:
        """The live (not revoked) record of a presented token, or None."""
        return self.tokens.find(token)

    def any_exist(self) -> bool:
        """Whether any token was ever made (revoked ones count)."""
        return self.tokens.any_exist()

    def project_names(self, project: str) -> set[str]:
        """A project's names: the one given and, once the server registered the project, its other one."""
        other = self._names.get(project)
        if other is None:
            other = self.tokens.other_project_name(project)
            if other is None:
                return {project}
            self._names[project] = other
        return {project, other}
