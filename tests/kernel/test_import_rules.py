"""The import rules of the source tree, read from every module under src/trainworks with `ast`.

Nothing is imported: each module's source is parsed and every import statement in it is recorded, at module
level, inside functions and classes, and under `if TYPE_CHECKING:` (a type-only import is still a
dependency of the design). `from X import Y` imports the module X.Y when X.Y is a module or package on disk,
else the name Y of X; relative imports are resolved against the importing module's package.

The rules (one test each; a failure lists the offending `module -> import` pairs):
1. The kernel knows no kind: nothing of kinds, jobs, costs, capacity, wiring, api, cli; of the store only
   its infrastructure.
2. Anything outside a kind uses it only through its public modules (wire, validation, rules, service,
   client, or the kind's package itself); the composition root and the entry points are exempt.
3. storage, contract, scheduling, tuning and runtime never import the HTTP layer.
4. The HTTP app (trainworks.api) reads no repository: it goes through services.
5. No import cycles between packages (see test_no_package_cycles for what counts).
6. Nothing but the entry points imports the composition root, trainworks.wiring (the HTTP app may name its
   type under TYPE_CHECKING).
7. The gRPC layer (kernel/rpc.py and each kind's rpc.py) imports nothing of the HTTP app: the app hands it
   the services, auth and the answer to unexpected failures.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT = "trainworks"

# The entry points: the HTTP app and the command line. With the composition root they sit above
# everything else, and only they may import it (rule 6).
ENTRY_POINTS = frozenset({"trainworks.api.app", "trainworks.cli.main", "trainworks.cli.serve"})
COMPOSITION_ROOT = "trainworks.wiring"
# The app's OpenAPI description is part of the app: it describes every kind's routes and wire messages.
APP_ASSEMBLY = frozenset(
    {"trainworks.api.openapi", "trainworks.api.response_schemas", "trainworks.api.proto_schemas"}
)
TOP = ENTRY_POINTS | APP_ASSEMBLY | {COMPOSITION_ROOT}

KERNEL_FORBIDDEN = ("kinds", "jobs", "costs", "capacity", "wiring", "api", "cli")
PUBLIC_KIND_MODULES = frozenset({"wire", "validation", "rules", "service", "client"})
# What the kernel may use of the store: its infrastructure, and of the tables the declarative base and the
# kernel's own rows (operations, projects).
KERNEL_STORE_MODULES = frozenset(
    {"trainworks.store.database", "trainworks.store.crash_points", "trainworks.store.types"}
)
KERNEL_TABLES = frozenset({"Base", "ChangeRow", "OperationRow", "ProjectRow"})
PURE_PACKAGES = ("storage", "contract", "scheduling", "tuning", "runtime")
HTTP_LIBRARIES = ("fastapi", "starlette", "uvicorn")
# database_unavailable only classifies an exception (the 503 of a database outage): it reads nothing.
API_STORE_NAMES = {"trainworks.store.database": frozenset({"database_unavailable"})}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module (a package's __init__ is the package)
    name: str | None  # with `from target import name`, where name is no module
    line: int
    lazy: bool  # inside a function: runs when called
    type_only: bool  # under `if TYPE_CHECKING:`: never runs


@cache
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted((SRC / ROOT).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.depth = 0  # functions entered
        self.type_only = 0  # TYPE_CHECKING blocks entered
        self.found: list[Import] = []

    def _add(self, target: str, name: str | None, node: ast.stmt) -> None:
        self.found.append(Import(self.module, target, name, node.lineno, self.depth > 0, self.type_only > 0))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        self.type_only += 1
        for child in node.body:
            self.visit(child)
        self.type_only -= 1
        for child in node.orelse:
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, None, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join([*base, node.module] if node.module else base)
        else:
            target = node.module or ""
        for alias in node.names:
            submodule = f"{target}.{alias.name}"
            if submodule in modules():
                self._add(submodule, None, node)
            else:
                self._add(target, alias.name, node)


@cache
def imports() -> tuple[Import, ...]:
    found: list[Import] = []
    for module, path in modules().items():
        collector = _Collector(module, path.name == "__init__.py")
        collector.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        found.extend(collector.found)
    return tuple(found)


def within(module: str, *packages: str) -> bool:
    """Whether `module` is one of `packages` (dotted, under trainworks) or inside one."""
    return any(module == f"{ROOT}.{p}" or module.startswith(f"{ROOT}.{p}.") for p in packages)


def offending(check: Callable[[Import], bool]) -> list[Import]:
    return sorted((i for i in imports() if check(i)), key=lambda i: (i.source, i.line, i.target))


def pairs(found: Iterable[Import]) -> list[str]:
    """`module -> import` lines, the names of one statement together."""
    names: dict[tuple[str, str, int, bool, bool], list[str]] = defaultdict(list)
    for i in found:
        names[(i.source, i.target, i.line, i.lazy, i.type_only)].extend([i.name] if i.name else [])
    lines = []
    for (source, target, line, lazy, type_only), imported in names.items():
        what = f"{target} ({', '.join(imported)})" if imported else target
        where = ", in a function" if lazy else ", under TYPE_CHECKING" if type_only else ""
        lines.append(f"{source} -> {what}  [line {line}{where}]")
    return lines


def report(rule: str, found: Iterable[Import]) -> str:
    return rule + ":\n  " + "\n  ".join(pairs(found))


def test_the_walker_sees_the_tree() -> None:
    """Guards the rules against passing vacuously: the walker finds modules and resolves their imports."""
    assert "trainworks.kernel.errors" in modules()
    assert "trainworks.kinds.custom_jobs.service" in modules()
    targets = {(i.source, i.target) for i in imports()}
    assert ("trainworks.api.app", COMPOSITION_ROOT) in targets


# ------------------------------------------------------------------------------- 1. the kernel
def _kernel_violation(i: Import) -> bool:
    if not within(i.source, "kernel"):
        return False
    if within(i.target, "store") and i.target not in KERNEL_STORE_MODULES:
        return i.target != "trainworks.store.tables" or i.name not in KERNEL_TABLES
    return within(i.target, *KERNEL_FORBIDDEN)


def test_kernel_imports_no_kind() -> None:
    """trainworks.kernel imports nothing of the kinds, the job family, costs, capacity, the composition root,
    the HTTP app or the CLI; of the store only its infrastructure and the kernel's own rows."""
    found = offending(_kernel_violation)
    assert not found, report(
        "the kernel imports a kind (or more of the store than its infrastructure)", found
    )


# ------------------------------------------------------------------------------- 2. kinds
def _kind_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == [ROOT, "kinds"] else None


def _kind_violation(i: Import) -> bool:
    theirs = _kind_of(i.target)
    if theirs is None or _kind_of(i.source) == theirs or i.source in ENTRY_POINTS | {COMPOSITION_ROOT}:
        return False
    rest = i.target.split(".")[3:]
    return bool(rest) and rest[0] not in PUBLIC_KIND_MODULES


def test_kinds_are_used_only_through_public_modules() -> None:
    """Outside kinds.B (other kinds, costs, capacity, api, observability...) only B's package and its wire,
    validation, rules, service and client modules may be imported; B's store, controller, routes, cli,
    render and anything else are B's own. The composition root and the entry points (which mount the routes
    and the commands) are exempt."""
    found = offending(_kind_violation)
    assert not found, report("a module imports a kind's internals", found)


# ------------------------------------------------------------------------------- 3. pure packages
def is_http(module: str) -> bool:
    """The HTTP layer: the web frameworks, the app, and every router module."""
    last = module.rpartition(".")[2]
    return (
        module.split(".")[0] in HTTP_LIBRARIES
        or within(module, "api", "console")
        or (module.startswith(f"{ROOT}.") and (last in ("routes", "router") or last.endswith("_routes")))
    )


def test_pure_packages_never_import_the_http_layer() -> None:
    found = offending(lambda i: within(i.source, *PURE_PACKAGES) and is_http(i.target))
    assert not found, report(f"{', '.join(PURE_PACKAGES)} import the HTTP layer", found)


# ------------------------------------------------------------------------------- 4. the app and the store
def is_repository(module: str) -> bool:
    """A module that reads or writes tables: the store package, and every `store`/`*_store` module."""
    last = module.rpartition(".")[2]
    return within(module, "store") or (
        module.startswith(f"{ROOT}.") and (last == "store" or last.endswith("_store"))
    )


def _api_violation(i: Import) -> bool:
    if not within(i.source, "api") or not is_repository(i.target):
        return False
    return i.name is None or i.name not in API_STORE_NAMES.get(i.target, frozenset())


def test_the_http_app_reads_no_repository() -> None:
    """trainworks.api reaches data through services (app.state.services), never through a repository or the
    tables."""
    found = offending(_api_violation)
    assert not found, report("the HTTP app imports a repository", found)


# ------------------------------------------------------------------------------- 5. cycles
def package_of(module: str) -> str | None:
    """The node of the package graph: a top-level package (or module) under trainworks, or kinds.<kind>."""
    parts = module.split(".")
    if parts[0] != ROOT or len(parts) < 2:
        return None
    if parts[1] == "kinds" and len(parts) > 2:
        return f"kinds.{parts[2]}"
    return parts[1]


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_entry_points_stay_on_top() -> None:
    """The entry points, the app's OpenAPI description and the composition root are imported by nothing
    below them: so no cycle can pass through them, and the cycle check may leave them out."""
    found = offending(lambda i: i.target in TOP and i.source not in TOP and _root_violation(i))
    assert not found, report("a module imports an entry point or the composition root", found)


def test_no_package_cycles() -> None:
    """No import cycle between packages: the nodes are the top-level packages under trainworks and each
    kinds.<kind>.

    Imports at module level and inside functions count: a lazy import is still a dependency and only hides
    the cycle from the interpreter. Imports under `if TYPE_CHECKING:` do not: they never run, and a type hint
    may name a type of a package above. The entry points, the app's OpenAPI description and the composition
    root (TOP) are left out: they import everything by design, and test_entry_points_stay_on_top shows nothing
    imports them back."""
    edges: dict[str, set[str]] = defaultdict(set)
    why: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for i in imports():
        if i.type_only or i.source in TOP:
            continue
        a, b = package_of(i.source), package_of(i.target)
        if a is None or b is None or a == b:
            continue
        edges[a].add(b)
        why[(a, b)].append(i)
    cycles = _cycles(edges)
    lines: list[str] = []
    for component in cycles:
        lines.append(" <-> ".join(component))
        for a in component:
            for b in component:
                lines.extend(f"    {line}" for line in pairs(why.get((a, b), [])))
    assert not cycles, "import cycles between packages:\n  " + "\n  ".join(lines)


# ------------------------------------------------------------------------------- 6. the composition root
def _root_violation(i: Import) -> bool:
    if i.target != COMPOSITION_ROOT or i.source in ENTRY_POINTS:
        return False
    # The HTTP app serves the container: naming its type (never running the import) is no dependency.
    return not (i.type_only and within(i.source, "api"))


def test_only_entry_points_import_the_composition_root() -> None:
    found = offending(_root_violation)
    assert not found, report(f"only {', '.join(sorted(ENTRY_POINTS))} may import {COMPOSITION_ROOT}", found)


# ------------------------------------------------------------------------------- 7. the gRPC layer
def is_rpc(module: str) -> bool:
    """The gRPC layer: kernel/rpc.py and every kind's rpc module."""
    return module == f"{ROOT}.kernel.rpc" or (_kind_of(module) is not None and module.endswith(".rpc"))


def test_the_grpc_layer_imports_no_http_app() -> None:
    """gRPC serving runs beside the HTTP app, not inside it: it reaches services and auth only through what
    the app passes in (api/app.py), never through trainworks.api (app.state, the auth middleware)."""
    assert is_rpc("trainworks.kernel.rpc") and is_rpc("trainworks.kinds.custom_jobs.rpc")
    found = offending(lambda i: is_rpc(i.source) and within(i.target, "api"))
    assert not found, report("the gRPC layer imports the HTTP app", found)
