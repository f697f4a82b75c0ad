"""Query parameters in either spelling (pageSize or page_size), as the proto transcoder accepts them."""

from __future__ import annotations

from fastapi import Request

from trainworks.kernel.errors import FieldViolation, invalid_argument


def query_param(request: Request, camel: str, snake: str, default: str = "") -> str:
    params = request.query_params
    return params.get(camel) or params.get(snake) or default


def int_param(request: Request, camel: str, snake: str) -> int:
    raw = query_param(request, camel, snake)
    if not raw:
        return 0
    try:
        return int(raw)
    except ValueError:
        raise invalid_argument([FieldViolation(snake, f"expected an integer, got {raw!r}")]) from None
