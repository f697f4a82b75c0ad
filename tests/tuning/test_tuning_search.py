"""The tuning search core: StudySpec -> Optuna space, samplers, stopping rules, durable RDB storage."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import optuna
import pytest
from sqlalchemy import create_engine, inspect, text

from trainworks.store.database import Database
from trainworks.tuning import search
from trainworks.tuning.search import (
    ConvexStoppingRule,
    DecayCurveStoppingRule,
    MedianStoppingRule,
    Study,
    StudyConfig,
    StudyExhausted,
    Suggestion,
    optuna_storage_url,
)
from trainworks.tuning.space import SearchSpace, SpecError

MEMORY = "sqlite://"
_counter = iter(range(10**9))


def spec(
    *params: dict[str, Any], goal: str = "MAXIMIZE", algorithm: str | None = None, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"metrics": [{"metricId": "accuracy", "goal": goal}], "parameters": list(params)}
    if algorithm is not None:
        out["algorithm"] = algorithm
    out.update(extra)
    return out


def double(pid: str, lo: float, hi: float, scale: str | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"parameterId": pid, "doubleValueSpec": {"minValue": lo, "maxValue": hi}, **extra}
    if scale:
        out["scaleType"] = scale
    return out


def integer(pid: str, lo: int, hi: int, scale: str | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "parameterId": pid,
        "integerValueSpec": {"minValue": str(lo), "maxValue": str(hi)},  # int64: strings in proto JSON
        **extra,
    }
    if scale:
        out["scaleType"] = scale
    return out


def categorical(pid: str, values: list[str], **extra: Any) -> dict[str, Any]:
    return {"parameterId": pid, "categoricalValueSpec": {"values": values}, **extra}


def discrete(pid: str, values: list[float], **extra: Any) -> dict[str, Any]:
    return {"parameterId": pid, "discreteValueSpec": {"values": values}, **extra}


def when(kind: str, values: list[Any], child: dict[str, Any]) -> dict[str, Any]:
    key = {"cat": "parentCategoricalValues", "int": "parentIntValues", "disc": "parentDiscreteValues"}[kind]
    return {key: {"values": values}, "parameterSpec": child}


def new_study(study_spec: dict[str, Any], seed: int | None = 0, url: str = MEMORY, **kwargs: Any) -> Study:
    return Study.create_or_load(url, f"test-{next(_counter)}", study_spec, seed, **kwargs)


def draw(study_spec: dict[str, Any], n: int, seed: int = 0) -> list[dict[str, Any]]:
    """n suggestions (completed with 0) as {parameterId: value}."""
    study = new_study(study_spec, seed)
    out = []
    for _ in range(n):
        suggestion = study.suggest()
        out.append({p["parameterId"]: p["value"] for p in suggestion.parameters})
        study.complete(suggestion.number, 0.0)
    return out


RANDOM = "RANDOM_SEARCH"


def forget_storages() -> None:
    """What a new process would see: no cached engines (the databases stay)."""
    for storage in search._storages.values():
        storage.engine.dispose()
    search._storages.clear()


@pytest.fixture(autouse=True)
def _fresh_storages() -> Any:
    yield
    forget_storages()


# ====================================================================== space: kinds and scales
def test_double_linear_within_bounds_and_spread() -> None:
    values = [d["x"] for d in draw(spec(double("x", -2.0, 3.0), algorithm=RANDOM), 300)]
    assert all(isinstance(v, float) and -2.0 <= v <= 3.0 for v in values)
    assert 0.3 < sum(v < 0.5 for v in values) / len(values) < 0.7  # linear: half below the midpoint


def test_double_log_scale_is_log_uniform() -> None:
    values = [d["lr"] for d in draw(spec(double("lr", 1e-5, 1e-1, "UNIT_LOG_SCALE"), algorithm=RANDOM), 400)]
    assert all(1e-5 <= v <= 1e-1 for v in values)
    # log-uniform: each decade holds about a quarter of the samples; linear would put ~90% in the last one
    decades = [sum(10.0**k <= v < 10.0 ** (k + 1) for v in values) / len(values) for k in (-5, -4, -3, -2)]
    assert all(0.15 < share < 0.35 for share in decades), decades
    assert 1e-4 < statistics.median(values) < 1e-2


def test_double_reverse_log_is_dense_near_max() -> None:
    values = [
        d["g"] for d in draw(spec(double("g", 0.001, 1.0, "UNIT_REVERSE_LOG_SCALE"), algorithm=RANDOM), 400)
    ]
    assert all(0.001 <= v <= 1.0 for v in values)
    # y = min + max - x is log-uniform on [min, max]: P(x > 0.9) = log(0.101/0.001)/log(1000) = 0.67
    near_max = sum(v > 0.9 for v in values) / len(values)
    assert 0.55 < near_max < 0.8, near_max
    assert sum(v < 0.1 for v in values) / len(values) < 0.1  # linear would give 0.1, log 0.67
    assert statistics.median(values) > 0.95


def test_reverse_log_transform_matches_vizier() -> None:
    param = SearchSpace.from_study_spec(spec(double("x", 1e-4, 1e2, "UNIT_REVERSE_LOG_SCALE"))).params[0]
    assert param.to_external(1e-4) == 1e2 and param.to_external(1e2) == 1e-4  # endpoints swap
    # Vizier's scaled coordinate of x = 1 on [1e-4, 1e2] is 7.2739e-4 (its converter test)
    y = param.to_internal(1.0)
    scaled = 1 - math.log(y / 1e-4) / math.log(1e2 / 1e-4)
    assert scaled == pytest.approx(7.273945e-4, rel=1e-4)


def test_integer_scales() -> None:
    study_spec = spec(
        integer("n", 1, 1000),
        integer("m", 1, 1000, "UNIT_LOG_SCALE"),
        integer("r", 1, 1000, "UNIT_REVERSE_LOG_SCALE"),
        algorithm=RANDOM,
    )
    rows = draw(study_spec, 400)
    for key in "nmr":
        assert all(isinstance(d[key], int) and 1 <= d[key] <= 1000 for d in rows)
    share = {key: sum(d[key] <= 31 for d in rows) / len(rows) for key in "nmr"}
    assert share["n"] < 0.1  # linear: 3%
    assert 0.35 < share["m"] < 0.65  # log: half below the geometric mean 31.6
    assert sum(d["r"] >= 970 for d in rows) / len(rows) > 0.35  # reverse log: half above 1001 - 31.6
    assert {d["n"] for d in rows} != {d["m"] for d in rows}


def test_categorical_and_discrete_values_exact() -> None:
    values = [1e-4, 3e-3, 0.1, 256.0]
    rows = draw(
        spec(categorical("opt", ["adam", "sgd", "rms"]), discrete("d", values), algorithm=RANDOM), 120
    )
    assert {d["opt"] for d in rows} == {"adam", "sgd", "rms"}
    assert {d["d"] for d in rows} == set(values)  # exact floats, every one reached
    assert all(isinstance(d["d"], float) for d in rows)
    # the default algorithm uses the same encodings
    rows = draw(spec(categorical("opt", ["adam", "sgd"]), discrete("d", values)), 25)
    assert {d["d"] for d in rows} <= set(values) and {d["opt"] for d in rows} <= {"adam", "sgd"}


def test_discrete_is_an_ordered_index() -> None:
    space = SearchSpace.from_study_spec(spec(discrete("d", [16, 32, 64, 128], scaleType="UNIT_LOG_SCALE")))
    param = space.params[0]
    assert isinstance(param.distribution(), optuna.distributions.IntDistribution)
    assert (param.distribution().low, param.distribution().high) == (0, 3)
    assert [param.to_external(i) for i in range(4)] == [16.0, 32.0, 64.0, 128.0]
    assert param.to_internal(64.0) == 2


def test_conditional_parameters_only_under_their_parent_values() -> None:
    study_spec = spec(
        categorical(
            "opt",
            ["adam", "sgd", "rms"],
            conditionalParameterSpecs=[
                when("cat", ["sgd", "rms"], double("momentum", 0.0, 0.99)),
                when("cat", ["adam"], double("beta1", 0.8, 0.999)),
            ],
        ),
        integer(
            "layers",
            1,
            4,
            conditionalParameterSpecs=[
                when(
                    "int",
                    ["3", "4"],
                    discrete(
                        "width",
                        [64, 128],
                        conditionalParameterSpecs=[when("disc", [128], integer("heads", 1, 8))],
                    ),
                )
            ],
        ),
        double("lr", 1e-4, 1e-1, "UNIT_LOG_SCALE"),
    )
    for algorithm in (RANDOM, None):
        study_spec["algorithm"] = algorithm or "ALGORITHM_UNSPECIFIED"
        study = new_study(study_spec)
        seen = set()
        for i in range(40):
            s = study.suggest()
            names = [p["parameterId"] for p in s.parameters]
            got = {p["parameterId"]: p["value"] for p in s.parameters}
            assert ("momentum" in got) == (got["opt"] in ("sgd", "rms"))
            assert ("beta1" in got) == (got["opt"] == "adam")
            assert ("width" in got) == (got["layers"] in (3, 4))
            assert ("heads" in got) == (got.get("width") == 128.0)
            # depth-first parameter order: a parent, then its active children
            expected = ["opt", "beta1" if got["opt"] == "adam" else "momentum", "layers"]
            if "width" in got:
                expected += ["width"] + (["heads"] if "heads" in got else [])
            assert names == [*expected, "lr"]
            assert s.args == [a for a in s.args if a.startswith("--")] and len(s.args) == len(names)
            seen.add((got["opt"], got["layers"] in (3, 4), "heads" in got))
            study.complete(s.number, float(i % 7))
        assert len(seen) >= 5  # every branch gets explored


def test_same_child_name_under_disjoint_conditions() -> None:
    study_spec = spec(
        categorical(
            "opt",
            ["adam", "sgd"],
            conditionalParameterSpecs=[
                when("cat", ["adam"], double("lr", 1e-4, 1e-2, "UNIT_LOG_SCALE")),
                when("cat", ["sgd"], double("lr", 0.01, 1.0)),
            ],
        ),
        algorithm=RANDOM,
    )
    for row in draw(study_spec, 60):
        assert (row["lr"] <= 1e-2) if row["opt"] == "adam" else (row["lr"] >= 0.01)
    second = study_spec["parameters"][0]["conditionalParameterSpecs"][1]
    second["parentCategoricalValues"]["values"] = ["adam"]
    with pytest.raises(SpecError) as err:
        SearchSpace.from_study_spec(study_spec)
    assert err.value.field == "parameters[0].conditionalParameterSpecs[1].parameterSpec.parameterId"


@pytest.mark.parametrize(
    ("study_spec", "field"),
    [
        (spec(double("x", 0.0, 1.0, "UNIT_LOG_SCALE")), "parameters[0].doubleValueSpec.minValue"),
        (spec(double("x", 2.0, 1.0)), "parameters[0].doubleValueSpec.maxValue"),
        (spec(integer("n", 0, 9, "UNIT_REVERSE_LOG_SCALE")), "parameters[0].integerValueSpec.minValue"),
        (spec(discrete("d", [1.0, 1.0])), "parameters[0].discreteValueSpec.values"),
        (spec(categorical("c", [])), "parameters[0].categoricalValueSpec.values"),
        (spec(double("x", 0, 1), double("x", 0, 1)), "parameters[1].parameterId"),
        (spec({"parameterId": "x"}), "parameters[0]"),
        (spec(double("x", 0, 1), algorithm="GRID_SEARCH"), "parameters[0].doubleValueSpec"),
        (
            spec(categorical("c", ["a"], conditionalParameterSpecs=[when("int", ["1"], double("y", 0, 1))])),
            "parameters[0].conditionalParameterSpecs[0]",
        ),
        (
            spec(categorical("c", ["a"], conditionalParameterSpecs=[when("cat", ["b"], double("y", 0, 1))])),
            "parameters[0].conditionalParameterSpecs[0].parentCategoricalValues.values[0]",
        ),
        ({"metrics": [], "parameters": [double("x", 0, 1)]}, "metrics"),
        (
            {
                "metrics": [{"metricId": "a", "goal": "MAXIMIZE"}, {"metricId": "b", "goal": "MINIMIZE"}],
                "parameters": [double("x", 0, 1)],
            },
            "metrics",
        ),
        (spec(double("x", 0, 1), goal="GOAL_TYPE_UNSPECIFIED"), "metrics[0].goal"),
        (spec(double("x", 0, 1), algorithm="BAYES"), "algorithm"),
        (
            spec(double("x", 0, 1), medianAutomatedStoppingSpec={}, decayCurveStoppingSpec={}),
            "decayCurveStoppingSpec",
        ),
    ],
)
def test_spec_errors_carry_field_paths(study_spec: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as err:
        StudyConfig.from_study_spec(study_spec)
    assert err.value.field == field


# ====================================================================== output formatting
def test_parameters_and_args_formatting() -> None:
    study_spec = spec(
        integer("epochs", 3, 3),
        double("lr", 0.001, 0.001),
        discrete("batch", [256]),
        categorical("act", ["relu"]),
        double("wd", 1e-5, 1e-5),
        algorithm=RANDOM,
    )
    s = new_study(study_spec).suggest()
    assert s.parameters == [
        {"parameterId": "epochs", "value": 3},
        {"parameterId": "lr", "value": 0.001},
        {"parameterId": "batch", "value": 256.0},
        {"parameterId": "act", "value": "relu"},
        {"parameterId": "wd", "value": 1e-5},
    ]
    assert type(s.parameters[0]["value"]) is int and type(s.parameters[2]["value"]) is float
    assert s.args == ["--epochs=3", "--lr=0.001", "--batch=256.0", "--act=relu", "--wd=1e-05"]
    assert (s.number, s.trial_id) == (0, "1")


# ====================================================================== grid
GRID_SPEC = spec(
    categorical(
        "opt",
        ["adam", "sgd"],
        conditionalParameterSpecs=[when("cat", ["sgd"], discrete("momentum", [0.0, 0.9]))],
    ),
    integer("layers", 1, 2),
    algorithm="GRID_SEARCH",
)


def test_grid_enumerates_every_combination_in_order_then_exhausts() -> None:
    study = new_study(GRID_SPEC)
    got = []
    while not study.exhausted():
        s = study.suggest()
        got.append(s.args)
        study.complete(s.number, 1.0)
    assert got == [
        ["--opt=adam", "--layers=1"],
        ["--opt=adam", "--layers=2"],
        ["--opt=sgd", "--momentum=0.0", "--layers=1"],
        ["--opt=sgd", "--momentum=0.0", "--layers=2"],
        ["--opt=sgd", "--momentum=0.9", "--layers=1"],
        ["--opt=sgd", "--momentum=0.9", "--layers=2"],
    ]
    with pytest.raises(StudyExhausted):
        study.suggest()
    assert study.counts() == {"COMPLETE": 6}


def test_grid_order_is_deterministic_and_seed_free() -> None:
    a = [new_study(GRID_SPEC, seed=1).suggest().args for _ in range(1)]
    b = [new_study(GRID_SPEC, seed=2).suggest().args for _ in range(1)]
    assert a == b == [["--opt=adam", "--layers=1"]]


def test_grid_arithmetic_on_wide_integer_ranges() -> None:
    space = SearchSpace.from_study_spec(
        spec(
            integer(
                "n",
                0,
                10**9,
                conditionalParameterSpecs=[when("int", ["5"], categorical("c", ["a", "b", "c"]))],
            ),
            integer("r", 1, 3, "UNIT_REVERSE_LOG_SCALE"),
        ),
        grid=True,
    )
    assert space.grid_size() == (10**9 + 1 - 1 + 3) * 3
    n, r = space.params

    def external(point: dict[str, Any]) -> tuple[int, int, str | None]:
        c = point.get("n[0].c")
        return n.to_external(point["n"]), r.to_external(point["r"]), c

    assert external(space.grid_point(0)) == (0, 1, None)
    assert external(space.grid_point(5 * 3)) == (5, 1, "a")
    assert external(space.grid_point(5 * 3 + 4)) == (5, 2, "b")
    assert external(space.grid_point(8 * 3)) == (6, 1, None)
    assert external(space.grid_point(space.grid_size() - 1)) == (10**9, 3, None)
    with pytest.raises(IndexError):
        space.grid_point(space.grid_size())


# ====================================================================== durability
def test_reopened_study_sees_pending_trials_and_never_duplicates(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'trainworks.db'}"
    study_spec = spec(double("x", 0, 1), categorical("c", ["a", "b"]))
    first = Study.create_or_load(url, "job-1", study_spec, 7)
    a, b = first.suggest(), first.suggest()
    first.complete(a.number, 0.5)
    # the caller crashed after asking for b, before recording it: a new process opens the study
    forget_storages()
    second = Study.create_or_load(url, "job-1", study_spec, None)
    assert second.seed == 7  # the stored seed
    assert second.pending() == [b]
    c = second.suggest()
    assert c.number == 2 and c.number not in (a.number, b.number)
    assert second.suggestion(a.number) == a
    assert second.counts() == {"COMPLETE": 1, "RUNNING": 2}
    assert (tmp_path / "trainworks.optuna.db").exists()  # Optuna's own file, beside the server's


def test_half_suggested_trial_is_completed_by_pending(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'trainworks.db'}"
    study_spec = spec(double("x", 0, 1), integer("n", 1, 5), categorical("c", ["a", "b"]))
    study = Study.create_or_load(url, "job-2", study_spec, 3)
    trial = study._study.ask()  # a crash after the first suggest_* of a suggestion
    trial.suggest_float("x", 0, 1)
    x = trial.params["x"]
    reopened = Study.create_or_load(url, "job-2", study_spec)
    (pending,) = reopened.pending()
    assert pending.number == trial.number
    assert [p["parameterId"] for p in pending.parameters] == ["x", "n", "c"]
    assert pending.parameters[0]["value"] == x
    assert reopened.pending() == [pending]  # stable from then on


def test_seeded_study_continues_identically_after_a_restart(tmp_path: Path) -> None:
    study_spec = spec(double("x", -5, 10), double("y", 0, 15), goal="MINIMIZE")

    def objective(s: Suggestion) -> float:
        x, y = (p["value"] for p in s.parameters)
        return (x - 1) ** 2 + (y - 2) ** 2

    straight = Study.create_or_load(f"sqlite:///{tmp_path / 'a.db'}", "s", study_spec, 11)
    args_straight = []
    for _ in range(16):
        s = straight.suggest()
        args_straight.append(s.args)
        straight.complete(s.number, objective(s))
    url = f"sqlite:///{tmp_path / 'b.db'}"
    args_restarted = []
    for _ in range(2):  # a "restart" half-way: a new Study object on the same database
        forget_storages()
        study = Study.create_or_load(url, "s", study_spec, 11)
        for _ in range(8):
            s = study.suggest()
            args_restarted.append(s.args)
            study.complete(s.number, objective(s))
    assert args_restarted == args_straight
    assert len({tuple(a) for a in args_straight}) == 16


def test_reopening_with_another_spec_is_refused() -> None:
    name = f"test-{next(_counter)}"
    Study.create_or_load(MEMORY, name, spec(double("x", 0, 1)), 1)
    with pytest.raises(ValueError, match="different studySpec"):
        Study.create_or_load(MEMORY, name, spec(double("x", 0, 2)), 1)
    loaded = Study.create_or_load(MEMORY, name, None)
    assert loaded.config.space.params[0].high == 1.0
    with pytest.raises(KeyError):
        Study.create_or_load(MEMORY, "no-such-study", None)
    assert Study.delete(MEMORY, name) and not Study.delete(MEMORY, name)


def test_shares_the_server_database(tmp_path: Path) -> None:
    """Optuna and the server both keep an `alembic_version` table; each must keep its own."""
    url = f"sqlite:///{tmp_path / 'trainworks.db'}"
    db = Database(url)
    study = Study.create_or_load(url, "job-3", spec(double("x", 0, 1)), 1)
    study.complete(study.suggest().number, 0.5)
    db.dispose()
    Database(url).dispose()  # the server's migrations still find their own revision
    assert optuna_storage_url(url) == f"sqlite:///{tmp_path / 'trainworks.optuna.db'}"
    assert optuna_storage_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"


# ====================================================================== goals and best()
@pytest.mark.parametrize(("goal", "best"), [("MAXIMIZE", (1, 0.9)), ("MINIMIZE", (3, 0.1))])
def test_best_follows_the_goal(goal: str, best: tuple[int, float]) -> None:
    study = new_study(spec(double("x", 0, 1), goal=goal, algorithm=RANDOM))
    assert study.best() is None
    numbers = [study.suggest().number for _ in range(5)]
    for number, value in zip(numbers, [0.5, 0.9, 0.3, 0.1, 0.9], strict=True):
        study.complete(number, value)
    study.fail(numbers[-1])  # already complete: left as it is
    assert study.best() == best
    assert study._study.direction.name == goal


def test_fail_and_prune_are_not_candidates_for_best() -> None:
    study = new_study(spec(double("x", 0, 1), goal="MINIMIZE", algorithm=RANDOM))
    a, b, c = (study.suggest().number for _ in range(3))
    study.complete(a, 2.0)
    study.report(b, 1, 0.1)
    study.prune(b)
    study.fail(c)
    study.fail(c)  # idempotent
    study.complete(c, 0.0)  # a finished trial is not told again
    assert study.best() == (a, 2.0)
    assert study.counts() == {"COMPLETE": 1, "PRUNED": 1, "FAIL": 1}
    study.report(b, 2, 0.0)  # reports to a finished trial are ignored


def test_parallel_suggestions_are_diverse() -> None:
    study = new_study(spec(double("x", -5, 10), double("y", 0, 15), goal="MINIMIZE"))
    for _ in range(12):
        s = study.suggest()
        x, y = (p["value"] for p in s.parameters)
        study.complete(s.number, (x - 1) ** 2 + (y - 2) ** 2)
    running = [study.suggest() for _ in range(4)]  # four trials in flight at once
    points = [tuple(p["value"] for p in s.parameters) for s in running]
    assert len(set(points)) == 4
    assert min(math.dist(p, q) for i, p in enumerate(points) for q in points[i + 1 :]) > 1e-3
    sampler = study._study.sampler._inner
    assert isinstance(sampler, optuna.samplers.TPESampler) and sampler._constant_liar
    assert [s.number for s in study.pending()] == [s.number for s in running]


# ====================================================================== automated stopping
def _curve_study(rule: str, goal: str = "MAXIMIZE", **stopping: Any) -> Study:
    key = {
        "median": "medianAutomatedStoppingSpec",
        "decay": "decayCurveStoppingSpec",
        "convex": "convexAutomatedStoppingSpec",
    }[rule]
    return new_study(spec(double("x", 0, 1), goal=goal, algorithm=RANDOM, **{key: stopping}))


def _run_curve(study: Study, curve: list[tuple[int, float]], final: float | None = None) -> int:
    number = study.suggest().number
    for step, value in curve:
        study.report(number, step, value)
    if final is not None:
        study.complete(number, final)
    return number


def test_median_rule_on_synthetic_curves() -> None:
    study = _curve_study("median")
    assert isinstance(study.pruner, MedianStoppingRule)
    good = [(s, 0.5 + 0.04 * s) for s in range(1, 11)]
    bad = [(s, 0.1 + 0.01 * s) for s in range(1, 4)]
    early = _run_curve(study, bad)
    assert not study.should_stop(early)  # no completed trials yet
    for shift in (0.0, 0.02, -0.02):
        _run_curve(study, [(s, v + shift) for s, v in good], final=good[-1][1] + shift)
    assert study.should_stop(early)  # best 0.13 < median running average (~0.54) at step 3
    promising = _run_curve(study, [(s, v + 0.05) for s, v in good[:3]])
    assert not study.should_stop(promising)
    # unaligned steps (e.g. elapsed milliseconds) still compare: everything reported up to the step counts
    odd = _run_curve(study, [(1500, 0.2), (2500, 0.25)])
    assert study.should_stop(odd)
    study.complete(early, 0.2)
    assert not study.should_stop(early)  # finished trials are never stopped


def test_median_rule_minimize() -> None:
    study = _curve_study("median", goal="MINIMIZE", useElapsedDuration=True)
    assert study.uses_elapsed_duration
    for final in (1.0, 1.1, 0.9):
        _run_curve(study, [(100, 3.0), (200, 2.0), (300, final)], final=final)
    assert study.should_stop(_run_curve(study, [(100, 5.0), (200, 4.5)]))
    assert not study.should_stop(_run_curve(study, [(100, 2.0), (200, 1.5)]))


def test_decay_curve_rule() -> None:
    study = _curve_study("decay", goal="MINIMIZE")
    assert isinstance(study.pruner, DecayCurveStoppingRule)
    # completed loss curves: start ~2.0, decay to ~0.5; the largest gain after step 2 is ~1.1
    for scale in (1.0, 1.05, 0.95):
        curve = [(s, scale * (0.5 + 1.5 / s)) for s in range(1, 11)]
        _run_curve(study, curve, final=curve[-1][1])
    hopeless = _run_curve(study, [(1, 4.0), (2, 3.5)])  # 3.5 - 1.1 > 0.475 (the best final)
    assert study.should_stop(hopeless)
    hopeful = _run_curve(study, [(1, 2.0), (2, 1.2)])  # 1.2 - 1.1 < 0.475: it might still win
    assert not study.should_stop(hopeful)


def test_convex_rule() -> None:
    study = _curve_study("convex", minMeasurementCount="3", maxStepCount="100")
    assert isinstance(study.pruner, ConvexStoppingRule)
    for top in (0.90, 0.92, 0.88, 0.91):  # 4 = minMeasurementCount + 1 completed trials
        _run_curve(study, [(s, top * (1 - 1 / s)) for s in (10, 20, 50, 100)], final=top * 0.99)
    # slope of the last segment 0.002/step: 0.50 + 0.002 * 60 = 0.62 < 0.9108 -> stop
    assert study.should_stop(_run_curve(study, [(10, 0.40), (20, 0.46), (30, 0.48), (40, 0.50)]))
    # a steep curve can still get there: 0.60 + 0.01 * 60 > 0.91
    assert not study.should_stop(_run_curve(study, [(10, 0.3), (20, 0.4), (30, 0.5), (40, 0.60)]))
    # flat: no prediction; too few measurements: no decision
    assert not study.should_stop(_run_curve(study, [(10, 0.1), (20, 0.1), (30, 0.1)]))
    assert not study.should_stop(_run_curve(study, [(10, 0.1), (20, 0.1)]))


def test_no_stopping_spec_never_stops() -> None:
    study = new_study(spec(double("x", 0, 1), algorithm=RANDOM))
    for _ in range(4):
        _run_curve(study, [(1, 0.9), (2, 0.95)], final=0.95)
    assert not study.should_stop(_run_curve(study, [(1, 0.0), (2, 0.0)]))


# ====================================================================== PostgreSQL
@pytest.mark.postgres
def test_postgresql_storage(postgres_url: str) -> None:
    db = Database(postgres_url)  # the server's schema first, as in production
    study_spec = spec(double("x", 0, 1), integer("n", 1, 4), goal="MINIMIZE", medianAutomatedStoppingSpec={})
    study = Study.create_or_load(postgres_url, "job-pg", study_spec, 5)
    a, b = study.suggest(), study.suggest()
    study.report(a.number, 1, 0.3)
    study.complete(a.number, 0.25)
    forget_storages()
    reopened = Study.create_or_load(postgres_url, "job-pg", study_spec)
    assert reopened.pending() == [b]
    assert reopened.suggest().number == 2
    assert reopened.best() == (a.number, 0.25)
    db.dispose()
    Database(postgres_url).dispose()  # the server's migrations are untouched
    engine = create_engine(postgres_url)
    try:
        names = inspect(engine)
        assert "trials" in names.get_table_names(schema="optuna")
        assert "trials" not in names.get_table_names(schema="public")
        assert "tuning_jobs" in names.get_table_names(schema="public")
        with engine.connect() as conn:
            public = conn.execute(text("SELECT version_num FROM public.alembic_version")).scalar()
            ours = conn.execute(text("SELECT version_num FROM optuna.alembic_version")).scalar()
        assert public != ours
    finally:
        engine.dispose()
