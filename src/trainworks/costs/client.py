"""The costs report of the REST client (a Trainworks extension) and the shape of its answer (no proto
describes it: TypedDicts of the JSON as it comes)."""

from __future__ import annotations

from typing import NotRequired, cast

# typing's TypedDict is not one pydantic can check on Python 3.11 (the tests check the server's answers).
from typing_extensions import TypedDict

from trainworks.kernel.client import EXTENSIONS, Client
from trainworks.kinds.custom_jobs.client import CostFigures, CostGroup


class CostRow(CostFigures):
    """One job (`kind` customJob) or persistent resource (`kind` persistentResource)."""

    name: str
    kind: str
    displayName: str
    state: str
    spot: bool
    createTime: NotRequired[str]
    startTime: NotRequired[str]
    endTime: NotRequired[str]
    billedTo: NotRequired[str | list[str]]  # a job's persistent resource(s), billed instead
    running: bool
    pools: NotRequired[list[CostGroup]]  # a job's
    groups: NotRequired[list[CostGroup]]  # a persistent resource's
    usedMachineHours: NotRequired[float]  # a persistent resource's hours its jobs used
    jobs: NotRequired[int]  # a persistent resource's jobs


class CostTotals(CostFigures):
    count: int


class CostsReport(TypedDict):
    by: str  # job or resource
    currency: str
    asOf: str
    pricing: str
    rows: list[CostRow]
    totals: CostTotals


class CostsClient(Client):
    """The costs report."""

    def get_costs(self, parent: str, by: str = "job", filter: str = "") -> CostsReport:
        """Machine-hours and approximate cost of `parent`'s jobs (`by="job"`) or persistent resources
        (`by="resource"`): `{by, currency, asOf, rows: [...], totals: {...}}`."""
        params = {"by": by, "filter": filter}
        return cast(CostsReport, self._get_json(parent, "/costs", api=EXTENSIONS, params=params))


__all__ = ["CostRow", "CostTotals", "CostsClient", "CostsReport"]
