"""The search core of a hyperparameter tuning job: an Optuna study, persisted in Optuna's RDB storage.

Pure of HTTP and of Trainworks' own tables; the StudySpec is a plain dict of canonical proto JSON.

Storage
    `Study.create_or_load(storage_url, ...)` takes the server's own SQLAlchemy URL. Optuna's tables cannot
    share a schema with the server's: both keep their Alembic revision in a table named
    ``alembic_version``, and each refuses the other's revision (Optuna: "no longer compatible with the
    table schema"; Alembic: "Can't locate revision"). So Optuna gets a namespace of its own:

    * PostgreSQL: the schema ``optuna`` of the same database (created on first use; the connections of
      the storage put it alone on their ``search_path``);
    * SQLite file ``/x/name.db``: the sibling file ``/x/name.optuna.db`` (SQLite has no schemas that
      outlive a connection); in-memory SQLite stays in memory (tests, benchmarks);
    * any other URL is used as is.

    `optuna_storage_url(url)` tells where a URL's studies live. Engines are created once per URL per
    process and shared by every `Study` on it.

Trial numbers
    `Suggestion.number` is Optuna's trial number: 0, 1, 2, ... in creation order, unique per study even
    with several writers. Vertex numbers trials "1", "2", ...: `Suggestion.trial_id` is ``str(number + 1)``.

Crash between ask and record
    `suggest()` commits the trial (state RUNNING, parameters stored) before it returns; the caller then
    records the number in its own row (unique per study number). A crash in between leaves a RUNNING trial
    without a row: on restart, before suggesting anything, the caller calls `pending()`, which lists every
    asked-but-not-told trial with its parameters (finishing any that a crash interrupted half-way through
    suggesting, with the same per-trial seed), and adopts the numbers it has no row for. Nothing is lost
    and nothing is asked twice. `pending()` and `suggest()` are meant for the one controller that owns the
    study; they serialise on a lock within a process. `complete`, `fail` and `prune` are idempotent
    (a trial already finished is left as it is), so a crash after telling Optuna but before updating the
    caller's row is repaired by telling again.

Samplers (StudySpec.algorithm)
    * ALGORITHM_UNSPECIFIED (Vertex: Bayesian optimisation) -> TPE, multivariate (one joint density over
      the parameters that occur together), ``group=True`` (conditional parameters decomposed into the
      groups that co-occur), ``constant_liar=True`` (running trials count as bad results, so parallel
      suggestions spread out instead of piling on the current optimum), 10 random start-up trials.
      Optuna's GPSampler was the other candidate; it needs SciPy (L-BFGS-B, QMC), which this
      environment lacks, so it cannot run here. See ``benchmarks/tuning_regret.py`` for the figures.
    * RANDOM_SEARCH -> RandomSampler.
    * GRID_SEARCH -> a grid over every combination (INTEGER ranges expanded, DISCRETE and CATEGORICAL
      values), in the deterministic order of `SearchSpace.grid_point`: trial number n gets combination n.
      `exhausted()` is true once every combination has been asked; `suggest()` then raises
      `StudyExhausted`. Optuna's own GridSampler was not used: it draws grid points at random (ordered only
      with a seed), and it would treat an inactive conditional parameter as a grid axis (duplicate trials).
    With a seed, each trial's sampler is seeded from (seed, trial number), so a study reopened after a
    restart continues exactly as it would have, instead of replaying the seed's first draws. A study
    created without a seed draws one and stores it.

Automated stopping (`report`, `should_stop`)
    Each rule is an Optuna pruner over the trial's intermediate values (`report(number, step, value)`).
    The step axis is the caller's: the measurement's stepCount, or, when the spec's
    ``useElapsedDuration`` is true (`Study.uses_elapsed_duration`), its elapsed duration in whole
    milliseconds. "Completed trials" are those told with `complete()`.

    * medianAutomatedStoppingSpec -> `MedianStoppingRule`, Vertex's documented rule: stop a trial if its
      best value so far is strictly worse than the median, over completed trials, of each one's running
      average of the values it reported up to this trial's latest step. Optuna's MedianPruner differs
      (it compares the value at the current step with the completed trials' values at exactly that
      step, so unaligned steps or elapsed durations never compare).
    * decayCurveStoppingSpec -> `DecayCurveStoppingRule`, an approximation of Vertex's Gaussian-process
      learning-curve model: *optimistic tail-gain extrapolation*. For each completed trial the gain from
      its best value up to step s to its final value is measured; the trial is stopped if its best value
      so far plus the largest such gain is still strictly worse than the best final value, i.e. not even
      the most favourable learning curve seen so far would make it the best trial.
    * convexAutomatedStoppingSpec (and v1beta1's convexStopConfig) -> `ConvexStoppingRule`, Vertex's
      documented convex rule without the autoregressive model: with at least minMeasurementCount + 1
      completed trials and a trial with at least minMeasurementCount measurements, the last step above
      minStepCount, the trial's curve is extrapolated linearly with the slope of its last segment to
      maxStepCount (learnt from the completed trials when 0). For a concave (maximising) or convex
      (minimising) learning curve that line overestimates the final value; if even it is worse than the
      best completed value the trial stops. A completely flat curve gives no prediction.
      learningRateParameterName and updateAllStoppedTrials are accepted and ignored (no predicted final
      measurement is added to a stopped trial; its final measurement follows measurementSelectionType).
    Each rule waits for `min_completed_trials` (default 3) completed trials; the convex rule for its
    own minMeasurementCount + 1.

Ignored here (the service validates them): observationNoise, studyStoppingConfig,
transferLearningConfig, MetricSpec.safetyConfig, ParameterSpec defaultValue.
"""

from __future__ import annotations

import contextlib
import json
import math
import secrets
import statistics
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast, overload

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.exceptions import ExperimentalWarning, UpdateFinishedTrialError
from optuna.pruners import BasePruner, NopPruner
from optuna.samplers import BaseSampler, RandomSampler, TPESampler
from optuna.storages import RDBStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import StaticPool

from trainworks.tuning.space import (
    Assignment,
    SearchSpace,
    SpecError,
    command_line_args,
    parameters_json,
)

ALGORITHM_UNSPECIFIED = "ALGORITHM_UNSPECIFIED"
GRID_SEARCH = "GRID_SEARCH"
RANDOM_SEARCH = "RANDOM_SEARCH"
_ALGORITHMS = {0: ALGORITHM_UNSPECIFIED, 2: GRID_SEARCH, 3: RANDOM_SEARCH}
_GOALS = {1: "MAXIMIZE", 2: "MINIMIZE"}
_SELECTIONS = {
    0: "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED",
    1: "LAST_MEASUREMENT",
    2: "BEST_MEASUREMENT",
}
_STOPPING_KEYS = (
    "medianAutomatedStoppingSpec",
    "decayCurveStoppingSpec",
    "convexAutomatedStoppingSpec",
    "convexStopConfig",
)
TPE_STARTUP_TRIALS = 10
DEFAULT_MIN_COMPLETED_TRIALS = 3
CONVEX_DEFAULT_MIN_MEASUREMENTS = 5
POSTGRES_SCHEMA = "optuna"
_SPEC_ATTR = "trainworks:config"
_SEED_ATTR = "trainworks:seed"


class StudyExhausted(RuntimeError):
    """GRID_SEARCH: every grid combination has been suggested."""


# ====================================================================== the spec
@dataclass(frozen=True)
class StoppingSpec:
    """The automated stopping rule: kind is "median", "decay_curve", "convex" or "none"."""

    kind: str = "none"
    use_elapsed_duration: bool = False
    max_step_count: int = 0
    min_step_count: int = 0
    min_measurement_count: int = CONVEX_DEFAULT_MIN_MEASUREMENTS


@dataclass(frozen=True)
class StudyConfig:
    """The parts of a StudySpec the search needs, validated (errors are `SpecError` with field paths)."""

    metric_id: str
    goal: str  # MAXIMIZE | MINIMIZE
    algorithm: str  # ALGORITHM_UNSPECIFIED | GRID_SEARCH | RANDOM_SEARCH
    measurement_selection: str  # LAST_MEASUREMENT | BEST_MEASUREMENT
    stopping: StoppingSpec
    space: SearchSpace

    @property
    def direction(self) -> StudyDirection:
        return StudyDirection.MAXIMIZE if self.goal == "MAXIMIZE" else StudyDirection.MINIMIZE

    @classmethod
    def from_study_spec(cls, spec: Mapping[str, Any]) -> StudyConfig:
        if not isinstance(spec, Mapping):
            raise SpecError("", "studySpec must be an object")
        metrics = spec.get("metrics")
        if not isinstance(metrics, list) or not metrics:
            raise SpecError("metrics", "exactly one metric is required")
        if len(metrics) > 1:
            raise SpecError("metrics", "hyperparameter tuning jobs support a single metric")
        metric = metrics[0]
        if not isinstance(metric, Mapping):
            raise SpecError("metrics[0]", "must be an object")
        metric_id = metric.get("metricId")
        if not isinstance(metric_id, str) or not metric_id:
            raise SpecError("metrics[0].metricId", "is required")
        if any(c.isspace() for c in metric_id):
            raise SpecError("metrics[0].metricId", "must not contain whitespace")
        goal = _enum(metric.get("goal"), _GOALS, "metrics[0].goal", None)
        if goal is None:
            raise SpecError("metrics[0].goal", "must be MAXIMIZE or MINIMIZE")

        algorithm = _enum(spec.get("algorithm"), _ALGORITHMS, "algorithm", ALGORITHM_UNSPECIFIED)
        selection = _enum(
            spec.get("measurementSelectionType"),
            _SELECTIONS,
            "measurementSelectionType",
            "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED",
        )
        if selection == "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED":
            selection = "LAST_MEASUREMENT"
        space = SearchSpace.from_study_spec(spec, grid=algorithm == GRID_SEARCH)
        return cls(metric_id, goal, algorithm, selection, _stopping(spec), space)


def _stopping(spec: Mapping[str, Any]) -> StoppingSpec:
    given = [key for key in _STOPPING_KEYS if spec.get(key) is not None]
    if not given:
        return StoppingSpec()
    if len(given) > 1:
        raise SpecError(given[1], f"only one automated stopping spec may be set (also {given[0]})")
    key = given[0]
    body = spec[key]
    if not isinstance(body, Mapping):
        raise SpecError(key, "must be an object")
    if key == "medianAutomatedStoppingSpec":
        return StoppingSpec("median", bool(body.get("useElapsedDuration", False)))
    if key == "decayCurveStoppingSpec":
        return StoppingSpec("decay_curve", bool(body.get("useElapsedDuration", False)))
    if key == "convexStopConfig":  # v1beta1, deprecated: the same rule with older names
        names = {
            "max": "maxNumSteps",
            "min": "minNumSteps",
            "count": "minMeasurementCount",
            "el": "useSeconds",
        }
    else:
        names = {"max": "maxStepCount", "min": "minStepCount", "count": "minMeasurementCount"}
        names["el"] = "useElapsedDuration"
    values = {}
    for short, name in (("max", names["max"]), ("min", names["min"]), ("count", names["count"])):
        raw = body.get(name)
        try:
            values[short] = int(raw) if raw is not None else 0
        except (TypeError, ValueError):
            raise SpecError(f"{key}.{name}", f"{raw!r} is not a valid integer") from None
        if values[short] < 0:
            raise SpecError(f"{key}.{name}", "must not be negative")
    if values["max"] and values["min"] > values["max"]:
        raise SpecError(f"{key}.{names['min']}", "must not exceed the maximum step count")
    return StoppingSpec(
        "convex",
        bool(body.get(names["el"], False)),
        max_step_count=values["max"],
        min_step_count=values["min"],
        min_measurement_count=values["count"] or CONVEX_DEFAULT_MIN_MEASUREMENTS,
    )


@overload
def _enum(raw: Any, names: dict[int, str], path: str, default: str) -> str: ...
@overload
def _enum(raw: Any, names: dict[int, str], path: str, default: None) -> str | None: ...
def _enum(raw: Any, names: dict[int, str], path: str, default: str | None) -> str | None:
    if raw is None:
        return default
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw in names:
            return names[raw]
    elif raw in names.values():
        return str(raw)
    elif raw == "GOAL_TYPE_UNSPECIFIED" or raw == "ALGORITHM_UNSPECIFIED":
        return default
    raise SpecError(path, f"unsupported value {raw!r} (one of {', '.join(names.values())})")


# ====================================================================== stopping rules
def _finite_values(trial: FrozenTrial) -> list[tuple[int, float]]:
    return sorted((s, v) for s, v in trial.intermediate_values.items() if math.isfinite(v))


def _better(a: float, b: float, maximize: bool) -> bool:
    return a > b if maximize else a < b


class _ComparingRule(BasePruner):
    """A stopping rule that compares a trial with the completed ones, once there are enough of them."""

    def __init__(self, min_completed_trials: int = DEFAULT_MIN_COMPLETED_TRIALS) -> None:
        self.min_completed_trials = min_completed_trials

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        own = _finite_values(trial)
        if not own:
            return False
        step = own[-1][0]
        maximize = study.direction == StudyDirection.MAXIMIZE
        pick = max if maximize else min
        completed = [
            (other, [v for s, v in _finite_values(other) if s <= step])
            for other in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        ]
        return self._stops(pick(v for _, v in own), maximize, completed)

    def _stops(
        self, best_own: float, maximize: bool, completed: list[tuple[FrozenTrial, list[float]]]
    ) -> bool:
        """Whether a trial whose best finite value so far is `best_own` stops, given each completed trial
        with its finite intermediate values up to the trial's last step."""
        raise NotImplementedError


class MedianStoppingRule(_ComparingRule):
    """Vertex's median automated stopping rule (see the module docstring)."""

    def _stops(
        self, best_own: float, maximize: bool, completed: list[tuple[FrozenTrial, list[float]]]
    ) -> bool:
        performances = [sum(upto) / len(upto) for _, upto in completed if upto]
        if len(performances) < self.min_completed_trials:
            return False
        return _better(statistics.median(performances), best_own, maximize)


class DecayCurveStoppingRule(_ComparingRule):
    """Optimistic tail-gain extrapolation, standing in for Vertex's decay-curve rule (module docstring)."""

    def _stops(
        self, best_own: float, maximize: bool, completed: list[tuple[FrozenTrial, list[float]]]
    ) -> bool:
        pick = max if maximize else min
        gains = []
        finals = []
        for other, upto in completed:
            if other.value is None or not math.isfinite(other.value):
                continue
            finals.append(other.value)
            if upto:
                gain = other.value - pick(upto)
                gains.append(gain if maximize else -gain)
        if len(gains) < self.min_completed_trials:
            return False
        best_final = pick(finals)
        reach = best_own + max(gains) if maximize else best_own - max(gains)
        return _better(best_final, reach, maximize)


class ConvexStoppingRule(BasePruner):
    """Vertex's convex automated stopping rule, extrapolating linearly (module docstring)."""

    def __init__(
        self,
        max_step_count: int = 0,
        min_step_count: int = 0,
        min_measurement_count: int = CONVEX_DEFAULT_MIN_MEASUREMENTS,
    ) -> None:
        self.max_step_count = max_step_count
        self.min_step_count = min_step_count
        self.min_measurement_count = min_measurement_count

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        own = _finite_values(trial)
        if len(own) < max(self.min_measurement_count, 2):
            return False
        completed = [
            t
            for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.value is not None and math.isfinite(t.value)
        ]
        if len(completed) < self.min_measurement_count + 1:
            return False
        max_step = self.max_step_count or max(
            (s for t in completed for s in t.intermediate_values), default=0
        )
        min_step = self.min_step_count or max_step // 10
        (s0, y0), (s1, y1) = own[-2], own[-1]
        if s1 <= min_step or all(v == y1 for _, v in own):
            return False  # too early, or a flat curve (no prediction)
        slope = (y1 - y0) / (s1 - s0)
        remaining = max(max_step - s1, 0)
        maximize = study.direction == StudyDirection.MAXIMIZE
        if maximize:
            bound = y1 + max(slope, 0.0) * remaining
            return bound < max(cast(float, t.value) for t in completed)  # completed trials have a value
        bound = y1 + min(slope, 0.0) * remaining
        return bound > min(cast(float, t.value) for t in completed)


def make_pruner(
    stopping: StoppingSpec, min_completed_trials: int = DEFAULT_MIN_COMPLETED_TRIALS
) -> BasePruner:
    if stopping.kind == "median":
        return MedianStoppingRule(min_completed_trials)
    if stopping.kind == "decay_curve":
        return DecayCurveStoppingRule(min_completed_trials)
    if stopping.kind == "convex":
        return ConvexStoppingRule(
            stopping.max_step_count, stopping.min_step_count, stopping.min_measurement_count
        )
    return NopPruner()


# ====================================================================== samplers
def _derive_seed(seed: int, number: int) -> int:
    return int(np.random.SeedSequence([seed, number]).generate_state(1)[0])


def tpe_sampler(seed: int | None = None, n_startup_trials: int = TPE_STARTUP_TRIALS) -> TPESampler:
    """The sampler behind ALGORITHM_UNSPECIFIED."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        return TPESampler(
            seed=seed,
            multivariate=True,
            group=True,
            constant_liar=True,
            n_startup_trials=n_startup_trials,
        )


class TrialSeededSampler(BaseSampler):
    """Delegates to a sampler built afresh for each trial, seeded from (seed, trial number): a reopened
    study neither replays its seed's first draws nor depends on how long the process has run."""

    def __init__(self, factory: Callable[[int | None], BaseSampler], seed: int | None) -> None:
        self._factory = factory
        self._seed = seed
        self._inner = factory(seed)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if self._seed is not None:
            self._inner = self._factory(_derive_seed(self._seed, trial.number))
        self._inner.before_trial(study, trial)

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self._inner.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self._inner.sample_relative(study, trial, search_space)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self._inner.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(
        self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> None:
        self._inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self._inner.reseed_rng()


class GridIndexSampler(BaseSampler):
    """Trial number n gets the n-th combination of `SearchSpace.grid_point`."""

    def __init__(self, space: SearchSpace) -> None:
        self._space = space
        self._points: dict[int, dict[str, Any]] = {}

    def _point(self, number: int) -> dict[str, Any]:
        point = self._points.get(number)
        if point is None:
            if number >= self._space.grid_size():
                raise StudyExhausted(f"the grid has {self._space.grid_size()} combinations")
            point = self._points[number] = self._space.grid_point(number)
            if len(self._points) > 64:
                self._points.pop(next(iter(self._points)))
        return point

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return {}

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self._point(trial.number)[param_name]


def make_sampler(config: StudyConfig, seed: int | None) -> BaseSampler:
    if config.algorithm == GRID_SEARCH:
        return GridIndexSampler(config.space)
    if config.algorithm == RANDOM_SEARCH:
        return TrialSeededSampler(lambda s: RandomSampler(seed=s), seed)
    return TrialSeededSampler(tpe_sampler, seed)


# ====================================================================== storage
_storages: dict[str, RDBStorage] = {}
_storages_lock = threading.Lock()


def _normalise(url: str) -> str:
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def optuna_storage_url(url: str) -> str:
    """Where Optuna keeps the studies of the server database `url` (see the module docstring)."""
    url = _normalise(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            return url
        path = Path(database)
        sibling = path.with_name(f"{path.stem}.optuna{path.suffix}")
        return parsed.set(database=str(sibling)).render_as_string(hide_password=False)
    return url


def optuna_storage(url: str) -> RDBStorage:
    """The (process-wide, cached) Optuna RDB storage for the server database `url`."""
    url = _normalise(url)
    with _storages_lock:
        storage = _storages.get(url)
        if storage is None:
            storage = _storages[url] = _open_storage(url)
        return storage


def _open_storage(url: str) -> RDBStorage:
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        target = optuna_storage_url(url)
        kwargs: dict[str, Any] = {"connect_args": {"timeout": 30, "check_same_thread": False}}
        if target == url:  # in memory: one database for every thread
            kwargs["poolclass"] = StaticPool
        storage = RDBStorage(target, engine_kwargs=kwargs)
        if target != url:  # a file: WAL, as the server's own database (commits without fsync)
            event.listen(storage.engine, "connect", _sqlite_pragmas)
            storage.engine.dispose()  # the connections opened so far lack the pragmas
        return storage
    if backend == "postgresql":
        _ensure_schema(url, POSTGRES_SCHEMA)
        kwargs = {
            "connect_args": {"options": f"-c search_path={POSTGRES_SCHEMA}"},
            "pool_pre_ping": True,
        }
        return RDBStorage(url, engine_kwargs=kwargs)
    return RDBStorage(url, engine_kwargs={"pool_pre_ping": True})


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _ensure_schema(url: str, schema: str) -> None:
    engine = create_engine(url)
    try:
        for attempt in range(2):
            with engine.connect() as conn:
                found = conn.execute(
                    text("SELECT 1 FROM information_schema.schemata WHERE schema_name = :s"), {"s": schema}
                ).first()
            if found is not None:
                return
            try:
                with engine.begin() as conn:
                    conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
                return
            except DBAPIError:  # another process created it at the same moment: look again
                if attempt:
                    raise
    finally:
        engine.dispose()


# ====================================================================== the study
@dataclass(frozen=True)
class Suggestion:
    """One trial's hyperparameters. `number` is Optuna's 0-based trial number."""

    number: int
    parameters: list[dict[str, Any]] = field(default_factory=list)  # [{"parameterId", "value"}]
    args: list[str] = field(default_factory=list)  # ["--name=value", ...] in parameter order

    @property
    def trial_id(self) -> str:
        """Vertex's trial id: "1" for number 0."""
        return str(self.number + 1)


def _suggestion(number: int, assignment: Assignment) -> Suggestion:
    return Suggestion(number, parameters_json(assignment), command_line_args(assignment))


class Study:
    """A tuning job's study. Build with `create_or_load`; safe to share between threads."""

    def __init__(self, study: optuna.Study, config: StudyConfig, seed: int, pruner: BasePruner) -> None:
        self._study = study
        self._storage = study._storage
        self._study_id = study._study_id
        self.config = config
        self.seed = seed
        self.pruner = pruner
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ construction
    @classmethod
    def create_or_load(
        cls,
        storage_url: str,
        study_name: str,
        study_spec: Mapping[str, Any] | None,
        seed: int | None = None,
        *,
        min_completed_trials: int = DEFAULT_MIN_COMPLETED_TRIALS,
    ) -> Study:
        """Open the study `study_name` on the server database `storage_url`, creating it from `study_spec`
        when it does not exist. `study_spec=None` loads an existing study with its stored spec. The seed
        (drawn at random when None) is stored at creation; a reopened study keeps its stored seed. Raises
        `SpecError` for an invalid spec, ValueError when the spec differs from the stored one, KeyError
        when `study_spec` is None and the study does not exist. Sets Optuna's (process-wide) log level to
        WARNING, so that Optuna's per-trial INFO lines, numbered from 0, stay out of the server log."""
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        storage = optuna_storage(storage_url)
        config = StudyConfig.from_study_spec(study_spec) if study_spec is not None else None
        if config is None:
            study = optuna.load_study(study_name=study_name, storage=storage)
        else:
            study = optuna.create_study(
                study_name=study_name, storage=storage, direction=config.direction, load_if_exists=True
            )
        attrs = study.user_attrs
        if _SPEC_ATTR not in attrs:
            if config is None:
                raise KeyError(f"study {study_name!r} has no stored studySpec")
            # Two creators racing write the same values; the first committed wins either way.
            stored_seed = int(seed) if seed is not None else secrets.randbits(31)
            study.set_user_attr(_SEED_ATTR, stored_seed)  # the spec last: its presence marks a whole study
            study.set_user_attr(_SPEC_ATTR, json.dumps(dict(study_spec or {}), sort_keys=True))
            attrs = study.user_attrs
        stored = StudyConfig.from_study_spec(json.loads(attrs[_SPEC_ATTR]))
        if config is not None and config != stored:
            raise ValueError(f"study {study_name!r} exists with a different studySpec")
        stored_seed = int(attrs[_SEED_ATTR])
        pruner = make_pruner(stored.stopping, min_completed_trials)
        study.sampler = make_sampler(stored, stored_seed)
        study.pruner = pruner
        return cls(study, stored, stored_seed, pruner)

    @staticmethod
    def delete(storage_url: str, study_name: str) -> bool:
        """Delete a study and its trials; False when there was none."""
        try:
            optuna.delete_study(study_name=study_name, storage=optuna_storage(storage_url))
        except KeyError:
            return False
        return True

    # ------------------------------------------------------------------ properties
    @property
    def name(self) -> str:
        return self._study.study_name

    @property
    def maximize(self) -> bool:
        return self.config.goal == "MAXIMIZE"

    @property
    def uses_elapsed_duration(self) -> bool:
        """True: report elapsed milliseconds as the step; False: the measurement's stepCount."""
        return self.config.stopping.use_elapsed_duration

    # ------------------------------------------------------------------ asking
    def suggest(self) -> Suggestion:
        """Ask for a new trial. Its number and parameters are committed before this returns."""
        with self._lock:
            if self.exhausted():
                raise StudyExhausted(f"the grid has {self.config.space.grid_size()} combinations")
            trial = self._study.ask()
            try:
                assignment = self.config.space.suggest(trial)
            except BaseException:
                with contextlib.suppress(Exception):  # if even this fails, pending() finishes the trial
                    self._study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
                raise
            return _suggestion(trial.number, assignment)

    def pending(self) -> list[Suggestion]:
        """Trials asked and not yet told, by number, with their parameters. A trial whose suggestion a
        crash interrupted is completed first (same parameters so far, the rest suggested now)."""
        with self._lock:
            out = []
            for frozen in self._study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
                assignment = self.config.space.decode(frozen.params)
                if assignment is None:
                    trial = optuna.trial.Trial(self._study, frozen._trial_id)
                    assignment = self.config.space.suggest(trial)
                out.append(_suggestion(frozen.number, assignment))
            return sorted(out, key=lambda s: s.number)

    def suggestion(self, number: int) -> Suggestion | None:
        """The parameters of trial `number` (any state); None if it is unknown or half-suggested."""
        frozen = self._frozen(number)
        if frozen is None:
            return None
        assignment = self.config.space.decode(frozen.params)
        return None if assignment is None else _suggestion(number, assignment)

    def exhausted(self) -> bool:
        """GRID_SEARCH: every combination has been asked. Always False for the other algorithms."""
        if self.config.algorithm != GRID_SEARCH:
            return False
        return self._storage.get_n_trials(self._study_id) >= self.config.space.grid_size()

    # ------------------------------------------------------------------ measurements and stopping
    def report(self, number: int, step: int, value: float) -> None:
        """An intermediate measurement (for automated stopping). Reporting a step again overwrites it;
        reports to a finished trial are ignored."""
        trial_id = self._trial_id(number)
        with contextlib.suppress(UpdateFinishedTrialError):
            self._storage.set_trial_intermediate_value(trial_id, int(step), float(value))

    def should_stop(self, number: int) -> bool:
        """Whether the stopping rule stops trial `number` now (False for finished trials)."""
        frozen = self._frozen(number)
        if frozen is None or frozen.state != TrialState.RUNNING:
            return False
        return bool(self.pruner.prune(self._study, frozen))

    # ------------------------------------------------------------------ telling
    def complete(self, number: int, value: float) -> None:
        """The trial's final measurement value. A non-finite value makes the trial FAIL."""
        self._study.tell(number, float(value), skip_if_finished=True)

    def fail(self, number: int) -> None:
        """INFEASIBLE (no final measurement, or the trial's job failed)."""
        self._study.tell(number, state=TrialState.FAIL, skip_if_finished=True)

    def prune(self, number: int) -> None:
        """Stopped early and not to be counted as a completed trial (TPE still learns from its curve)."""
        self._study.tell(number, state=TrialState.PRUNED, skip_if_finished=True)

    def best(self) -> tuple[int, float] | None:
        """(number, value) of the best completed trial (the lowest number among ties); None if none."""
        completed = [
            t
            for t in self._study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.value is not None
        ]
        if not completed:
            return None
        sign = -1.0 if self.maximize else 1.0
        top = min(completed, key=lambda t: (sign * t.value, t.number))  # type: ignore[operator]
        return top.number, float(top.value)  # type: ignore[arg-type]

    def counts(self) -> dict[str, int]:
        """Trials per Optuna state name (RUNNING, COMPLETE, PRUNED, FAIL)."""
        out: dict[str, int] = {}
        for t in self._study.get_trials(deepcopy=False):
            out[t.state.name] = out.get(t.state.name, 0) + 1
        return out

    # ------------------------------------------------------------------ internals
    def _trial_id(self, number: int) -> int:
        return self._storage.get_trial_id_from_study_id_trial_number(self._study_id, number)

    def _frozen(self, number: int) -> FrozenTrial | None:
        try:
            return self._storage.get_trial(self._trial_id(number))
        except KeyError:
            return None
