"""The files of a local code folder that get shipped, and the content hash that names what is staged.

One rule for both ways code is staged (the submitter's zip and autopackaging's sdist): which files count, and
a SHA-256 over each file's path, executable bit and content, so that timestamps and caches never change the
name and one changed line always does.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: Never shipped: caches, VCS metadata, editor droppings and build outputs change without the code changing.
EXCLUDED_DIRS = frozenset(
    {"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox"}
)
EXCLUDED_TOP_DIRS = frozenset({"build", "dist"})
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".swp", ".egg-info")
EXCLUDED_FILES = frozenset({".DS_Store"})


@dataclass(frozen=True)
class SourceFile:
    path: str  # relative to the folder, with forward slashes
    executable: bool
    content: bytes


def read_sources(root: Path) -> tuple[SourceFile, ...]:
    """The folder's shipped files in a stable (sorted) order; virtual environments inside it are skipped."""
    found: list[SourceFile] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        top = here == root
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in EXCLUDED_DIRS
            and not d.endswith(EXCLUDED_SUFFIXES)
            and not (top and d in EXCLUDED_TOP_DIRS)
            and not (here / d / "pyvenv.cfg").exists()  # a virtual environment, not code
        )
        for name in sorted(filenames):
            if name in EXCLUDED_FILES or name.endswith(EXCLUDED_SUFFIXES):
                continue
            path = here / name
            if path.is_file():
                executable = bool(path.stat().st_mode & stat.S_IXUSR)
                found.append(SourceFile(path.relative_to(root).as_posix(), executable, path.read_bytes()))
    return tuple(sorted(found, key=lambda f: f.path))


def content_digest(files: Iterable[SourceFile], generated: str = "") -> str:
    """sha256 over the files' paths, executable bits and contents, and any generated text (a setup.py)."""
    digest = hashlib.sha256()
    extra = [SourceFile("<generated setup>", False, generated.encode())] if generated else []
    for source in [*files, *extra]:
        # Length-prefixed fields: no two different file sets hash alike.
        for part in (source.path.encode(), b"x" if source.executable else b"-", source.content):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
    return digest.hexdigest()
