"""A StudySpec's parameters as an Optuna search space. Pure: dicts of canonical proto JSON in, values out.

Each Vertex ParameterSpec becomes one Optuna parameter, suggested define-by-run (`trial.suggest_*` through
the distribution below), and conditional parameters are suggested only when their parent's value is in
the condition's parent values. What Optuna stores (the *internal* value) is not always what the trial
receives (the *external* value):

=============  =========================  =================================  ===============================
kind           scaleType                  Optuna distribution (internal)     external value
=============  =========================  =================================  ===============================
DOUBLE         unset / UNIT_LINEAR_SCALE  FloatDistribution(min, max)        the same float
DOUBLE         UNIT_LOG_SCALE             FloatDistribution(min, max, log)   the same float
DOUBLE         UNIT_REVERSE_LOG_SCALE     FloatDistribution(min, max, log)   min + max - internal (clamped)
INTEGER        unset / UNIT_LINEAR_SCALE  IntDistribution(min, max)          the same int
INTEGER        UNIT_LOG_SCALE             IntDistribution(min, max, log)     the same int
INTEGER        UNIT_REVERSE_LOG_SCALE     IntDistribution(min, max, log)     min + max - internal
CATEGORICAL    (ignored)                  CategoricalDistribution(values)    the string
DISCRETE       (any; see below)           IntDistribution(0, len - 1)        values[internal] (a float)
=============  =========================  =================================  ===============================

Reverse log, as Vizier (Vertex's tuner) defines it: the reflected value ``y = min + max - x`` is
log-uniform on ``[min, max]``, i.e. Vizier's scaled coordinate is ``1 - log(y / min) / log(max / min)``,
which puts samples densest near ``max`` (e.g. a discount factor in [0.9, 0.9999]). A transform on
``max - x`` alone would need an arbitrary offset, since ``log(0)`` is undefined at ``x = max``; the
reflection's offset is ``min``, so like UNIT_LOG_SCALE it needs ``min > 0``. Optuna models the reflected
value on its log scale, so TPE's kernels are as fine near ``max`` as the sampling is. (Vizier's converter
test pins the definition: on [1e-4, 1e2], x = 1 has the scaled coordinate 7.2739e-4 and both ends map to
0 and 1.) As in Vizier, the effect grows with ``max / min``: on [0.9, 0.9999] reverse log is nearly
linear; a discount factor meant to be searched as ``log(1 - gamma)`` is better tuned as ``1 - gamma``
on UNIT_LOG_SCALE.

DISCRETE parameters are encoded as the ordered index of their value, not as an unordered category: TPE
then puts a kernel over neighbouring indices and exploits the order (a learning rate of 1e-3 is nearer
1e-2 than 1e-1), which an unordered CategoricalDistribution throws away. Discrete value lists are
typically evenly spaced on the scale the user has in mind (linear, or log like 16, 32, 64), which the
index spacing matches; `benchmarks/tuning_regret.py --discrete` measures both encodings. The scale type
of a DISCRETE parameter is validated (log scales need positive values) but does not change the encoding.

Parameter order (of the ``parameters`` list and of the ``--name=value`` args) is depth first: each
parameter in spec order, then its active conditional children in spec order, each followed by its own.

Conditional children are stored in Optuna under a name qualified by their place in the tree
(``parent[k].child``, ``k`` the index in the parent's ``conditionalParameterSpecs``), so two children
with one parameterId under disjoint conditions (which Vertex allows) never share an Optuna distribution.

GRID_SEARCH (INTEGER, CATEGORICAL and DISCRETE only) enumerates the conditional tree without duplicates
(an inactive child is not a grid axis) in lexicographic order: the first parameter varies slowest, values
in ascending order (listed order for CATEGORICAL), a parent's value followed by its children's
combinations. `grid_point(i)` decodes the i-th combination arithmetically, so even a wide INTEGER range
costs nothing until its values are visited.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

DOUBLE = "DOUBLE"
INTEGER = "INTEGER"
CATEGORICAL = "CATEGORICAL"
DISCRETE = "DISCRETE"

LINEAR = "UNIT_LINEAR_SCALE"
LOG = "UNIT_LOG_SCALE"
REVERSE_LOG = "UNIT_REVERSE_LOG_SCALE"
SCALE_UNSPECIFIED = "SCALE_TYPE_UNSPECIFIED"
_SCALE_NUMBERS = {0: SCALE_UNSPECIFIED, 1: LINEAR, 2: LOG, 3: REVERSE_LOG}

_VALUE_SPECS = {
    "doubleValueSpec": DOUBLE,
    "integerValueSpec": INTEGER,
    "categoricalValueSpec": CATEGORICAL,
    "discreteValueSpec": DISCRETE,
}
_CONDITION_FOR_KIND = {
    INTEGER: "parentIntValues",
    DISCRETE: "parentDiscreteValues",
    CATEGORICAL: "parentCategoricalValues",
}
_CONDITION_KEYS = ("parentDiscreteValues", "parentIntValues", "parentCategoricalValues")
DISCRETE_MAX_VALUES = 1000
DISCRETE_MIN_GAP = 1e-10
DISCRETE_MATCH_EPSILON = 1e-10  # parentDiscreteValues match within this

Value = float | int | str


class SpecError(ValueError):
    """An invalid StudySpec. `field` is the path under the StudySpec, e.g. ``parameters[1].integerValueSpec``;
    the service prefixes ``studySpec.``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Param:
    """One ParameterSpec. `internal` is its Optuna name; `field` its path under the StudySpec."""

    parameter_id: str
    kind: str
    scale: str
    internal: str
    field: str
    low: float | int | None = None
    high: float | int | None = None
    values: tuple[Any, ...] = ()  # CATEGORICAL strings or DISCRETE floats, in spec order
    children: tuple[Child, ...] = ()

    def float_bounds(self) -> tuple[float, float]:
        assert self.low is not None and self.high is not None  # DOUBLE and INTEGER parameters have both
        return float(self.low), float(self.high)

    def int_bounds(self) -> tuple[int, int]:
        assert self.low is not None and self.high is not None  # DOUBLE and INTEGER parameters have both
        return int(self.low), int(self.high)

    # ------------------------------------------------------------------ Optuna side
    def distribution(self) -> BaseDistribution:
        if self.kind == DOUBLE:
            return FloatDistribution(*self.float_bounds(), log=self.scale in (LOG, REVERSE_LOG))
        if self.kind == INTEGER:
            return IntDistribution(*self.int_bounds(), log=self.scale in (LOG, REVERSE_LOG))
        if self.kind == CATEGORICAL:
            return CategoricalDistribution(list(self.values))
        return IntDistribution(0, len(self.values) - 1)

    def suggest(self, trial: Any) -> Any:
        """`trial.suggest_*` for this parameter; returns the internal value."""
        if self.kind == DOUBLE:
            log = self.scale in (LOG, REVERSE_LOG)
            return trial.suggest_float(self.internal, *self.float_bounds(), log=log)
        if self.kind == INTEGER:
            log = self.scale in (LOG, REVERSE_LOG)
            return trial.suggest_int(self.internal, *self.int_bounds(), log=log)
        if self.kind == CATEGORICAL:
            return trial.suggest_categorical(self.internal, list(self.values))
        return trial.suggest_int(self.internal, 0, len(self.values) - 1)

    def to_external(self, internal: Any) -> Value:
        """The value the trial receives, from the value Optuna stores."""
        if self.kind in (DOUBLE, INTEGER):
            return self._reflected(internal)
        if self.kind == CATEGORICAL:
            return str(internal)
        return float(self.values[int(internal)])

    def to_internal(self, external: Value) -> Any:
        """Inverse of `to_external` (used by the grid)."""
        if self.kind in (DOUBLE, INTEGER):
            return self._reflected(external)
        if self.kind == CATEGORICAL:
            return str(external)
        return self._discrete_index(float(external))

    def _reflected(self, value: Any) -> float | int:
        """A DOUBLE or INTEGER value mirrored in its bounds on a REVERSE_LOG scale, else as it is: its own
        inverse, so it maps both ways between the trial's value and Optuna's."""
        if self.kind == DOUBLE:
            x = float(value)
            return _reflect(x, *self.float_bounds()) if self.scale == REVERSE_LOG else x
        n = int(value)
        return sum(self.int_bounds()) - n if self.scale == REVERSE_LOG else n

    def _discrete_index(self, value: float) -> int:
        for i, v in enumerate(self.values):
            if abs(v - value) <= DISCRETE_MATCH_EPSILON:
                return i
        raise ValueError(f"{value} is not a value of {self.parameter_id}")

    # ------------------------------------------------------------------ Vertex side
    def format_arg(self, value: Value) -> str:
        """``--name=value``: INTEGER without a fraction, DOUBLE and DISCRETE as Python floats (``256.0``,
        ``1e-05``: the shortest repr that reads back to the same double), CATEGORICAL verbatim."""
        if self.kind == INTEGER:
            text = str(int(value))
        elif self.kind in (DOUBLE, DISCRETE):
            text = repr(float(value))
        else:
            text = str(value)
        return f"--{self.parameter_id}={text}"

    def active_children(self, value: Value) -> list[Param]:
        return [child.param for child in self.children if child.matches(value)]

    # ------------------------------------------------------------------ grid
    def grid_values(self) -> Sequence[Value]:
        if self.kind == INTEGER:
            low, high = self.int_bounds()
            return range(low, high + 1)
        if self.kind in (CATEGORICAL, DISCRETE):
            return self.values
        raise ValueError("DOUBLE parameters have no grid")


def _reflect(x: float, low: float, high: float) -> float:
    """low + high - x, exact at both ends (the nearer end anchors the subtraction), within [low, high]."""
    y = high - (x - low) if x - low <= high - x else low + (high - x)
    return min(max(y, low), high)


@dataclass(frozen=True)
class Child:
    """A conditionalParameterSpec: `param` is active when the parent's value is one of `parent_values`."""

    parent_values: tuple[Value, ...]
    param: Param

    def matches(self, value: Value) -> bool:
        if isinstance(value, str):
            return value in self.parent_values
        if isinstance(value, int):
            return value in self.parent_values
        return any(abs(float(value) - float(v)) <= DISCRETE_MATCH_EPSILON for v in self.parent_values)


Assignment = list[tuple[Param, Value]]


@dataclass(frozen=True)
class SearchSpace:
    params: tuple[Param, ...]
    _grid_sizes: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    # ------------------------------------------------------------------ parse
    @classmethod
    def from_study_spec(cls, study_spec: Mapping[str, Any], grid: bool = False) -> SearchSpace:
        """Parse and validate ``study_spec["parameters"]``; with `grid`, also GRID_SEARCH's restrictions."""
        raw = study_spec.get("parameters")
        if not isinstance(raw, list) or not raw:
            raise SpecError("parameters", "at least one parameter is required")
        names: dict[str, list[tuple[str | None, frozenset[Any]]]] = {}
        params = tuple(
            _parse_param(item, f"parameters[{i}]", None, None, names, grid) for i, item in enumerate(raw)
        )
        return cls(params)

    # ------------------------------------------------------------------ suggest / decode
    def walk(self, lookup: Callable[[Param], Any]) -> Assignment:
        """Visit the active parameters depth first; `lookup(param)` returns its internal value (a
        `trial.suggest_*` call, or a read of stored params). Returns (param, external value) pairs."""
        out: Assignment = []

        def visit(params: Sequence[Param]) -> None:
            for param in params:
                value = param.to_external(lookup(param))
                out.append((param, value))
                visit(param.active_children(value))

        visit(self.params)
        return out

    def suggest(self, trial: Any) -> Assignment:
        """Suggest every active parameter on an Optuna trial, define-by-run."""
        return self.walk(lambda p: p.suggest(trial))

    def decode(self, stored: Mapping[str, Any]) -> Assignment | None:
        """The assignment from an Optuna trial's ``params`` (internal values); None when a parameter that
        should be active is missing (the trial was half-suggested)."""
        missing = object()

        class _Missing(Exception):
            pass

        def lookup(param: Param) -> Any:
            value = stored.get(param.internal, missing)
            if value is missing:
                raise _Missing
            return value

        try:
            return self.walk(lookup)
        except _Missing:
            return None

    # ------------------------------------------------------------------ grid
    def grid_size(self) -> int:
        return _level_size(self.params, self._grid_sizes)

    def grid_point(self, index: int) -> dict[str, Any]:
        """The `index`-th grid combination as {Optuna name: internal value}."""
        size = self.grid_size()
        if not 0 <= index < size:
            raise IndexError(f"grid index {index} outside 0..{size - 1}")
        out: dict[str, Any] = {}
        _decode_level(self.params, index, self._grid_sizes, out)
        return out

    def grid(self) -> Iterator[dict[str, Any]]:
        for i in range(self.grid_size()):
            yield self.grid_point(i)


# ---------------------------------------------------------------------- output
def parameters_json(assignment: Assignment) -> list[dict[str, Any]]:
    """Vertex's ``Trial.parameters``: numbers for INTEGER (a JSON integer), DOUBLE and DISCRETE (floats);
    strings for CATEGORICAL. (``google.protobuf.Value`` carries every number as a double; an integer
    JSON number reads back as the same double.)"""
    return [{"parameterId": p.parameter_id, "value": v} for p, v in assignment]


def command_line_args(assignment: Assignment) -> list[str]:
    return [p.format_arg(v) for p, v in assignment]


# ---------------------------------------------------------------------- parsing helpers
def _parse_param(
    spec: Any,
    path: str,
    parent: Param | None,
    parent_values: frozenset[Any] | None,
    names: dict[str, list[tuple[str | None, frozenset[Any]]]],
    grid: bool,
    internal: str | None = None,
) -> Param:
    if not isinstance(spec, Mapping):
        raise SpecError(path, "must be an object")
    pid = spec.get("parameterId")
    if not isinstance(pid, str) or not pid:
        raise SpecError(f"{path}.parameterId", "is required")
    if any(c.isspace() for c in pid):
        raise SpecError(f"{path}.parameterId", "must not contain whitespace")
    _check_unique_name(pid, path, parent, parent_values, names)
    internal = internal or pid

    present = [key for key in _VALUE_SPECS if spec.get(key) is not None]
    if len(present) != 1:
        raise SpecError(
            path,
            "exactly one of doubleValueSpec, integerValueSpec, categoricalValueSpec, discreteValueSpec "
            "is required",
        )
    key = present[0]
    kind = _VALUE_SPECS[key]
    vspec = spec[key]
    vpath = f"{path}.{key}"
    if not isinstance(vspec, Mapping):
        raise SpecError(vpath, "must be an object")
    scale = _scale(spec.get("scaleType"), f"{path}.scaleType")
    if grid and kind == DOUBLE:
        raise SpecError(vpath, "GRID_SEARCH supports only INTEGER, CATEGORICAL and DISCRETE parameters")

    low: float | int | None = None
    high: float | int | None = None
    values: tuple[Any, ...] = ()
    if kind == DOUBLE:
        # Canonical proto JSON omits a bound of 0 (these are not `optional` fields): absent means 0.
        low = _number(vspec.get("minValue", 0.0), f"{vpath}.minValue", float)
        high = _number(vspec.get("maxValue", 0.0), f"{vpath}.maxValue", float)
        if not (math.isfinite(low) and math.isfinite(high)):
            raise SpecError(vpath, "minValue and maxValue must be finite")
        if low > high:
            raise SpecError(f"{vpath}.maxValue", "must be at least minValue")
        if scale in (LOG, REVERSE_LOG) and low <= 0:
            raise SpecError(f"{vpath}.minValue", f"must be positive for {scale}")
    elif kind == INTEGER:
        low = _number(vspec.get("minValue", 0), f"{vpath}.minValue", int)
        high = _number(vspec.get("maxValue", 0), f"{vpath}.maxValue", int)
        if low > high:
            raise SpecError(f"{vpath}.maxValue", "must be at least minValue")
        if scale in (LOG, REVERSE_LOG) and low <= 0:
            raise SpecError(f"{vpath}.minValue", f"must be positive for {scale}")
    elif kind == CATEGORICAL:
        raw = vspec.get("values")
        if not isinstance(raw, list) or not raw:
            raise SpecError(f"{vpath}.values", "at least one value is required")
        if not all(isinstance(v, str) for v in raw):
            raise SpecError(f"{vpath}.values", "must be strings")
        if len(set(raw)) != len(raw):
            raise SpecError(f"{vpath}.values", "must be unique")
        values = tuple(raw)
        scale = SCALE_UNSPECIFIED  # Vertex: leave unset for CATEGORICAL; ignored if set
    else:
        raw = vspec.get("values")
        if not isinstance(raw, list) or not raw:
            raise SpecError(f"{vpath}.values", "at least one value is required")
        if len(raw) > DISCRETE_MAX_VALUES:
            raise SpecError(f"{vpath}.values", f"at most {DISCRETE_MAX_VALUES} values")
        floats = [_number(v, f"{vpath}.values[{i}]", float) for i, v in enumerate(raw)]
        if not all(math.isfinite(v) for v in floats):
            raise SpecError(f"{vpath}.values", "must be finite")
        for i in range(1, len(floats)):
            if floats[i] - floats[i - 1] < DISCRETE_MIN_GAP:
                raise SpecError(
                    f"{vpath}.values", f"must be increasing and at least {DISCRETE_MIN_GAP} apart"
                )
        if scale in (LOG, REVERSE_LOG) and floats[0] <= 0:
            raise SpecError(f"{vpath}.values", f"must be positive for {scale}")
        values = tuple(floats)

    param = Param(pid, kind, scale, internal, path, low, high, values)
    children = _parse_children(spec.get("conditionalParameterSpecs"), path, param, names, grid)
    return Param(pid, kind, scale, internal, path, low, high, values, children)


def _parse_children(
    raw: Any, path: str, parent: Param, names: dict[str, list[tuple[str | None, frozenset[Any]]]], grid: bool
) -> tuple[Child, ...]:
    if raw is None or raw == []:
        return ()
    cpath = f"{path}.conditionalParameterSpecs"
    if not isinstance(raw, list):
        raise SpecError(cpath, "must be a list")
    if parent.kind == DOUBLE:
        raise SpecError(cpath, "DOUBLE parameters cannot have conditional parameters")
    expected = _CONDITION_FOR_KIND[parent.kind]
    children = []
    for k, item in enumerate(raw):
        ipath = f"{cpath}[{k}]"
        if not isinstance(item, Mapping):
            raise SpecError(ipath, "must be an object")
        given = [key for key in _CONDITION_KEYS if item.get(key) is not None]
        if given != [expected]:
            raise SpecError(ipath, f"a {parent.kind} parent needs exactly the condition {expected}")
        vals = item[expected].get("values") if isinstance(item[expected], Mapping) else None
        if not isinstance(vals, list) or not vals:
            raise SpecError(f"{ipath}.{expected}.values", "at least one parent value is required")
        parsed = tuple(
            _parent_value(parent, v, f"{ipath}.{expected}.values[{i}]") for i, v in enumerate(vals)
        )
        child = _parse_param(
            item.get("parameterSpec"),
            f"{ipath}.parameterSpec",
            parent,
            frozenset(parsed),
            names,
            grid,
            internal=f"{parent.internal}[{k}].{_child_id(item.get('parameterSpec'))}",
        )
        children.append(Child(parsed, child))
    return tuple(children)


def _child_id(spec: Any) -> str:
    return str(spec.get("parameterId", "")) if isinstance(spec, Mapping) else ""


def _parent_value(parent: Param, raw: Any, path: str) -> Value:
    if parent.kind == INTEGER:
        value = _number(raw, path, int)
        low, high = parent.int_bounds()
        if not low <= value <= high:
            raise SpecError(path, f"{value} is outside the parent's range")
        return value
    if parent.kind == CATEGORICAL:
        if raw not in parent.values:
            raise SpecError(path, f"{raw!r} is not a value of the parent")
        return str(raw)
    value = _number(raw, path, float)
    for v in parent.values:
        if abs(v - value) <= DISCRETE_MATCH_EPSILON:
            return float(v)
    raise SpecError(path, f"{value} is not a value of the parent")


def _check_unique_name(
    pid: str,
    path: str,
    parent: Param | None,
    parent_values: frozenset[Any] | None,
    names: dict[str, list[tuple[str | None, frozenset[Any]]]],
) -> None:
    """Names are unique, except that children of one parent may share a name under disjoint conditions."""
    parent_key = parent.internal if parent is not None else None
    seen = names.setdefault(pid, [])
    for other_parent, other_values in seen:
        if (
            parent_key is None
            or other_parent != parent_key
            or (other_values & (parent_values or frozenset()))
        ):
            raise SpecError(
                f"{path}.parameterId",
                f"duplicate parameterId {pid!r} (only children of one parent with disjoint conditions "
                "may share a name)",
            )
    seen.append((parent_key, parent_values or frozenset()))


def _scale(raw: Any, path: str) -> str:
    if raw is None:
        return SCALE_UNSPECIFIED
    if isinstance(raw, int) and not isinstance(raw, bool) and raw in _SCALE_NUMBERS:
        return _SCALE_NUMBERS[raw]
    if raw in _SCALE_NUMBERS.values():
        return str(raw)
    raise SpecError(path, f"unknown scale type {raw!r}")


def _number(raw: Any, path: str, kind: type) -> Any:
    """A proto JSON number: doubles as numbers or strings ("1e-3", "NaN"), int64 as strings or numbers."""
    if raw is None:
        raise SpecError(path, "is required")
    if isinstance(raw, bool):
        raise SpecError(path, "must be a number")
    try:
        if kind is int:
            if isinstance(raw, float):
                if not raw.is_integer():
                    raise ValueError
                return int(raw)
            return int(raw)
        return float(raw)
    except (TypeError, ValueError):
        raise SpecError(path, f"{raw!r} is not a valid {'integer' if kind is int else 'number'}") from None


# ---------------------------------------------------------------------- grid arithmetic
def _param_size(param: Param, sizes: dict[str, int]) -> int:
    cached = sizes.get(param.internal)
    if cached is not None:
        return cached
    if param.kind == INTEGER:
        specials = _special_ints(param)
        low, high = param.int_bounds()
        plain = high - low + 1 - len(specials)
        total = plain + sum(_level_size(param.active_children(v), sizes) for v in specials)
    else:
        total = sum(_level_size(param.active_children(v), sizes) for v in param.grid_values())
    sizes[param.internal] = total
    return total


def _level_size(params: Sequence[Param], sizes: dict[str, int]) -> int:
    total = 1
    for param in params:
        total *= _param_size(param, sizes)
    return total


def _special_ints(param: Param) -> list[int]:
    """The INTEGER values under which some child is active (every other value is a block of one)."""
    return sorted({int(v) for child in param.children for v in child.parent_values})


def _decode_level(params: Sequence[Param], index: int, sizes: dict[str, int], out: dict[str, Any]) -> None:
    digits = []
    for param in reversed(params):
        n = _param_size(param, sizes)
        digits.append(index % n)
        index //= n
    for param, digit in zip(params, reversed(digits), strict=True):
        _decode_param(param, digit, sizes, out)


def _decode_param(param: Param, index: int, sizes: dict[str, int], out: dict[str, Any]) -> None:
    if param.kind == INTEGER:
        pos = param.int_bounds()[0]
        for special in _special_ints(param):
            run = special - pos
            if index < run:
                out[param.internal] = param.to_internal(pos + index)
                return
            index -= run
            block = _level_size(param.active_children(special), sizes)
            if index < block:
                out[param.internal] = param.to_internal(special)
                _decode_level(param.active_children(special), index, sizes, out)
                return
            index -= block
            pos = special + 1
        out[param.internal] = param.to_internal(pos + index)
        return
    for value in param.grid_values():
        children = param.active_children(value)
        block = _level_size(children, sizes)
        if index < block:
            out[param.internal] = param.to_internal(value)
            _decode_level(children, index, sizes, out)
            return
        index -= block
    raise IndexError("grid index beyond the parameter's values")
