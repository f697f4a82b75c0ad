"""google.longrunning.Operation as a wire model: what a long-running change (create, update, delete, import,
upload...) answers, whatever the kind, and what waiting for it gives back."""

from __future__ import annotations

from typing import Any, TypeVar

from trainworks.kernel.status import Status
from trainworks.kernel.wire import Bool, WireModel

R = TypeVar("R", bound=WireModel)


class Operation(WireModel):
    """`metadata` and `response` are google.protobuf.Any messages, kept as JSON (with their `@type`)."""

    name: str = ""
    metadata: dict[str, Any] | None = None
    done: Bool = False
    error: Status | None = None
    response: dict[str, Any] | None = None

    @property
    def progress_message(self) -> str:
        """The metadata's progressMessage (empty when it has none)."""
        return str((self.metadata or {}).get("progressMessage") or "")

    def result(self, model: type[R]) -> R | None:
        """The resource the finished operation returned, read as `model` from a server; None when it
        returned none (not done, failed, or an Empty or other response without a `name`)."""
        if not self.done or self.error is not None or not self.response or "name" not in self.response:
            return None
        return model.from_server(self.response)


__all__ = ["Operation"]
