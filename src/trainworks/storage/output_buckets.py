"""The buckets a create request names, checked against their owners and claimed for its project.

A job, tuning job, training pipeline or persistent resource may name gs:// places anywhere in its body (and a
model upload or dataset create or import the places it reads). Any
of them in a bucket another project owns is refused (403 PERMISSION_DENIED naming the field, e.g.
`custom_job.job_spec.base_output_directory.output_uri_prefix`), whether or not the server requires tokens:
a job of one project never reads or writes another's bucket. The outputs (every `output_uri_prefix`) in a
bucket no project owns are then claimed for the request's project (storage/bucket_projects.py), so the bucket
its job will make is its own. Only local buckets have owners: with real Cloud Storage this does nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import select

from trainworks.kernel.errors import ApiError, FieldViolation
from trainworks.kernel.projects import Projects
from trainworks.kernel.status import Code
from trainworks.kernel.wire_errors import snake
from trainworks.storage.bucket_projects import Owner, bucket_owner, claim_owner
from trainworks.storage.gcs import StoragePathError, parse_gcs_uri
from trainworks.store.tables import ProjectRow

OUTPUT_KEYS = frozenset({"output_uri_prefix"})
# Names of published schemas (gs://google-cloud-aiplatform/schema/...), not places in anyone's bucket.
_SCHEMA_KEY = re.compile(r"(?:^|_)schema_uri$|^training_task_definition$")


def named_uris(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(field path, gs:// URI) of every gs:// string in a request body, field names in snake_case."""
    if isinstance(value, str):
        if value.startswith("gs://"):
            yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            name = snake(str(key))
            if not _SCHEMA_KEY.search(name):
                yield from named_uris(item, f"{path}.{name}" if path else name)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from named_uris(item, f"{path}[{i}]")


def _refused(field: str, bucket: str) -> ApiError:
    description = f"the bucket {bucket!r} belongs to another project"
    return ApiError(
        Code.PERMISSION_DENIED,
        f"Permission denied on {field}: {description}.",
        [FieldViolation(field, description)],
        reason="PERMISSION_DENIED",
    )


class OutputBuckets:
    def __init__(self, bucket_root: Path | None, projects: Projects) -> None:
        self.bucket_root = bucket_root
        self.projects = projects

    def _project(self, project: str, location: str) -> tuple[str, str]:
        """The project's ID (its number when only that is known) and number."""
        number = self.projects.number(project, location)
        if not project.isdigit():
            return project, number
        with self.projects.db.session() as session:
            found = session.scalar(select(ProjectRow.project_id).where(ProjectRow.project_number == number))
        return found or number, number

    def admit(self, project: str, location: str, root: str, body: Any) -> None:
        """Refuse a body naming another project's bucket; claim its unowned output buckets."""
        if self.bucket_root is None:
            return
        project_id, number = self._project(project, location)
        ours = Owner(project_id, number)
        outputs: dict[str, str] = {}
        for field, uri in named_uris(body, root):
            try:
                bucket = parse_gcs_uri(uri).bucket
            except StoragePathError:
                continue  # validation reports malformed URIs; a non-bucket string owns nothing
            owner = bucket_owner(self.bucket_root, bucket)
            if owner is not None and not owner.includes(project_id) and not owner.includes(number):
                raise _refused(field, bucket)
            if field.rsplit(".", 1)[-1] in OUTPUT_KEYS:
                outputs.setdefault(bucket, field)
        for bucket, field in outputs.items():
            owner = claim_owner(self.bucket_root, bucket, ours.project, ours.project_number)
            if not owner.includes(project_id) and not owner.includes(number):
                raise _refused(field, bucket)  # another project claimed it a moment ago
