"""Resource names as the API returns them (always with the project number)."""

from __future__ import annotations

import re

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
