"""Errors the services raise; the API layer turns them into google.rpc error bodies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainworks.kernel.status import Code


@dataclass(frozen=True)
class FieldViolation:
    field: str
    description: str


@dataclass
class ApiError(Exception):
    code: Code
    message: str
    violations: list[FieldViolation] = field(default_factory=list)
    reason: str | None = None

    def __str__(self) -> str:
        return self.message

    def details(self) -> list[dict[str, Any]]:
        details: list[dict[str, Any]] = []
        if self.violations:
            details.append(
                {
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [
                        {"field": v.field, "description": v.description} for v in self.violations
                    ],
                }
            )
        if self.reason:
            details.append(
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": self.reason,
                    "domain": "trainworks",
                }
            )
        return details


def invalid_argument(violations: list[FieldViolation], summary: str | None = None) -> ApiError:
    if summary is None:
        first = violations[0]
        summary = f"Invalid value for {first.field}: {first.description}"
        if len(violations) > 1:
            summary += f" (and {len(violations) - 1} more problem{'s' if len(violations) > 2 else ''})"
    return ApiError(Code.INVALID_ARGUMENT, summary, violations, reason="INVALID_ARGUMENT")


def not_found(what: str) -> ApiError:
    return ApiError(Code.NOT_FOUND, f"{what} not found.", reason="NOT_FOUND")


def failed_precondition(message: str) -> ApiError:
    return ApiError(Code.FAILED_PRECONDITION, message, reason="FAILED_PRECONDITION")
