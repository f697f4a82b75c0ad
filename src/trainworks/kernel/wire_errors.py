"""Turns pydantic parse errors into google.rpc.BadRequest field violations with proto field paths."""

from __future__ import annotations

import json
import re
import types
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from trainworks.kernel.errors import ApiError, FieldViolation, invalid_argument

M = TypeVar("M", bound=BaseModel)
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_SURROGATE = re.compile("[\ud800-\udfff]")


def snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def printable(text: str) -> str:
    """`text` with lone surrogates escaped (`\\ud800`), so it can always be written as UTF-8."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def map_key(path: str, key: str) -> str:
    """The path of one entry of a map field: `labels["team"]`."""
    return f"{path}[{printable(json.dumps(key, ensure_ascii=False))}]"


def _unwrap(annotation: Any) -> Any:
    """`X | None` and `Annotated[X, ...]` as X."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            rest = [a for a in get_args(annotation) if a is not type(None)]
            if len(rest) != 1:
                return annotation
            annotation = rest[0]
        else:
            return annotation


def _model_field(model: type[BaseModel], key: str) -> tuple[str, Any] | None:
    """The proto (snake_case) name and annotation of the field a JSON key names, in either spelling."""
    field = model.model_fields.get(key)
    if field is not None:
        return key, field.annotation
    for name, info in model.model_fields.items():
        if info.alias == key:
            return name, info.annotation
    return None


def field_path(loc: tuple[Any, ...], prefix: str = "", model: type[BaseModel] | None = None) -> str:
    """A pydantic error location as a proto field path, e.g. `job_spec.worker_pool_specs[0].replica_count`.

    With `model`, the location is followed through the model's fields so map keys come out quoted
    (`labels["Team"]`) and both JSON spellings of a field give its proto name."""
    path = prefix
    current: Any = model
    for part in loc:
        if isinstance(part, str) and part.startswith(("function-", "json-or-python")):
            continue  # pydantic's internal validator step names
        if part == "[key]":
            continue  # a map key failed: the key is already in the path
        kind = _unwrap(current)
        origin = get_origin(kind)
        if isinstance(part, int) and origin in (list, tuple):
            path += f"[{part}]"
            current = get_args(kind)[0] if get_args(kind) else None
        elif origin is dict:
            path = map_key(path, str(part))
            current = get_args(kind)[1] if len(get_args(kind)) == 2 else None
        elif isinstance(part, int):
            path += f"[{part}]"
            current = None
        elif isinstance(kind, type) and issubclass(kind, BaseModel):
            found = _model_field(kind, str(part))
            name = found[0] if found else str(part)  # an unknown name is reported as it was sent
            path += ("." if path else "") + printable(name)
            current = found[1] if found else None
        else:
            path += ("." if path else "") + printable(snake(str(part)))
            current = None
    return path or "body"


def _describe(error: Any) -> str:
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        loc = error.get("loc", ())
        name = printable(str(loc[-1])) if loc else "?"
        return f'Unknown name "{name}": cannot find field.'
    if kind == "missing":
        return "Required field is not set."
    message = str(error.get("msg", "invalid value"))
    return printable(message.removeprefix("Value error, "))


def violations_from(
    exc: ValidationError, prefix: str = "", model: type[BaseModel] | None = None
) -> list[FieldViolation]:
    seen: set[tuple[str, str]] = set()
    out: list[FieldViolation] = []
    for error in exc.errors():
        loc = tuple(error.get("loc", ()))
        violation = FieldViolation(field_path(loc, prefix, model), _describe(error))
        key = (violation.field, violation.description)
        if key not in seen:
            seen.add(key)
            out.append(violation)
    return out


def _invalid_text(body: Any, model: type[BaseModel], prefix: str) -> list[FieldViolation]:
    """Strings that are not valid Unicode: JSON lets `"\\ud800"` through as a lone surrogate, which cannot be
    stored or written back as UTF-8. Walks the body without recursion, so any nesting depth is fine."""
    out: list[FieldViolation] = []
    stack: list[tuple[Any, tuple[Any, ...]]] = [(body, ())]
    while stack and len(out) < 20:
        value, loc = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                out.append(FieldViolation(field_path(loc, prefix, model), "invalid UTF-8 (a lone surrogate)"))
        elif isinstance(value, dict):
            for key, item in value.items():
                if _SURROGATE.search(key):
                    where = field_path((*loc, key), prefix, model)
                    out.append(FieldViolation(where, "invalid UTF-8 in a field name or map key"))
                else:
                    stack.append((item, (*loc, key)))
        elif isinstance(value, list):
            stack.extend((item, (*loc, i)) for i, item in enumerate(value))
    return out


def parse_body(model: type[M], body: Any, prefix: str = "") -> M:
    if not isinstance(body, dict):
        raise invalid_argument([FieldViolation(prefix or "body", "expected a JSON object")])
    bad_text = _invalid_text(body, model, prefix)
    if bad_text:
        raise invalid_argument(bad_text)
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise invalid_argument(violations_from(exc, prefix, model)) from None
    except RecursionError:
        too_deep = FieldViolation(prefix or "body", "the request is nested too deeply")
        raise invalid_argument([too_deep]) from None
    except ArithmeticError as exc:
        # A value a parser could not represent (e.g. a timestamp whose UTC form is before year 1): still
        # the caller's mistake, never a 500. The parsers should raise ValueError so the field is named.
        out_of_range = FieldViolation(prefix or "body", f"a value is out of range: {printable(str(exc))}")
        raise invalid_argument([out_of_range]) from None


__all__ = ["ApiError", "parse_body", "violations_from", "field_path", "map_key", "printable", "snake"]
