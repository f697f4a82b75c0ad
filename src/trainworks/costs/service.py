"""Cost accounting: the costs report (``by=job`` or ``by=resource``) of a project and location.

The arithmetic over billed intervals is catalog/billing.py's; what a CustomJob's replicas are as intervals is
kinds/custom_jobs/usage.py's. Where intervals come from:

* **CustomJobs**: the custom job service's ``job_usages`` (a :class:`Usage` per job: its replicas).
* **Persistent resources** (billed all the time they run, idle or not): a :class:`UsageSource` registered
  with :meth:`CostService.add_resource_source` returns one :class:`Usage` per resource, with one interval
  per provisioned span of each resource pool (``machines`` = the pool's replica count then).
  ``by=resource`` reports rows from those sources; jobs whose intervals are ``billed_to`` a resource add to
  its ``usedMachineHours``.

Prices are approximate list prices (see ``catalog/machines.json``), for accounting and estimates only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from trainworks.catalog.billing import Usage, report_wire, resource_rows, usage_rows
from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.projects import Projects
from trainworks.kernel.wire import now_utc
from trainworks.kinds.custom_jobs.service import CustomJobService

BY_VALUES = ("job", "resource")


class UsageSource(Protocol):
    """Where persistent resources' usage comes from (registered by the persistent-resources feature).

    ``usages`` returns one :class:`Usage` (kind ``persistentResource``) per resource of the project number
    and location that matches ``filter_text`` (an AIP-160 filter; raise ``invalid_argument`` for a bad
    one), each with one interval per provisioned span of each pool (``machines`` = its replica count),
    ended or not; deleted resources' spans included, so that what they cost stays reported.
    """

    def usages(self, project_number: str, location: str, filter_text: str) -> Sequence[Usage]: ...


class CostService:
    """The costs report (``by=job`` or ``by=resource``) of a project and location."""

    def __init__(
        self, jobs: CustomJobService, projects: Projects, resource_sources: Sequence[UsageSource] = ()
    ) -> None:
        self.jobs = jobs
        self.projects = projects
        self.resource_sources: list[UsageSource] = list(resource_sources)

    def add_resource_source(self, source: UsageSource) -> None:
        self.resource_sources.append(source)

    def report(self, project: str, location: str, by: str = "job", filter_text: str = "") -> dict[str, Any]:
        by = (by or "job").strip().lower()
        if by not in BY_VALUES:
            raise invalid_argument(
                [FieldViolation("by", f"expected one of {', '.join(BY_VALUES)}, got {by!r}")]
            )
        number = self.projects.number(project, location)
        now = now_utc()
        if by == "job":
            rows, total = usage_rows(self.jobs.job_usages(number, location, filter_text), now)
        else:
            resources = [
                u for source in self.resource_sources for u in source.usages(number, location, filter_text)
            ]
            jobs = self.jobs.job_usages(number, location, "") if resources else []
            rows, total = resource_rows(resources, jobs, now)
        return report_wire(by, rows, total, now)


__all__ = ["BY_VALUES", "CostService", "UsageSource"]
