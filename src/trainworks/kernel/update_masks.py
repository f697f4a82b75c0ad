"""The updateMask check of resources whose paths are mutable, immutable, output only or unknown."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.wire_errors import snake

# Finds the root field of a (snake_case) path among the immutable and output-only roots; None: no root.
RootOf = Callable[[str, Collection[str]], str | None]


def top_field(path: str, roots: Collection[str]) -> str | None:
    """The path's first segment (every root is a top-level field)."""
    return path.split(".")[0]


def listed_root(path: str, roots: Collection[str]) -> str | None:
    """The root (possibly dotted, e.g. `resource_pools.id`) that the path is or lies under."""
    return next((r for r in roots if path == r or path.startswith(r + ".")), None)


@dataclass(frozen=True)
class UpdateMaskRules:
    mutable: Collection[str]  # exact paths that may be updated
    immutable: Collection[str]  # roots
    output_only: Collection[str]  # roots
    root_of: RootOf
    kind: str  # the resource type, for the message on an unknown path
    updatable: str  # the fields to suggest instead, as text

    def parse(self, mask: str) -> list[str]:
        """The mask's paths in snake_case; invalid_argument naming each path that cannot be updated."""
        paths = [snake(p.strip()) for p in mask.split(",") if p.strip()]
        if not paths:
            raise invalid_argument([FieldViolation("update_mask", "Required field is not set.")])
        problems: list[FieldViolation] = []
        for path in paths:
            if path in self.mutable:
                continue
            root = self.root_of(path, (*self.immutable, *self.output_only))
            if root in self.immutable:
                problems.append(FieldViolation("update_mask", f"{path!r}: the field {root} is immutable"))
            elif root in self.output_only:
                problems.append(FieldViolation("update_mask", f"{path!r}: the field {root} is output only"))
            else:
                problems.append(
                    FieldViolation(
                        "update_mask",
                        f"{path!r} is not a field of {self.kind} that can be updated; use {self.updatable}",
                    )
                )
        if problems:
            raise invalid_argument(problems)
        return paths


__all__ = ["RootOf", "UpdateMaskRules", "listed_root", "top_field"]
