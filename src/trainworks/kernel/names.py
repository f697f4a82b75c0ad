"""Resource names as the API returns them (always with the project number)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainworks.kernel.errors import not_found


def parent_name(project_number: str, location: str) -> str:
    return f"projects/{project_number}/locations/{location}"


def custom_job_name(project_number: str, location: str, job_id: int) -> str:
    return f"{parent_name(project_number, location)}/customJobs/{job_id}"


def operation_name(project_number: str, location: str, resource: str, op_id: int) -> str:
    prefix = parent_name(project_number, location)
    if resource:
        prefix += f"/{resource}"
    return f"{prefix}/operations/{op_id}"


_NUMERIC = re.compile(r"^[0-9]{1,19}$")


def numeric_id(value: str, what: str) -> int:
    """A numeric resource ID from the path; anything else cannot name a resource."""
    if not _NUMERIC.fullmatch(value) or int(value) >= 2**63:
        raise not_found(f"{what} {value!r}")
    return int(value)


# ====================================================================== names given on the command line
#: The project a command names when --project is not given; the console opens on it too.
DEFAULT_PROJECT = "default"


class FlagError(Exception):
    """A command-line value is wrong; `flag` names the flag, the message says what and why.

    Here, with the names the CLI parses, so that parsing a name needs no CLI machinery."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(f"Invalid value for [{flag}]: {message}")
        self.flag = flag
        self.message = message


@dataclass(frozen=True)
class NameSpec:
    """How the CLI names the resources of one collection, for `parse_name` and its messages."""

    collection: str  # e.g. "customJobs"
    argument: str  # the CLI argument, e.g. "CUSTOM_JOB"
    kind: str  # in "[X] is not a {kind} name", e.g. "CustomJob"
    noun: str  # in "a {noun} ID", e.g. "job"
    full_noun: str  # in "a full {full_noun} name", e.g. "CustomJob"
    nested: bool = False  # names may sit under a parent resource (operations)


def parse_name(spec: NameSpec, value: str, project: str, region: str | None) -> str:
    """A full resource name, from a name or a bare ID (expanded with --project and --region).

    A full name must be projects/P/locations/L/COLLECTION/ID (nested specs: under any parent resource)."""
    value = value.strip().strip("/")
    if value.startswith("projects/"):
        parts = value.split("/")
        shape = len(parts) >= 6 and len(parts) % 2 == 0 if spec.nested else len(parts) == 6
        if not shape or parts[2] != "locations" or parts[-2] != spec.collection or not parts[-1]:
            raise FlagError(
                spec.argument,
                f"[{value}] is not a {spec.kind} name (projects/P/locations/L/{spec.collection}/ID)",
            )
        return value
    if "/" in value or not value or value.startswith("@"):
        raise FlagError(
            spec.argument, f"[{value}] is neither a {spec.noun} ID nor a full {spec.full_noun} name"
        )
    if not region:
        raise FlagError(
            "--region", f"a region is needed to expand the {spec.noun} ID [{value}]; pass --region"
        )
    return f"projects/{project}/locations/{region}/{spec.collection}/{value}"
