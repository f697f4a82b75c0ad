"""The JSON body of a request, as the REST routes read it: an empty or malformed one is INVALID_ARGUMENT."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from trainworks.kernel.errors import ApiError, FieldViolation
from trainworks.kernel.status import Code


async def json_body(request: Request, required: bool = True) -> Any:
    raw = await request.body()
    if not raw.strip():
        if required:
            raise ApiError(
                Code.INVALID_ARGUMENT,
                "Invalid JSON payload received. The request body is empty.",
                [FieldViolation("body", "the request body is empty")],
            )
        return {}
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ApiError(
            Code.INVALID_ARGUMENT,
            f"Invalid JSON payload received. {exc}",
            [FieldViolation("body", f"not valid JSON: {exc}")],
        ) from None
