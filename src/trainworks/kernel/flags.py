"""Values given on the command line or in a config file, whatever the kind: gcloud's ArgList and ArgDict
flags (with its `^D^` separator escape), snake_case keys of a config file, and durations such as `1h30m`.

Pure parsing, no network; a bad value is a FlagError naming the flag.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from trainworks.kernel.names import FlagError


# ====================================================================== list and dict flags
def split_list(value: str, delim: str = ",") -> list[str]:
    """Split a gcloud ArgList value. `^D^` at the start picks another delimiter D (gcloud escaping).

    `a,b` -> [a, b]; `^:^python3:-c:print(1, 2)` -> [python3, -c, print(1, 2)].
    """
    if value.startswith("^"):
        end = value.find("^", 1)
        if end > 1:
            delim, value = value[1:end], value[end + 1 :]
    if value == "":
        return []
    return value.split(delim)


def split_lists(values: Iterable[str] | None) -> list[str] | None:
    """A repeated ArgList flag: every occurrence is split and the parts are concatenated."""
    if not values:
        return None
    out: list[str] = []
    for value in values:
        out.extend(split_list(value))
    return out


def parse_dict(value: str, flag: str, spec: dict[str, type] | None = None) -> dict[str, Any]:
    """Parse a gcloud ArgDict value `k=v,k2=v2` (`^D^` escaping too); with `spec`, only its keys are valid."""
    out: dict[str, Any] = {}
    for item in split_list(value):
        if item == "":
            continue
        if "=" not in item:
            raise FlagError(
                flag,
                f"bad syntax for dict arg: [{item}]; expected KEY=VALUE pairs separated by commas "
                "(use the ^D^ prefix to pick another separator, e.g. ^:^k=a,b:k2=c)",
            )
        key, val = item.split("=", 1)
        key = key.strip()
        if not key:
            raise FlagError(flag, f"bad syntax for dict arg: [{item}]; the key is empty")
        if key in out:
            raise FlagError(flag, f"key [{key}] is given more than once")
        if spec is not None:
            if key not in spec:
                raise FlagError(flag, f"unknown key [{key}]; valid keys are [{', '.join(sorted(spec))}]")
            if spec[key] is int:
                try:
                    out[key] = int(val)
                except ValueError:
                    raise FlagError(flag, f"key [{key}] needs an integer, got [{val}]") from None
                continue
        out[key] = val
    return out


def parse_dicts(values: Iterable[str] | None, flag: str) -> dict[str, str]:
    """A repeated ArgDict flag (e.g. --labels): every occurrence parsed, a later key replacing an earlier."""
    merged: dict[str, str] = {}
    for value in values or []:
        merged.update(parse_dict(value, flag))
    return merged


# ====================================================================== config files
def read_config(path: Path, loader: type[yaml.SafeLoader] = yaml.SafeLoader) -> Any:
    """The YAML (or JSON) document of a --config file, read with `loader`."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise FlagError("--config", f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader or a subclass of it
    except yaml.YAMLError as exc:
        raise FlagError("--config", f"{path} is not valid YAML or JSON: {exc}") from None


def read_config_mapping(
    path: Path, what: str, loader: type[yaml.SafeLoader] = yaml.SafeLoader
) -> dict[Any, Any]:
    """The mapping a --config file holds (`read_config`); anything else is a FlagError saying the file must
    hold `what`."""
    data = read_config(path, loader)
    if not isinstance(data, dict):
        kind = "nothing" if data is None else type(data).__name__
        raise FlagError("--config", f"{path} must hold {what}, not {kind}")
    return data


def _snake_to_camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def camelize(value: Any, _map_keys: bool = False) -> Any:
    """snake_case keys -> lowerCamelCase, recursively; keys inside `labels` (a map) are left alone."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key) if _map_keys else _snake_to_camel(str(key))
            out[name] = item if name == "labels" and not _map_keys else camelize(item)
        return out
    if isinstance(value, list):
        return [camelize(v) for v in value]
    return value


# ====================================================================== durations
_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
# Flags take any Unicode digit (\d), run files only ASCII ones: both as they always did.
_NUMBER = r"\d+(?:\.\d+)?"
_WHOLE = {strict: re.compile(_NUMBER, re.ASCII if strict else 0) for strict in (False, True)}
_PART = {strict: re.compile(f"({_NUMBER})([dhms])", re.ASCII if strict else 0) for strict in (False, True)}


def duration_seconds(value: str, *, ascii_digits: bool = False) -> float | None:
    """Seconds of `3600`, `3600s`, `90m`, `1h30m` or `2d` (case and surrounding space ignored); None when
    `value` is no duration."""
    text = value.strip().lower()
    if _WHOLE[ascii_digits].fullmatch(text):
        return float(text)
    pos, seconds = 0, 0.0
    for match in _PART[ascii_digits].finditer(text):
        if match.start() != pos:
            break
        seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if not text or pos != len(text):
        return None
    return seconds


def machine_spec(fields: dict[str, Any]) -> dict[str, Any]:
    """The machineSpec of a pool-spec flag's keys: machine-type, and accelerator-type with its count (1 by
    default) when given."""
    machine: dict[str, Any] = {"machineType": fields["machine-type"]}
    if fields.get("accelerator-type"):
        machine["acceleratorType"] = fields["accelerator-type"]
        machine["acceleratorCount"] = fields.get("accelerator-count", 1)
    return machine


def disk_spec(fields: dict[str, Any]) -> dict[str, Any] | None:
    """The diskSpec of a pool-spec flag's disk-type and disk-size keys; None without either."""
    if "disk-type" not in fields and "disk-size" not in fields:
        return None
    disk: dict[str, Any] = {}
    if fields.get("disk-type"):
        disk["bootDiskType"] = fields["disk-type"]
    if "disk-size" in fields:
        disk["bootDiskSizeGb"] = fields["disk-size"]
    return disk


__all__ = [
    "camelize",
    "disk_spec",
    "duration_seconds",
    "machine_spec",
    "parse_dict",
    "parse_dicts",
    "read_config",
    "read_config_mapping",
    "split_list",
    "split_lists",
]
