"""Turns pydantic parse errors into google.rpc.BadRequest field violations with proto field paths."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from trainworks.services.errors import ApiError, FieldViolation, invalid_argument

M = TypeVar("M", bound=BaseModel)
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def field_path(loc: tuple[Any, ...], prefix: str = "") -> str:
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif isinstance(part, str) and part.startswith(("function-", "json-or-python")):
            continue  # pydantic's internal validator step names
        else:
            path += ("." if path else "") + snake(str(part))
    return path or "body"


def _describe(error: Any) -> str:
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    message = str(error.get("msg", "invalid value"))
    return message.removeprefix("Value error, ")


def violations_from(exc: ValidationError, prefix: str = "") -> list[FieldViolation]:
    seen: set[tuple[str, str]] = set()
    out: list[FieldViolation] = []
    for error in exc.errors():
        loc = tuple(error.get("loc", ()))
        # Dict keys of maps (labels) come through as loc parts: keep them quoted.
        violation = FieldViolation(field_path(loc, prefix), _describe(error))
        key = (violation.field, violation.description)
        if key not in seen:
            seen.add(key)
            out.append(violation)
    return out


def parse_body(model: type[M], body: Any, prefix: str = "") -> M:
    if not isinstance(body, dict):
        raise invalid_argument([FieldViolation(prefix or "body", "expected a JSON object")])
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise invalid_argument(violations_from(exc, prefix)) from None


__all__ = ["ApiError", "parse_body", "violations_from", "field_path", "snake"]
