"""The split rules of dataset exports (pure): every split kind, counts, disjoint and complete sets,
determinism across processes, fraction checks, timestamp order, stratified proportions, predefined values,
and filterSplit filters over tabular rows and JSONL items."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from trainworks.kinds.datasets import splits
from trainworks.kinds.datasets.splits import Fractions, Items, TableRows


def table(count: int, **columns: list[str]) -> TableRows:
    names = ["id", *columns]
    rows = [[str(i), *(values[i] for values in columns.values())] for i in range(count)]
    return TableRows(names, rows)


def assert_disjoint(assignment: splits.Assignment) -> None:
    seen: set[int] = set()
    for name in splits.SETS:
        indices = assignment[name]
        assert indices == sorted(indices), f"{name} is not in dataset order"
        assert not seen & set(indices), f"{name} overlaps another set"
        seen |= set(indices)


def sizes(assignment: splits.Assignment) -> tuple[int, int, int]:
    return len(assignment["training"]), len(assignment["validation"]), len(assignment["test"])


# ------------------------------------------------------------------ fractions
def test_fraction_split_defaults_to_80_10_10_and_uses_every_row() -> None:
    rows = table(1000)
    assignment = splits.fraction_split(rows, Fractions.of(0, 0, 0))
    assert sizes(assignment) == (800, 100, 100)
    assert_disjoint(assignment)
    assert sorted(sum(assignment.values(), [])) == list(range(1000))


def test_fraction_split_counts_follow_the_fractions_and_drop_the_rest() -> None:
    assignment = splits.fraction_split(table(200), Fractions.of(0.5, 0.2, 0.1))
    assert sizes(assignment) == (100, 40, 20)
    assert_disjoint(assignment)


def test_fractions_summing_to_one_in_floating_point_are_complete() -> None:
    for count in (1, 3, 7, 10, 99, 1001):
        first, second, third = Fractions(0.7, 0.2, 0.1).boundaries(count)
        assert third == count
        assert 0 <= first <= second <= third


def test_fraction_split_is_not_in_row_order() -> None:
    assignment = splits.fraction_split(table(100), Fractions.of(0.5, 0.5, 0))
    assert assignment["training"] != list(range(50))


def test_fraction_split_is_deterministic_across_processes() -> None:
    here = splits.fraction_split(table(300), Fractions.of(0.6, 0.3, 0.1))
    code = (
        "import json, sys\n"
        "from trainworks.kinds.datasets import splits as s\n"
        "rows = s.TableRows(['id'], [[str(i)] for i in range(300)])\n"
        "print(json.dumps(s.fraction_split(rows, s.Fractions.of(0.6, 0.3, 0.1))))\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    )
    assert json.loads(other.stdout) == here


def test_fraction_problems() -> None:
    assert splits.fraction_problems(0.8, 0.1, 0.1) == []
    assert splits.fraction_problems(0.5, 0.5, 0.0) == []
    over = splits.fraction_problems(0.8, 0.2, 0.1)
    assert over and over[0][0] == "training_fraction" and "must not exceed 1" in over[0][1]
    assert splits.fraction_problems(-0.1, 0.5, 0.5)[0][0] == "training_fraction"
    assert splits.fraction_problems(0.1, float("nan"), 0.5)[0][0] == "validation_fraction"
    assert splits.fraction_problems(0.1, 0.2, 1.5)[0][0] == "test_fraction"


# ------------------------------------------------------------------ timestamp
def test_timestamp_split_puts_the_earliest_rows_in_training() -> None:
    # Times in reverse row order, with a mix of zones: the order is by instant, not by text.
    stamps = [f"2024-01-{31 - i:02d}T12:00:00Z" for i in range(20)]
    stamps[0] = "2024-02-01T01:00:00+02:00"  # 2024-01-31T23:00Z: still the latest
    rows = table(20, ts=stamps)
    assignment = splits.timestamp_split(rows, "ts", Fractions.of(0.6, 0.2, 0.2), "timestamp_split.key")
    assert sizes(assignment) == (12, 4, 4)
    assert_disjoint(assignment)
    latest_training = max(stamps[i] for i in assignment["training"] if i != 0)
    earliest_validation = min(stamps[i] for i in assignment["validation"])
    assert latest_training < earliest_validation
    assert max(stamps[i] for i in assignment["validation"]) < min(
        stamps[i] for i in assignment["test"] if i != 0
    )
    assert 0 in assignment["test"]


def test_timestamp_split_rejects_a_value_that_is_not_rfc3339() -> None:
    rows = table(3, ts=["2024-01-01T00:00:00Z", "yesterday", "2024-01-02T00:00:00Z"])
    with pytest.raises(splits.SplitError) as caught:
        splits.timestamp_split(rows, "ts", Fractions.of(0, 0, 0), "timestamp_split.key")
    assert caught.value.field == "timestamp_split.key"
    assert "row 2" in str(caught.value) and "yesterday" in str(caught.value)


# ------------------------------------------------------------------ stratified
def test_stratified_split_keeps_the_proportions_of_each_class() -> None:
    classes = ["a"] * 500 + ["b"] * 300 + ["c"] * 200
    rows = table(1000, label=classes)
    assignment = splits.stratified_split(rows, "label", Fractions.of(0.8, 0.1, 0.1))
    assert_disjoint(assignment)
    assert sizes(assignment) == (800, 100, 100)
    for name, share in (("training", 0.8), ("validation", 0.1), ("test", 0.1)):
        counts = Counter(classes[i] for i in assignment[name])
        assert counts == {"a": 500 * share, "b": 300 * share, "c": 200 * share}


# ------------------------------------------------------------------ predefined
def test_predefined_split_follows_the_column_and_drops_other_values() -> None:
    values = ["training", "validation", "test", "TEST", " training ", "unassigned", ""]
    assignment = splits.predefined_split(table(7, use=values), "use")
    assert assignment == {"training": [0, 4], "validation": [1], "test": [2, 3]}


def test_predefined_split_on_item_labels() -> None:
    items = Items(
        [
            {"textContent": "a", "dataItemResourceLabels": {splits.ML_USE_LABEL: "training"}},
            {"textContent": "b", "dataItemResourceLabels": {splits.ML_USE_LABEL: "test"}},
            {"textContent": "c"},
        ]
    )
    assert splits.predefined_split(items, "ml_use") == {"training": [0], "validation": [], "test": [1]}
    assert splits.predefined_split(items, splits.ML_USE_LABEL)["test"] == [1]


# ------------------------------------------------------------------ filters
def test_filter_split_on_item_labels_first_match_wins() -> None:
    items = Items(
        [
            {"textContent": str(i), "dataItemResourceLabels": {"split": name, splits.ML_USE_LABEL: name}}
            for i, name in enumerate(["train", "val", "test", "train", "other"])
        ]
    )
    filters = [
        splits.compile_record_filter("labels.split=train"),
        splits.compile_record_filter("labels.aiplatform.googleapis.com/ml_use=val"),
        splits.compile_record_filter("*"),  # the rest
    ]
    assert splits.filter_split(items, filters) == {"training": [0, 3], "validation": [1], "test": [2, 4]}


def test_filter_forms_on_tabular_rows() -> None:
    rows = table(
        6, city=["Oslo", "Bergen", "Oslo", "Paris", "Porto", "Oslo"], n=["1", "2", "10", "3", "4", "5"]
    )

    def matching(text: str) -> list[int]:
        check = splits.compile_record_filter(text)
        return [i for i in range(len(rows)) if check(rows, i)]

    assert matching("city=Oslo") == [0, 2, 5]
    assert matching('city:"P*"') == [3, 4]
    assert matching("n>3") == [2, 4, 5]  # numbers compare as numbers: 10 > 3
    assert matching("city=Oslo AND NOT n=1") == [2, 5]
    assert matching("city=Paris OR city=Bergen") == [1, 3]
    assert matching("-city=Oslo") == [1, 3, 4]
    assert matching("-") == []
    assert matching("missing:*") == []


def test_filter_split_with_dash_leaves_a_set_empty() -> None:
    rows = table(4, use=["a", "b", "a", "b"])
    filters = [splits.compile_record_filter(t) for t in ("use=a", "-", "use=b")]
    assert splits.filter_split(rows, filters) == {"training": [0, 2], "validation": [], "test": [1, 3]}


def test_a_bad_filter_is_an_error() -> None:
    with pytest.raises(splits.FilterError):
        splits.compile_record_filter("labels.x = ")
