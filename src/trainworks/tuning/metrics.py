"""Metrics that trials report with cloudml-hypertune, and the measurements made of them. Pure.

The package keeps the last 100 reports and rewrites its whole file on each one (one JSON object per line:
the metric value as a string, `global_step` and `trial` as strings, `timestamp` a float), so a reader may see
a partial last line, and old reports fall out of the file: callers merge what they read into what they have.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TAG = "training/hptuning/metric"  # what hypertune writes when the tag is empty


@dataclass(frozen=True)
class Measurement:
    step: int
    value: float
    timestamp: float

    def wire(self, metric_id: str, elapsed_seconds: float | None = None) -> dict[str, object]:
        out: dict[str, object] = {
            "stepCount": str(self.step),
            "metrics": [{"metricId": metric_id, "value": self.value}],
        }
        if elapsed_seconds is not None:
            out["elapsedDuration"] = f"{max(elapsed_seconds, 0.0):.3f}s"
        return out


def parse_reports(text: str, metric_id: str) -> list[Measurement]:
    """The reports of `metric_id` in a hypertune file; unreadable lines (a write in progress) are skipped."""
    out: list[Measurement] = []
    for index, line in enumerate(text.splitlines()):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        raw = entry.get(metric_id)
        if raw is None:
            raw = entry.get(DEFAULT_TAG)  # reported with an empty tag: the study has a single metric
        try:
            value = float(raw)  # type: ignore[arg-type]
            timestamp = float(entry.get("timestamp", 0.0))
        except (TypeError, ValueError):
            continue
        step_text = str(entry.get("global_step") or "")
        step = int(step_text) if step_text.lstrip("-").isdigit() else index + 1
        if value == value and value not in (float("inf"), float("-inf")):  # NaN and infinities say nothing
            out.append(Measurement(step=step, value=value, timestamp=timestamp))
    return out


def read_reports(path: Path, metric_id: str) -> list[Measurement]:
    try:
        return parse_reports(path.read_text(encoding="utf-8", errors="replace"), metric_id)
    except OSError:
        return []


def merge(known: Sequence[Measurement], new: Iterable[Measurement]) -> list[Measurement]:
    """Everything seen so far, once each, in report order (reports are told apart by their timestamps)."""
    seen = {(m.timestamp, m.step) for m in known}
    merged = list(known)
    for measurement in new:
        if (measurement.timestamp, measurement.step) not in seen:
            seen.add((measurement.timestamp, measurement.step))
            merged.append(measurement)
    return sorted(merged, key=lambda m: (m.timestamp, m.step))


def final_measurement(
    measurements: Sequence[Measurement], selection: str, maximize: bool
) -> Measurement | None:
    """LAST_MEASUREMENT (the default) or BEST_MEASUREMENT, as measurementSelectionType says."""
    if not measurements:
        return None
    if selection == "BEST_MEASUREMENT":
        return (
            max(measurements, key=lambda m: m.value) if maximize else min(measurements, key=lambda m: m.value)
        )
    return measurements[-1]
