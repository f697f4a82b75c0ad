"""Reading what the real cloudml-hypertune package writes, and choosing the final measurement."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from trainworks.tuning.metrics import Measurement, final_measurement, merge, parse_reports, read_reports

REPORTER = """
import hypertune
reporter = hypertune.HyperTune()
for step, value in enumerate([0.5, 0.7, 0.65], start=1):
    reporter.report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="accuracy", metric_value=value, global_step=step)
reporter.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="", metric_value=0.9, global_step=4)
"""


def test_reads_what_hypertune_writes(tmp_path: Path) -> None:
    metrics_file = tmp_path / "deep" / "output.metrics"
    env = {**os.environ, "CLOUD_ML_HP_METRIC_FILE": str(metrics_file), "CLOUD_ML_TRIAL_ID": "3"}
    subprocess.run([sys.executable, "-c", REPORTER], env=env, check=True, timeout=60)
    reports = read_reports(metrics_file, "accuracy")
    assert [(m.step, m.value) for m in reports] == [(1, 0.5), (2, 0.7), (3, 0.65), (4, 0.9)]
    assert all(m.timestamp > 0 for m in reports)


def test_partial_lines_and_bad_values_are_skipped() -> None:
    text = (
        '{"accuracy": "0.5", "global_step": "1", "timestamp": 1.0, "trial": "1"}\n'
        '{"accuracy": "nan", "global_step": "2", "timestamp": 2.0}\n'
        '{"accuracy": "oops", "global_step": "3", "timestamp": 3.0}\n'
        '{"accuracy": "0.8", "global_st'
    )
    assert [(m.step, m.value) for m in parse_reports(text, "accuracy")] == [(1, 0.5)]
    assert read_reports(Path("/nonexistent/file"), "accuracy") == []


def test_merge_keeps_reports_that_fell_out_of_the_file() -> None:
    first = [Measurement(1, 0.1, 10.0), Measurement(2, 0.2, 11.0)]
    later = [Measurement(2, 0.2, 11.0), Measurement(3, 0.3, 12.0)]
    assert [m.step for m in merge(first, later)] == [1, 2, 3]


def test_final_measurement_follows_the_selection_type() -> None:
    reports = [Measurement(1, 0.3, 1.0), Measurement(2, 0.9, 2.0), Measurement(3, 0.5, 3.0)]
    assert final_measurement(reports, "LAST_MEASUREMENT", maximize=True).value == 0.5  # type: ignore[union-attr]
    assert final_measurement(reports, "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED", True).value == 0.5  # type: ignore[union-attr]
    assert final_measurement(reports, "BEST_MEASUREMENT", maximize=True).value == 0.9  # type: ignore[union-attr]
    assert final_measurement(reports, "BEST_MEASUREMENT", maximize=False).value == 0.3  # type: ignore[union-attr]
    assert final_measurement([], "LAST_MEASUREMENT", True) is None


def test_measurement_wire_shape() -> None:
    assert Measurement(4, 0.25, 1.0).wire("loss", 2.5) == {
        "stepCount": "4",
        "metrics": [{"metricId": "loss", "value": 0.25}],
        "elapsedDuration": "2.500s",
    }
