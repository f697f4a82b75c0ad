"""Reconciles training clusters with the Slurm clusters that realize them on this host.

States (every change is a compare-and-set on the row; the LRO that asked for it completes when it is done):

* PROVISIONING -> RUNNING once slurm.conf is written and slurmctld and every static node's slurmd run (login
  nodes get their boot disk and run their startup scripts), or ERROR when Slurm refuses to start.
* RUNNING: dead daemons are started again and `nodesStatus` follows what Slurm reports.
* UPDATING -> RUNNING: the accepted spec is applied in steps recorded in `pending`, so a restarted server goes
  on where it stopped: (1) slurm.conf regenerated and applied with `scontrol reconfigure` (a restart of
  slurmctld only when the node set changes), so queued and running jobs are untouched; (2) each pool whose
  image moves is recreated: compute nodes drained, replaced once their jobs end; login nodes recreated (boot
  disk erased). If Slurm refuses the new configuration, the old one is put back and the LRO fails.
* STOPPING -> gone: every daemon is stopped by PID, the cluster's directory removed, the LRO completes.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Set
from pathlib import Path
from typing import Any

from trainworks.backends.base import PlacementRequest
from trainworks.backends.commands import TaskError
from trainworks.catalog.node_images import ImageCatalog
from trainworks.config import Settings
from trainworks.kernel.ids import new_numeric_id
from trainworks.kernel.loop import ReconcileLoop, reconcile_each
from trainworks.kernel.lro_store import key_of
from trainworks.kernel.status import Code, status_dict
from trainworks.kernel.wire import format_timestamp, now_utc
from trainworks.kinds.clusters.service import CLUSTER_TYPE, EMPTY, cluster_wire, row_name
from trainworks.kinds.clusters.store import ClusterStore
from trainworks.kinds.clusters.wire import ClusterState
from trainworks.slurm.backend import CLUSTER_LABEL, SlurmTarget, SlurmTargets
from trainworks.slurm.daemons import LocalSlurm, NodeInfo, SlurmError
from trainworks.slurm.layout import COMPUTE, LOGIN, Layout, NodeSlot, build_layout
from trainworks.store.tables import ClusterRow

log = logging.getLogger(__name__)

C = ClusterState
REFRESH_SECONDS = 5.0  # how often a RUNNING cluster's daemons and node states are checked
STARTUP_TIMEOUT = 120.0
PARTITION_LABEL = "trainworks-partition"  # the partition of a training cluster a CustomJob runs in


def cluster_dir(settings: Settings, row: ClusterRow) -> Path:
    return settings.clusters_dir / str(row.uid)


def node_state(info: NodeInfo | None, recreating: bool) -> tuple[str, str]:
    """nodeState and a detail for a compute node, from what Slurm says of it."""
    if recreating:
        return "UPDATING", "being recreated"
    if info is None:
        return "PREPARING", "not registered with slurmctld yet"
    flags = set(info.state.replace("+", " ").replace("*", "").split())
    if flags & {"DOWN", "FAIL", "FAILING", "NOT_RESPONDING"}:
        return "ERROR", f"slurm state {info.state}" + (f": {info.reason}" if info.reason else "")
    if flags & {"POWERING_UP", "UNKNOWN"}:
        return "PREPARING", f"slurm state {info.state}"
    return "RUNNING", f"slurm state {info.state}"


def _powered_down(info: NodeInfo | None) -> bool:
    return info is not None and any(f in info.state for f in ("POWERED_DOWN", "POWERING_DOWN"))


class ClusterController(ReconcileLoop):
    name = "cluster-controller"

    def __init__(self, settings: Settings, store: ClusterStore, images: Callable[[], ImageCatalog]) -> None:
        self.settings = settings
        self.store = store
        self.images = images
        self._checked: dict[int, float] = {}  # uid -> when its daemons were last checked (an optimisation)
        super().__init__(settings.resync_seconds)

    def reconcile_once(self) -> bool:
        return reconcile_each(
            self.store.all(), self.reconcile, log, "reconciling cluster %s failed", row_name
        )

    def stop_all(self) -> None:
        """Stop every cluster's daemons (tests and `serve --stop-clusters-on-exit`); the rows stay."""
        for row in self.store.all():
            LocalSlurm(cluster_dir(self.settings, row)).down()

    # -------------------------------------------------------------- helpers
    def slurm(self, row: ClusterRow) -> LocalSlurm:
        return LocalSlurm(cluster_dir(self.settings, row))

    def layout(self, row: ClusterRow, spec: Mapping[str, Any], realized: Mapping[str, Any]) -> Layout:
        scripts = self.images().service_scripts(str(realized.get("serviceScripts", "")))
        return build_layout(
            row.cluster_id, cluster_dir(self.settings, row), row.slurm_port, spec, realized, scripts
        )

    def _event(self, row: ClusterRow, kind: str, message: str) -> None:
        self.store.add_events(
            key_of(row),
            [{"eventType": kind, "eventMessage": message, "eventTime": format_timestamp(now_utc())}],
        )

    def _boot(
        self,
        row: ClusterRow,
        slot: NodeSlot,
        spec: Mapping[str, Any],
        realized: Mapping[str, Any],
        fresh: bool,
    ) -> str:
        """A node's boot: its boot disk (erased when `fresh`), then the startup scripts. Returns a detail."""
        node_dir = cluster_dir(self.settings, row) / "nodes" / slot.name
        disk = node_dir / "disk"
        if fresh and disk.exists():
            shutil.rmtree(disk, ignore_errors=True)
        disk.mkdir(parents=True, exist_ok=True)
        pool: Mapping[str, Any] = next(
            (p for p in spec.get("nodePools", []) if p.get("id") == slot.pool_id), {}
        )
        service = self.images().service_scripts(str(realized.get("serviceScripts", "")))
        scripts = [s for s in (service.get("startup", ""), pool.get("startupScript")) if s]
        for i, body in enumerate(scripts):
            script = node_dir / f"startup-{i}.sh"
            script.write_text(body)
            with open(node_dir / "startup.log", "ab") as out:
                try:
                    done = subprocess.run(
                        ["bash", str(script)],
                        cwd=disk,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env={
                            "PATH": "/usr/local/bin:/usr/bin:/bin",
                            "HOME": str(disk),
                            "NODE_NAME": slot.name,
                        },
                        timeout=STARTUP_TIMEOUT,
                        check=False,
                    )
                except subprocess.TimeoutExpired:
                    return f"startup script {i} ran longer than {STARTUP_TIMEOUT:.0f}s"
            if done.returncode != 0:
                return f"startup script {i} exited with status {done.returncode}"
        return ""

    def _statuses(
        self,
        row: ClusterRow,
        layout: Layout,
        recreating: Set[str] = frozenset(),
        fresh: Set[str] = frozenset(),
    ) -> list[dict[str, Any]]:
        """nodesStatus: login nodes, and the compute nodes that are up (a powered-down node is no VM)."""
        try:
            infos = {n.name: n for n in self.slurm(row).nodes()}
        except SlurmError:
            infos = {}
        before = {str(n.get("instanceName")): n for n in row.nodes or []}
        now = format_timestamp(now_utc())
        out: list[dict[str, Any]] = []
        for slot in layout.nodes:
            info = infos.get(slot.name)
            if slot.pool_type == COMPUTE and slot.dynamic and (info is None or _powered_down(info)):
                continue
            if slot.pool_type == LOGIN:
                state, detail = (
                    ("UPDATING", "being recreated") if slot.name in recreating else ("RUNNING", "")
                )
            else:
                state, detail = node_state(info, slot.name in recreating)
            if slot.image:
                detail = f"image {slot.image}" + (f"; {detail}" if detail else "")
            old = before.get(slot.name)
            new_instance = old is None or slot.name in fresh
            if old is None or new_instance:
                instance_id, create_time = str(new_numeric_id()), now
            else:
                instance_id, create_time = old["instanceId"], old["createTime"]
            entry = {
                "nodeState": state,
                "nodePoolId": slot.pool_id,
                "nodePoolType": slot.pool_type,
                "instanceName": slot.name,
                "instanceId": instance_id,
                "createTime": create_time,
                "lastUpdateTime": now,
                "detail": detail,
            }
            if old is not None and not new_instance:
                same = {k: v for k, v in entry.items() if k != "lastUpdateTime"} == {
                    k: v for k, v in old.items() if k != "lastUpdateTime"
                }
                if same:
                    entry["lastUpdateTime"] = old["lastUpdateTime"]
            out.append(entry)
        return out

    def _complete(self, row: ClusterRow) -> None:
        fresh = self.store.get(key_of(row))
        if fresh is None or fresh.operation_id is None:
            return
        self.store.finish_operation(
            key_of(fresh), fresh.operation_id, response={"@type": CLUSTER_TYPE, **cluster_wire(fresh)}
        )

    def _failed(self, row: ClusterRow, message: str) -> dict[str, Any]:
        """Transition values that also end the cluster's operation with `message`, in the same transaction:
        a crash in between left the operation undone (ERROR), or completed as a success later (RUNNING)."""
        if row.operation_id is None:
            return {}
        return {
            "operation_id": None,
            "abort": (row.operation_id, status_dict(Code.FAILED_PRECONDITION, message)),
        }

    # -------------------------------------------------------------- one cluster
    def reconcile(self, row: ClusterRow) -> bool:
        state = C(row.state)
        if state == C.PROVISIONING:
            return self._provision(row)
        if state == C.RUNNING:
            self._keep(row)
            return False
        if state == C.UPDATING:
            return self._update(row)
        if state == C.STOPPING:
            return self._delete_cluster(row)
        return False

    def _provision(self, row: ClusterRow) -> bool:
        layout = self.layout(row, row.spec, row.realized)
        try:
            self.slurm(row).apply(layout.cluster)
        except SlurmError as exc:
            message = f"Slurm could not start: {exc}"
            self.store.transition(
                key_of(row),
                [C.PROVISIONING],
                state=C.ERROR,
                error=status_dict(Code.INTERNAL, message),
                **self._failed(row, message),
            )
            return False
        problems = [
            f"{slot.name}: {d}"
            for slot in layout.nodes
            if (d := self._boot(row, slot, row.spec, row.realized, fresh=False))
        ]
        nodes = self._statuses(row, layout)
        moved = self.store.transition(
            key_of(row),
            [C.PROVISIONING],
            state=C.RUNNING,
            start_time=row.start_time or now_utc(),
            nodes=nodes,
            detail="; ".join(problems),
            error=None,
        )
        if moved:
            self._checked[row.uid] = time.monotonic()
            self._complete(row)
        return True

    def _keep(self, row: ClusterRow) -> None:
        if row.operation_id is not None:  # done before a restart, not yet reported
            self._complete(row)
        last = self._checked.get(row.uid, 0.0)
        if time.monotonic() - last < REFRESH_SECONDS:
            return
        self._checked[row.uid] = time.monotonic()
        layout = self.layout(row, row.spec, row.realized)
        try:
            self.slurm(row).apply(layout.cluster)  # starts again a daemon that died; else nothing to do
        except SlurmError as exc:
            log.warning("cluster %s: %s", row_name(row), exc)
        nodes = self._statuses(row, layout)
        if nodes != row.nodes:
            self.store.transition(key_of(row), [C.RUNNING], nodes=nodes, update_time=row.update_time)

    def _update(self, row: ClusterRow) -> bool:
        pending: dict[str, Any] = dict(row.pending or {})
        if not pending:  # nothing recorded: nothing to apply
            self.store.transition(key_of(row), [C.UPDATING], state=C.RUNNING)
            self._complete(row)
            return True
        spec, realized = pending["spec"], pending["realized"]
        new = self.layout(row, spec, realized)
        slurm = self.slurm(row)
        recreate = set(pending.get("recreate", []))
        done: list[str] = list(pending.get("recreated", []))
        targets = [n for n in new.nodes if n.pool_id in recreate and n.name not in done]
        if not pending.get("applied"):
            try:
                slurm.apply(new.cluster)
            except SlurmError as exc:
                self._roll_back(row, str(exc))
                return True
            pending["applied"] = True
            drain = [n.name for n in targets if n.pool_type == COMPUTE and not n.dynamic]
            if drain:
                slurm.drain(drain, "node image update: recreating")
                for name in drain:
                    self._event(row, "VM_SLURM_DRAIN", f"{name} drained to move it to a new node image.")
            # every node to recreate shows UPDATING before the first one is replaced
            fresh_row = self.store.get(key_of(row)) or row
            recreating = {n.name for n in targets}
            self.store.set_fields(
                key_of(row), pending=pending, nodes=self._statuses(fresh_row, new, recreating=recreating)
            )
            if row.operation_id is not None and targets:
                self.store.set_progress(
                    row.operation_id, f"Recreating {len(targets)} node(s) on a new image."
                )
        for slot in targets:
            if slot.pool_type == COMPUTE and not slot.dynamic:
                if slurm.jobs_on([slot.name]):
                    continue  # drained: it is replaced once its jobs end
                slurm.recreate_node(slot.name)
            elif slot.pool_type == COMPUTE:  # a dynamic node boots the pool's image on its next power-up
                pass
            self._boot(row, slot, spec, realized, fresh=True)
            kind = "VM_REPORT_AND_REPLACEMENT" if slot.pool_type == COMPUTE else "VM_DELETION"
            what = (
                "login node recreated: sessions ended, boot disk erased"
                if slot.pool_type == LOGIN
                else "compute node replaced"
            )
            self._event(row, kind, f"{slot.name}: {what}; now on image {slot.image}.")
            done.append(slot.name)
            pending["recreated"] = done
            # its new instance is recorded with the step, so a crash right after cannot lose it
            fresh_row = self.store.get(key_of(row)) or row
            recreating = {n.name for n in targets} - set(done)
            nodes = self._statuses(fresh_row, new, recreating=recreating, fresh={slot.name})
            self.store.set_fields(key_of(row), pending=pending, nodes=nodes)
        waiting = {n.name for n in targets} - set(done)
        fresh_row = self.store.get(key_of(row)) or row
        if waiting:
            nodes = self._statuses(fresh_row, new, recreating=waiting)
            if nodes != fresh_row.nodes:
                self.store.set_fields(key_of(row), nodes=nodes)
            return True
        nodes = self._statuses(fresh_row, new)
        moved = self.store.apply_update(
            key_of(row), C.UPDATING, C.RUNNING, spec, realized=realized, pending=None, nodes=nodes
        )
        if moved:
            self._checked[row.uid] = time.monotonic()
            self._complete(row)
        return True

    def _roll_back(self, row: ClusterRow, error: str) -> None:
        """Slurm refused the new configuration: put the old one back; the cluster stays as it was."""
        try:
            self.slurm(row).apply(self.layout(row, row.spec, row.realized).cluster)
        except SlurmError as exc:
            log.error("cluster %s: restoring the previous configuration failed: %s", row_name(row), exc)
        message = f"Slurm refused the updated configuration; nothing was changed: {error}"
        self.store.transition(
            key_of(row), [C.UPDATING], state=C.RUNNING, pending=None, **self._failed(row, message)
        )

    def _delete_cluster(self, row: ClusterRow) -> bool:
        self.slurm(row).down()
        shutil.rmtree(cluster_dir(self.settings, row), ignore_errors=True)
        self._checked.pop(row.uid, None)
        if row.operation_id is not None:
            self.store.finish_operation(key_of(row), row.operation_id, response=dict(EMPTY), remove=True)
        else:
            self.store.remove(key_of(row))
        return False


def cluster_targets(settings: Settings, store: ClusterStore) -> SlurmTargets:
    """Routes CustomJobs labelled `trainworks-cluster: <id>` to that training cluster's Slurm (same project
    and location), in the partition labelled `trainworks-partition` or the cluster's default one."""

    def resolve(job: PlacementRequest) -> SlurmTarget | None:
        labels = job.labels or {}
        cluster_id = labels.get(CLUSTER_LABEL)
        if not cluster_id:
            return None
        row = store.get((job.project_number, job.location, cluster_id))
        if row is None:
            raise TaskError(f"the training cluster {cluster_id!r} (label {CLUSTER_LABEL}) does not exist")
        if C(row.state) not in (C.RUNNING, C.UPDATING):
            raise TaskError(f"the training cluster {row_name(row)} is {C(row.state).name}, not RUNNING")
        return SlurmTarget(LocalSlurm(cluster_dir(settings, row)).conf_path, labels.get(PARTITION_LABEL))

    return resolve


__all__ = ["ClusterController", "cluster_dir", "cluster_targets"]
