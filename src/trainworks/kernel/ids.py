"""Server-assigned numeric resource IDs: time-ordered, random in the low bits, below 2**63."""

from __future__ import annotations

import secrets
import time

_EPOCH_MS = 1_577_836_800_000  # 2020-01-01T00:00:00Z


def new_numeric_id() -> int:
    millis = int(time.time() * 1000) - _EPOCH_MS
    return (millis << 22) | secrets.randbits(22)
