"""What a PATCH of a ModelDevelopmentCluster changes, as the docs ("Gerenciar cluster") define it. Pure.

* Only the maskable paths may be named; mask paths take snake_case or camelCase.
* Repeated fields (node_pools, partitions, prolog/epilog scripts, node_sets) and maps (labels, config, each
  partition's and node set's config) are replaced whole; a path named in the mask but absent from the body is
  cleared.
* Without a mask the whole payload is diffed against the cluster: every maskable field takes the body's value
  and the ones it omits are cleared; the other fields must be left out or sent unchanged.
* `config` replaces the legacy `scheduling`/`accounting`: a result with both is refused; naming all three in
  the mask with only `config` in the body migrates (the legacy fields are cleared).
* Removing or renaming the partition default_partition_id names is refused; with no default the first
  partition is the default.
* updateMode USER_AND_SERVICE (also UPDATE_MODE_UNSPECIFIED) moves the service scripts to the current release
  and resolves every pool without a user-set node_image to the current default image of its machine type,
  which the spec then reports; it does so on every such update, so an unrelated change (a label) moves pools
  to a newer default. USER_ONLY leaves the service scripts, and each pool on the image it runs unless the
  body sets node_image. A pool whose image moves is recreated. A node_image the body sends is the user's and
  holds while node_pools is left out of the mask or sent again with it (realized["userImages"]).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trainworks.catalog import machines as _machines
from trainworks.catalog.node_images import ImageCatalog
from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.wire import input_dict
from trainworks.kernel.wire_errors import snake
from trainworks.kinds.clusters.validation import (
    SLURM,
    MachineCatalog,
    check_immutable,
    fill_pool_defaults,
    validate_cluster,
)
from trainworks.kinds.clusters.wire import ModelDevelopmentCluster, UpdateMode

_S = ("orchestratorSpec", "slurmSpec")
USER_IMAGES = "userImages"  # realized: the pools whose nodeImage the user set
# maskable path (snake_case) -> where it lives in the canonical camelCase spec
MASKABLE: dict[str, tuple[str, ...]] = {
    "labels": ("labels",),
    "node_pools": ("nodePools",),
    f"{SLURM}.partitions": (*_S, "partitions"),
    f"{SLURM}.default_partition_id": (*_S, "defaultPartitionId"),
    f"{SLURM}.login_node_pool_id": (*_S, "loginNodePoolId"),
    f"{SLURM}.prolog_bash_scripts": (*_S, "prologBashScripts"),
    f"{SLURM}.epilog_bash_scripts": (*_S, "epilogBashScripts"),
    f"{SLURM}.config": (*_S, "config"),
    f"{SLURM}.node_sets": (*_S, "nodeSets"),
    f"{SLURM}.scheduling": (*_S, "scheduling"),
    f"{SLURM}.accounting": (*_S, "accounting"),
}
IMMUTABLE_PATHS = frozenset(
    {
        "network",
        "runtime_spec",
        f"{SLURM}.home_directory_storage",
        "node_pools.id",
        "node_pools.machine_spec",
        "node_pools.provisioning_model",
        "node_pools.confidential_instance_config",
    }
)
OUTPUT_ONLY_PATHS = frozenset(
    {
        "name",
        "cluster_status",
        "cluster_events",
        "runtime",
        "create_time",
        "update_time",
        "start_time",
        "node_pools.effective_flex_start_max_duration",
    }
)
# Fields the docs do not list as maskable: without a mask they must be left out or sent unchanged.
_FIXED: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("displayName",), "display_name", "cannot be updated"),
    (("lustreExportConfig",), "lustre_export_config", "cannot be updated"),
    (("network",), "network", "is immutable"),
    (("runtimeSpec",), "runtime_spec", "is immutable"),
    ((*_S, "homeDirectoryStorage"), f"{SLURM}.home_directory_storage", "is immutable"),
)
# Pool fields whose change recreates the pool's nodes (the docs: storage sources and startup scripts; a zone
# or an access config cannot change under a running VM either).
_RECREATING_POOL_FIELDS = ("bootDisk", "startupScript", "filestores", "lustres", "zone", "enablePublicIps")
_SECTION_NAMES = {
    "labels": "labels",
    f"{SLURM}.partitions": "partitions",
    f"{SLURM}.prolog_bash_scripts": "prolog scripts",
    f"{SLURM}.epilog_bash_scripts": "epilog scripts",
    f"{SLURM}.config": "Slurm config",
    f"{SLURM}.node_sets": "node sets",
    f"{SLURM}.scheduling": "scheduling (legacy)",
    f"{SLURM}.accounting": "accounting (legacy)",
}


@dataclass
class UpdatePlan:
    spec: dict[str, Any]  # the new user-settable spec (canonical camelCase), as the resource will report it
    # the new service-side state: {"images": {pool_id: image}, "serviceScripts": version, "userImages": [pool
    # IDs whose nodeImage the user set]}, plus whatever else the service keeps there
    realized: dict[str, Any]
    recreate_pools: list[str] = field(default_factory=list)  # pools whose nodes must be recreated
    changes: list[str] = field(default_factory=list)  # what changes, for progress messages and events


# ------------------------------------------------------------------ request parameters
def parse_update_mask(mask: str | None) -> list[str] | None:
    """The mask's paths in snake_case, or None when there is no mask (diff the whole payload). Raises
    invalid_argument naming each path that cannot be updated."""
    paths = [snake(p.strip()) for p in (mask or "").split(",") if p.strip()]
    if not paths or paths == ["*"]:
        return None
    problems = [FieldViolation("update_mask", why) for path in paths if (why := _unmaskable(path))]
    if problems:
        raise invalid_argument(problems)
    return list(dict.fromkeys(paths))


def _unmaskable(path: str) -> str | None:
    if path in MASKABLE:
        return None
    for roots, what in ((OUTPUT_ONLY_PATHS, "output only"), (IMMUTABLE_PATHS, "immutable")):
        root = next((r for r in roots if path == r or path.startswith(r + ".")), None)
        if root is not None:
            return f"{path!r}: the field {root} is {what}"
    whole = next((m for m in MASKABLE if path.startswith(m + ".")), None)
    if whole is not None:
        return (
            f"{path!r}: {whole} is replaced whole; name {whole} in the update mask and send its complete "
            "value"
        )
    allowed = ", ".join(MASKABLE)
    if path == "display_name":
        return f"'display_name' cannot be updated; the fields that can are: {allowed}"
    return f"{path!r} is not a field of ModelDevelopmentCluster that can be updated; use: {allowed}"


def parse_update_mode(value: str | int | None) -> UpdateMode:
    """updateMode as a name or number; absent or UPDATE_MODE_UNSPECIFIED mean USER_AND_SERVICE."""
    text = str(value).strip() if value is not None else ""
    if not text:
        return UpdateMode.USER_AND_SERVICE
    try:
        mode = UpdateMode.parse(int(text) if text.isdigit() else text)
    except ValueError as exc:
        raise invalid_argument([FieldViolation("update_mode", str(exc))]) from None
    return UpdateMode.USER_AND_SERVICE if mode == UpdateMode.UPDATE_MODE_UNSPECIFIED else UpdateMode(mode)


# ------------------------------------------------------------------ spec paths
def _get(spec: Mapping[str, Any], path: Sequence[str]) -> Any:
    node: Any = spec
    for part in path:
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def _put(spec: dict[str, Any], path: Sequence[str], value: Any) -> None:
    """Set a field, or clear it when `value` is empty (proto3: an empty list, map or string is unset)."""
    node = spec
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    if value in (None, "", [], {}):
        node.pop(path[-1], None)
    else:
        node[path[-1]] = copy.deepcopy(value)


def _pools(spec: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(p.get("id", "")): p for p in spec.get("nodePools") or []}


def _machine_type(pool: Mapping[str, Any]) -> str:
    return str((pool.get("machineSpec") or {}).get("machineType", ""))


# ------------------------------------------------------------------ images and scripts
def _default_image(
    catalog: ImageCatalog, pool: Mapping[str, Any], index: int, now: datetime
) -> tuple[str, FieldViolation | None]:
    try:
        return catalog.default_image(_machine_type(pool), now), None
    except LookupError as exc:
        return "", FieldViolation(
            f"node_pools[{index}].node_image", f"{exc}; set node_image to the image the pool should run"
        )


def initial_realized(spec: Mapping[str, Any], catalog: ImageCatalog, now: datetime) -> dict[str, Any]:
    """At create: every pool runs its node_image, else the then-default image of its machine type (the spec
    keeps node_image empty); the service scripts are the current release."""
    images: dict[str, str] = {}
    pinned = [str(p.get("id", "")) for p in spec.get("nodePools") or [] if p.get("nodeImage")]
    problems: list[FieldViolation] = []
    for i, pool in enumerate(spec.get("nodePools") or []):
        image = str(pool.get("nodeImage") or "")
        if not image:
            image, problem = _default_image(catalog, pool, i, now)
            if problem:
                problems.append(problem)
        images[str(pool.get("id", ""))] = image
    if problems:
        raise invalid_argument(problems)
    version = catalog.current_service_scripts(now).version
    return {"images": images, "serviceScripts": version, USER_IMAGES: pinned}


# ------------------------------------------------------------------ the plan
def plan_update(
    current_spec: Mapping[str, Any],
    current_realized: Mapping[str, Any],
    body: ModelDevelopmentCluster,
    update_mask: str | None,
    update_mode: str | int | None,
    catalog: ImageCatalog,
    now: datetime,
    machines: MachineCatalog = _machines,
) -> UpdatePlan:
    """The spec and service-side state after a PATCH; raises ApiError (INVALID_ARGUMENT) on a bad request."""
    mode = parse_update_mode(update_mode)
    paths = parse_update_mask(update_mask)
    current = copy.deepcopy(dict(current_spec))
    current["nodePools"] = [fill_pool_defaults(p, machines) for p in current.get("nodePools") or []]
    sent = input_dict(body)
    new = copy.deepcopy(current)
    violations: list[FieldViolation] = []
    if paths is None:
        for where, path, why in _FIXED:
            value = _get(sent, where)
            if value not in (None, "", {}) and value != _get(current, where):
                violations.append(
                    FieldViolation(path, f"{path} {why}; leave it out or send the current value")
                )
    for path in MASKABLE if paths is None else paths:
        _put(new, MASKABLE[path], _get(sent, MASKABLE[path]))
    new["nodePools"] = [fill_pool_defaults(p, machines) for p in new.get("nodePools") or []]

    removed_default = _removed_default(current, new)
    if removed_default:
        violations.append(removed_default)
    violations += check_immutable(current, new)
    found = validate_cluster(ModelDevelopmentCluster.model_validate(new), machines)
    if removed_default:  # one message for the dangling default, not two
        found = [v for v in found if v.field != f"{SLURM}.default_partition_id"]
    violations += found
    if violations:
        raise invalid_argument(_unique(violations))

    replaced = paths is None or "node_pools" in paths
    images, pinned, problems = _resolve_images(current, new, current_realized, mode, replaced, catalog, now)
    if problems:
        raise invalid_argument(problems)
    scripts = str(current_realized.get("serviceScripts", ""))
    if mode == UpdateMode.USER_AND_SERVICE:
        scripts = catalog.current_service_scripts(now).version
    recreate, changes = _describe(current, new, current_realized, images, paths)
    if scripts != str(current_realized.get("serviceScripts", "")):
        changes.append(f"service scripts {current_realized.get('serviceScripts') or '(none)'} -> {scripts}")
    realized = {
        **copy.deepcopy(dict(current_realized)),
        "images": images,
        "serviceScripts": scripts,
        USER_IMAGES: pinned,
    }
    return UpdatePlan(new, realized, recreate, changes)


def _unique(violations: list[FieldViolation]) -> list[FieldViolation]:
    return list(dict.fromkeys(violations))


def _removed_default(current: Mapping[str, Any], new: Mapping[str, Any]) -> FieldViolation | None:
    """The update drops (or renames) the partition default_partition_id names and leaves that default."""
    old_default = str(_get(current, (*_S, "defaultPartitionId")) or "")
    if not old_default or str(_get(new, (*_S, "defaultPartitionId")) or "") != old_default:
        return None
    ids = {str(p.get("id", "")) for p in _get(new, (*_S, "partitions")) or []}
    if old_default in ids:
        return None
    return FieldViolation(
        f"{SLURM}.partitions",
        f"the update removes partition {old_default!r}, which default_partition_id names; keep it, or change "
        f"default_partition_id in the same update (name {SLURM}.default_partition_id in the update mask)",
    )


def _resolve_images(
    current: Mapping[str, Any],
    new: dict[str, Any],
    realized: Mapping[str, Any],
    mode: UpdateMode,
    replaced: bool,
    catalog: ImageCatalog,
    now: datetime,
) -> tuple[dict[str, str], list[str], list[FieldViolation]]:
    """Each pool's image after the update, and the pools whose nodeImage the user set; sets the reported
    nodeImage in `new` as the mode requires.

    A nodeImage the body sends is the user's (the docs: send it back to keep a pool on an image). A pool kept
    from the current spec (node_pools not replaced) keeps the user's image, while one the service resolved is
    resolved again: "the image is resolved on every USER_AND_SERVICE update"."""
    running: Mapping[str, str] = realized.get("images") or {}
    before = _pools(current)
    if USER_IMAGES in realized:
        was_pinned = {str(p) for p in realized.get(USER_IMAGES) or []}
    else:  # state written before the user's images were tracked: every reported image counts as theirs
        was_pinned = {pool_id for pool_id, pool in before.items() if pool.get("nodeImage")}
    images: dict[str, str] = {}
    pinned: list[str] = []
    problems: list[FieldViolation] = []
    for i, pool in enumerate(new.get("nodePools") or []):
        pool_id = str(pool.get("id", ""))
        chosen = str(pool.get("nodeImage") or "")
        if chosen and (replaced or pool_id in was_pinned):
            image = chosen
            pinned.append(pool_id)
        elif mode == UpdateMode.USER_ONLY and pool_id in running:
            image = running[pool_id]  # stays on the image it runs, and reports what it reported
            reported = str((before.get(pool_id) or {}).get("nodeImage") or "")
            if reported:
                pool["nodeImage"] = reported
        else:  # USER_AND_SERVICE, or a new pool: the current default
            image, problem = _default_image(catalog, pool, i, now)
            if problem:
                problems.append(problem)
            if mode == UpdateMode.USER_AND_SERVICE:
                pool["nodeImage"] = image
        images[pool_id] = image
    return images, pinned, problems


def _describe(
    current: Mapping[str, Any],
    new: Mapping[str, Any],
    realized: Mapping[str, Any],
    images: Mapping[str, str],
    paths: list[str] | None,
) -> tuple[list[str], list[str]]:
    """The pools to recreate and a readable list of what changes."""
    running: Mapping[str, str] = realized.get("images") or {}
    before, after = _pools(current), _pools(new)
    recreate: list[str] = []
    changes: list[str] = []

    def recreate_pool(pool_id: str, why: str) -> None:
        if pool_id not in recreate:
            recreate.append(pool_id)
        changes.append(f"node pool {pool_id!r}: {why} (nodes are recreated)")

    for path in MASKABLE if paths is None else paths:
        where = MASKABLE[path]
        if path == "node_pools" or _get(current, where) == _get(new, where):
            continue
        value = _get(new, where)
        if path.endswith(".default_partition_id"):
            changes.append(
                f"default partition -> {value!r}" if value else "default partition -> the first one"
            )
        elif path.endswith(".login_node_pool_id"):
            changes.append(f"login node pool -> {value!r}")
        else:
            changes.append(f"{_SECTION_NAMES[path]} {'replaced' if value else 'cleared'}")

    for pool_id in before:
        if pool_id not in after:
            changes.append(f"node pool {pool_id!r} removed")
    old_login = str(_get(current, (*_S, "loginNodePoolId")) or "")
    new_login = str(_get(new, (*_S, "loginNodePoolId")) or "")
    for pool_id, pool in after.items():
        old = before.get(pool_id)
        if old is None:
            changes.append(f"node pool {pool_id!r} added, image {images.get(pool_id, '')}")
            continue
        was = running.get(pool_id)
        if was is not None and images.get(pool_id) != was:
            recreate_pool(pool_id, f"image {was} -> {images.get(pool_id)}")
        moved = [f for f in _RECREATING_POOL_FIELDS if old.get(f) != pool.get(f)]
        if moved:
            recreate_pool(pool_id, f"{', '.join(snake(f) for f in moved)} changed")
        if old_login != new_login and pool_id in (old_login, new_login):
            recreate_pool(pool_id, "its role changes (login_node_pool_id)")
        if (old.get("scalingSpec") or {}) != (pool.get("scalingSpec") or {}):
            scaling = pool.get("scalingSpec") or {}
            low, high = scaling.get("minNodeCount", "0"), scaling.get("maxNodeCount", "0")
            changes.append(f"node pool {pool_id!r} scales to {low}..{high} nodes")
        if (old.get("labels") or {}) != (pool.get("labels") or {}):
            changes.append(f"node pool {pool_id!r}: labels replaced")
    return recreate, changes


__all__ = [
    "IMMUTABLE_PATHS",
    "MASKABLE",
    "OUTPUT_ONLY_PATHS",
    "UpdatePlan",
    "initial_realized",
    "parse_update_mask",
    "parse_update_mode",
    "plan_update",
]
