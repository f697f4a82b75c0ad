"""Tuning regret: the default algorithm (ALGORITHM_UNSPECIFIED) against RANDOM_SEARCH, and suggestion latency.

Two test functions with known optima, both minimised over a box, given to the search core as a StudySpec
(DOUBLE parameters, UNIT_LINEAR_SCALE):

* Branin, 2-D, x1 in [-5, 10], x2 in [0, 15]; global minimum 0.397887 (three minimisers).
* Hartmann6, 6-D, [0, 1]^6; global minimum -3.32237.

Each algorithm runs `--seeds` independent studies (seed 0..n-1) of `--trials` sequential trials through
`trainworks.tuning.search.Study` (suggest, evaluate, complete) on in-memory SQLite. Simple regret = the best
value found minus the optimum; the table gives the median over seeds, the interquartile range, and the ratio
random / default of the medians (above 1: the default is better).

Latency: on a study (temporary SQLite file, as the server stores it) that already has `--latency-trials`
completed trials, each grown by the algorithm itself on Hartmann6, the time of the next `suggest()`
(trial 201 by default), median over `--latency-reps` studies.

`--discrete` adds the measurement behind the DISCRETE encoding: TPE on Branin and Hartmann6 with every
parameter DISCRETE (`--levels` evenly spaced values), once as the search core encodes it (the ordered index
of the value, an IntDistribution) and once as an unordered CategoricalDistribution (the same values as
CATEGORICAL strings). `--variants` adds TPE settings considered for the default (univariate TPE, fewer
start-up trials). Optuna's GPSampler was the other candidate for the default; the run reports whether it
can run here (it needs SciPy).

    python benchmarks/tuning_regret.py [--seeds 10] [--trials 30] [--latency-trials 200] [--latency-reps 3]
                                       [--discrete] [--variants] [--levels 11] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

try:
    from benchmarks import common
except ImportError:  # run as a script: python benchmarks/tuning_regret.py
    import common  # type: ignore[no-redef]

import numpy as np
import optuna

from trainworks.tuning import search
from trainworks.tuning.search import Study

MEMORY = "sqlite://"
_names = itertools.count()

# ---------------------------------------------------------------------- test functions
HARTMANN_A = np.array(
    [
        [10, 3, 17, 3.5, 1.7, 8],
        [0.05, 10, 17, 0.1, 8, 14],
        [3, 3.5, 1.7, 10, 17, 8],
        [17, 8, 0.05, 10, 0.1, 14],
    ]
)
HARTMANN_P = 1e-4 * np.array(
    [
        [1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381],
    ]
)
HARTMANN_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


def branin(x: Sequence[float]) -> float:
    x1, x2 = x
    b, c, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


def hartmann6(x: Sequence[float]) -> float:
    z = np.asarray(x, dtype=float)
    inner = np.sum(HARTMANN_A * (z - HARTMANN_P) ** 2, axis=1)
    return float(-np.sum(HARTMANN_ALPHA * np.exp(-inner)))


PROBLEMS: dict[str, dict[str, Any]] = {
    "branin": {"f": branin, "bounds": [(-5.0, 10.0), (0.0, 15.0)], "optimum": 0.397887},
    "hartmann6": {"f": hartmann6, "bounds": [(0.0, 1.0)] * 6, "optimum": -3.32237},
}


def study_spec(problem: str, algorithm: str, kind: str = "DOUBLE", levels: int = 11) -> dict[str, Any]:
    params = []
    for i, (lo, hi) in enumerate(PROBLEMS[problem]["bounds"]):
        pid = f"x{i + 1}"
        if kind == "DOUBLE":
            params.append(
                {
                    "parameterId": pid,
                    "doubleValueSpec": {"minValue": lo, "maxValue": hi},
                    "scaleType": "UNIT_LINEAR_SCALE",
                }
            )
        elif kind == "DISCRETE":
            params.append({"parameterId": pid, "discreteValueSpec": {"values": _levels(lo, hi, levels)}})
        else:  # the same values, unordered
            values = [repr(v) for v in _levels(lo, hi, levels)]
            params.append({"parameterId": pid, "categoricalValueSpec": {"values": values}})
    return {
        "metrics": [{"metricId": "y", "goal": "MINIMIZE"}],
        "parameters": params,
        "algorithm": algorithm,
    }


def _levels(lo: float, hi: float, n: int) -> list[float]:
    return [float(v) for v in np.linspace(lo, hi, n)]


def _point(parameters: list[dict[str, Any]]) -> list[float]:
    return [float(p["value"]) for p in parameters]


# ---------------------------------------------------------------------- runs
SamplerFactory = Callable[[int | None], optuna.samplers.BaseSampler]


def run_study(
    problem: str,
    spec: dict[str, Any],
    seed: int,
    trials: int,
    storage: str = MEMORY,
    sampler: SamplerFactory | None = None,
    name: str = "bench",
) -> tuple[Study, list[float]]:
    """`trials` sequential trials; returns the study and the values, in order."""
    study = Study.create_or_load(storage, f"{name}-{next(_names)}", spec, seed)
    if sampler is not None:  # a variant: the same per-trial seeding around another sampler
        study._study.sampler = search.TrialSeededSampler(sampler, study.seed)
    f = PROBLEMS[problem]["f"]
    values = []
    for _ in range(trials):
        suggestion = study.suggest()
        value = f(_point(suggestion.parameters))
        study.complete(suggestion.number, value)
        values.append(value)
    return study, values


def grid_optimum(problem: str, levels: int) -> float:
    """The minimum over the discretised box (the best a DISCRETE search can reach)."""
    axes = [np.linspace(lo, hi, levels) for lo, hi in PROBLEMS[problem]["bounds"]]
    points = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(axes))
    if problem == "hartmann6":
        inner = np.einsum("ij,nij->ni", HARTMANN_A, (points[:, None, :] - HARTMANN_P[None]) ** 2)
        return float(np.min(-np.exp(-inner) @ HARTMANN_ALPHA))
    return min(branin(p) for p in points)


def regrets(
    problem: str,
    spec: dict[str, Any],
    seeds: int,
    trials: int,
    sampler: SamplerFactory | None = None,
    optimum: float | None = None,
) -> list[float]:
    optimum = PROBLEMS[problem]["optimum"] if optimum is None else optimum
    out = []
    for seed in range(seeds):
        _, values = run_study(problem, spec, seed, trials, sampler=sampler)
        out.append(max(min(values) - optimum, 0.0))
    return out


def _stats(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return {
        "median": statistics.median(values),
        "q1": q[0],
        "q3": q[2],
        "mean": statistics.fmean(values),
        "min": min(values),
        "max": max(values),
    }


def regret_table(seeds: int, trials: int) -> list[dict[str, Any]]:
    rows = []
    for problem in PROBLEMS:
        default = regrets(problem, study_spec(problem, "ALGORITHM_UNSPECIFIED"), seeds, trials)
        random = regrets(problem, study_spec(problem, "RANDOM_SEARCH"), seeds, trials)
        d, r = _stats(default), _stats(random)
        rows.append(
            {
                "problem": problem,
                "default": d,
                "random": r,
                "ratio_random_over_default": r["median"] / d["median"] if d["median"] > 0 else math.inf,
                "default_wins": sum(a < b for a, b in zip(default, random, strict=True)),
                "seeds": seeds,
                "trials": trials,
            }
        )
    return rows


def latency(algorithm: str, history: int, reps: int) -> dict[str, Any]:
    """Time of suggest() number history+1 on a temp SQLite study with `history` completed trials."""
    times = []
    grow = []
    for rep in range(reps):
        with tempfile.TemporaryDirectory(prefix="tuning-bench-") as tmp:
            url = f"sqlite:///{Path(tmp) / 'trainworks.db'}"
            spec = study_spec("hartmann6", algorithm)
            started = time.perf_counter()
            study, _ = run_study("hartmann6", spec, rep, history, storage=url, name=f"lat-{algorithm}")
            grow.append(time.perf_counter() - started)
            started = time.perf_counter()
            suggestion = study.suggest()
            times.append(time.perf_counter() - started)
            assert suggestion.number == history
            search._storages.pop(url).engine.dispose()  # close the engine before the folder goes
    return {"suggest_s": _stats(times), "grow_s_per_trial": statistics.median(grow) / history, "reps": reps}


def discrete_table(seeds: int, trials: int, levels: int) -> list[dict[str, Any]]:
    rows = []
    for problem in PROBLEMS:
        best = grid_optimum(problem, levels)
        specs = {
            kind: study_spec(problem, "ALGORITHM_UNSPECIFIED", kind, levels)
            for kind in ("DISCRETE", "CATEGORICAL")
        }
        index = regrets(problem, specs["DISCRETE"], seeds, trials, optimum=best)
        cat = regrets(problem, specs["CATEGORICAL"], seeds, trials, optimum=best)
        rows.append(
            {
                "problem": problem,
                "index": _stats(index),
                "categorical": _stats(cat),
                "levels": levels,
                "grid_optimum": best,
                "index_better_in": sum(a < b for a, b in zip(index, cat, strict=True)),
                "seeds": seeds,
            }
        )
    return rows


def variants_table(seeds: int, trials: int) -> list[dict[str, Any]]:
    def tpe(**kwargs: Any) -> SamplerFactory:
        def make(seed: int | None) -> optuna.samplers.BaseSampler:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.samplers.TPESampler(seed=seed, constant_liar=True, **kwargs)

        return make

    variants: dict[str, SamplerFactory | None] = {
        "default (multivariate, group, 10 start-up)": None,
        "univariate TPE, 10 start-up": tpe(multivariate=False),
        "multivariate, group, 5 start-up": tpe(multivariate=True, group=True, n_startup_trials=5),
    }
    rows = []
    for problem in PROBLEMS:
        spec = study_spec(problem, "ALGORITHM_UNSPECIFIED")
        for label, factory in variants.items():
            rows.append(
                {
                    "problem": problem,
                    "variant": label,
                    **_stats(regrets(problem, spec, seeds, trials, factory)),
                }
            )
    return rows


def gp_available() -> str:
    try:
        sampler = optuna.samplers.GPSampler(seed=0)
        study = optuna.create_study(sampler=sampler)
        for _ in range(12):
            trial = study.ask()
            study.tell(trial, trial.suggest_float("x", 0, 1) ** 2)
        return "runs"
    except ImportError as exc:
        return f"unavailable: {exc}"


# ---------------------------------------------------------------------- report
def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _cell(stats: dict[str, float]) -> str:
    """median [first quartile, third quartile]"""
    return f"{_fmt(stats['median'])} [{_fmt(stats['q1'])}, {_fmt(stats['q3'])}]"


def report(result: dict[str, Any]) -> str:
    lines = [
        f"## Simple regret after {result['trials']} sequential trials, median over {result['seeds']} seeds "
        "(IQR in brackets)",
        "",
        common.markdown_table(
            ["problem", "default (TPE)", "RANDOM_SEARCH", "random / default", "default better in"],
            [
                [
                    r["problem"],
                    _cell(r["default"]),
                    _cell(r["random"]),
                    f"{r['ratio_random_over_default']:.2f}x",
                    f"{r['default_wins']}/{r['seeds']} seeds",
                ]
                for r in result["regret"]
            ],
        ),
        "",
        f"## Suggestion latency at trial {result['latency_trials'] + 1} (Hartmann6, temp SQLite file)",
        "",
        common.markdown_table(
            ["algorithm", "suggest() median", "min", "max", "mean suggest+complete while growing"],
            [
                [
                    name,
                    f"{lat['suggest_s']['median'] * 1000:.1f} ms",
                    f"{lat['suggest_s']['min'] * 1000:.1f} ms",
                    f"{lat['suggest_s']['max'] * 1000:.1f} ms",
                    f"{lat['grow_s_per_trial'] * 1000:.1f} ms",
                ]
                for name, lat in result["latency"].items()
            ],
        ),
        f"(over {next(iter(result['latency'].values()))['reps']} studies per algorithm)",
    ]
    if result.get("discrete"):
        lines += [
            "",
            f"## DISCRETE encoding: TPE, every parameter DISCRETE ({result['discrete'][0]['levels']} "
            "levels), median regret to the grid's optimum [IQR]",
            "",
            common.markdown_table(
                [
                    "problem",
                    "grid optimum",
                    "ordered index (used)",
                    "unordered categorical",
                    "index better in",
                ],
                [
                    [
                        r["problem"],
                        _fmt(r["grid_optimum"]),
                        _cell(r["index"]),
                        _cell(r["categorical"]),
                        f"{r['index_better_in']}/{r['seeds']} seeds",
                    ]
                    for r in result["discrete"]
                ],
            ),
        ]
    if result.get("variants"):
        lines += [
            "",
            "## TPE variants considered for the default, median regret [IQR]",
            "",
            common.markdown_table(
                ["problem", "variant", "median regret"],
                [[r["problem"], r["variant"], _cell(r)] for r in result["variants"]],
            ),
        ]
    lines += [
        "",
        f"GPSampler: {result['gp']}",
        f"{result['seconds']:.1f}s in all; machine: {common.machine()}",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--seeds", type=int, default=10, help="studies per algorithm and problem (default 10)"
    )
    parser.add_argument("--trials", type=int, default=30, help="sequential trials per study (default 30)")
    parser.add_argument(
        "--latency-trials", type=int, default=200, help="completed trials before the timed one"
    )
    parser.add_argument("--latency-reps", type=int, default=3, help="studies grown for the latency figure")
    parser.add_argument("--discrete", action="store_true", help="also compare DISCRETE encodings")
    parser.add_argument("--variants", action="store_true", help="also compare TPE settings")
    parser.add_argument("--levels", type=int, default=11, help="values per DISCRETE parameter (--discrete)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args()
    if min(args.seeds, args.trials, args.latency_trials, args.latency_reps, args.levels) < 1:
        parser.error("counts must be positive")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    started = time.perf_counter()
    result: dict[str, Any] = {
        "seeds": args.seeds,
        "trials": args.trials,
        "regret": regret_table(args.seeds, args.trials),
        "latency_trials": args.latency_trials,
        "latency": {
            "default (TPE)": latency("ALGORITHM_UNSPECIFIED", args.latency_trials, args.latency_reps),
            "RANDOM_SEARCH": latency("RANDOM_SEARCH", args.latency_trials, args.latency_reps),
        },
        "gp": gp_available(),
    }
    if args.discrete:
        result["discrete"] = discrete_table(args.seeds, args.trials, args.levels)
    if args.variants:
        result["variants"] = variants_table(args.seeds, args.trials)
    result["seconds"] = time.perf_counter() - started
    if args.json:
        print(common.dump_json({"tuning_regret": result, "machine": common.machine()}))
    else:
        print(report(result))


if __name__ == "__main__":
    main()
