"""The costs report of the REST client (a Trainworks extension)."""

from __future__ import annotations

from trainworks.kernel.client import EXTENSIONS, Client, JsonObject


class CostsClient(Client):
    """The costs report."""

    def get_costs(self, parent: str, by: str = "job", filter: str = "") -> JsonObject:
        """Machine-hours and approximate cost of `parent`'s jobs (`by="job"`) or persistent resources
        (`by="resource"`): `{by, currency, asOf, rows: [...], totals: {...}}`."""
        return self._get(parent, "/costs", api=EXTENSIONS, params={"by": by, "filter": filter})


__all__ = ["CostsClient"]
