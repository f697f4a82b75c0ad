"""The names of a local bucket in the JSON API's listing order, and the page tokens that resume a listing.

Objects are files and folder markers under the bucket's folder; `walk_names` yields them in lexicographic
(UTF-8 byte) order without sorting the whole bucket, folding folders into prefixes for delimiter "/".
ObjectService.list_objects pages through it and describes the names it keeps.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainworks.storage.object_model import bad_request


def walk_names(
    bucket_dir: Path,
    rel: str,
    markers: set[str],
    prefix: str,
    after: str,
    skip: str | None,
    collapse: bool,
) -> Iterator[tuple[str, bool]]:
    """(name, is_prefix) in lexicographic order: a folder sorts as "name/", so a depth-first walk with
    each folder's entries sorted that way is in global order. With collapse (delimiter "/"), a folder
    past the prefix is one prefix entry when it holds any object, and is not walked."""
    try:
        entries = list(os.scandir(bucket_dir / rel if rel else bucket_dir))
    except (FileNotFoundError, NotADirectoryError):
        return
    keyed: list[tuple[str, os.DirEntry[str]]] = []
    for entry in entries:
        try:
            entry.name.encode("utf-8")
        except UnicodeEncodeError:
            continue  # not a name the JSON API can carry
        if entry.is_dir(follow_symlinks=False):
            keyed.append((f"{rel}{entry.name}/", entry))
        elif entry.is_file(follow_symlinks=False):
            keyed.append((rel + entry.name, entry))
    keyed.sort(key=lambda pair: pair[0])
    for key, _entry in keyed:
        if key.endswith("/"):
            if not (key.startswith(prefix) or prefix.startswith(key)):
                continue
            if skip is not None and key.startswith(skip):
                continue
            if after and key < after and not after.startswith(key):
                continue  # every name in this folder sorts before `after`
            if collapse and key.startswith(prefix) and len(key) > len(prefix):
                if key > after and has_object(bucket_dir, key, markers):
                    yield key, True
                continue
            if key in markers and key.startswith(prefix) and key > after:
                yield key, False
            yield from walk_names(bucket_dir, key, markers, prefix, after, skip, collapse)
        elif key.startswith(prefix) and key > after and not (skip is not None and key.startswith(skip)):
            yield key, False


def has_object(bucket_dir: Path, rel: str, markers: set[str]) -> bool:
    """Whether a folder holds an object: a file or a folder marker anywhere below it."""
    if rel in markers:
        return True
    stack = [rel]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(bucket_dir / current if current else bucket_dir))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.is_file(follow_symlinks=False):
                return True
            if entry.is_dir(follow_symlinks=False):
                key = f"{current}{entry.name}/"
                if key in markers:
                    return True
                stack.append(key)
    return False


def encode_page_token(last: str, is_prefix: bool) -> str:
    """Where the next page resumes: after `last`, past the whole folder when it is a prefix."""
    raw = json.dumps({"a": last, "p": is_prefix}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_page_token(token: str) -> dict[str, Any]:
    """{"a": the last name or prefix of the previous page, "p": whether it was a prefix}."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if isinstance(data, dict) and isinstance(data.get("a"), str) and isinstance(data.get("p"), bool):
            return data
    except (ValueError, binascii.Error):
        pass
    raise bad_request("Invalid value for pageToken: pass the nextPageToken of the previous page.")
