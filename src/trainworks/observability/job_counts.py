"""`trainworks_jobs`: how many jobs of each kind are in each state, counted by the database at scrape time.

One grouped COUNT per table, never loading rows. Every state of a kind is reported, zeros included, so a
series does not vanish when its last job moves on.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Select, func, select

from trainworks.jobs.enums import JobState, PipelineState
from trainworks.kernel.wire import ProtoEnum
from trainworks.store.database import Database
from trainworks.store.tables import CustomJobRow, JobColumns, TrainingPipelineRow, TuningJobRow

# kind label -> (table, its state enum)
KINDS: dict[str, tuple[type[JobColumns], type[ProtoEnum]]] = {
    "custom": (CustomJobRow, JobState),
    "tuning": (TuningJobRow, JobState),
    "pipeline": (TrainingPipelineRow, PipelineState),
}


def state_counts(table: type[JobColumns]) -> Select[int, int]:
    """(state, how many rows) of a job table, counted on its state index: no row is read."""
    return select(table.state, func.count()).group_by(table.state)


class JobCountCollector(Collector):
    def __init__(self, db: Database) -> None:
        self.db = db

    def describe(self) -> list[Metric]:
        # Described without a query, so registering the collector never touches the database.
        return [GaugeMetricFamily("trainworks_jobs", "Jobs by kind and state.", labels=["kind", "state"])]

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("trainworks_jobs", "Jobs by kind and state.", labels=["kind", "state"])
        with self.db.session() as session:
            for kind, (table, states) in KINDS.items():
                counts = dict(session.execute(state_counts(table)).tuples().all())
                for state in states:
                    if state.value == 0:  # *_UNSPECIFIED: never stored
                        continue
                    family.add_metric([kind, state.name], float(counts.get(int(state), 0)))
        yield family
