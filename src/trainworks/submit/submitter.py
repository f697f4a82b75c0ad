"""Submit a run: stage code and configuration, walk the candidate regions for capacity, follow the job.

`submit_run` is the whole client-side flow; everything it decides is computed by the pure planning and walk
functions, and everything it does goes through a :class:`JobTarget` (a Trainworks server or Vertex AI) and
that target's code store.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import yaml

from trainworks.client import ApiError
from trainworks.jobs.capacity_label import LEDGER_LABEL
from trainworks.kinds.custom_jobs.wire import CustomJob
from trainworks.submit import staging
from trainworks.submit.capacity import (
    Attempt,
    Backoff,
    CapacityLedger,
    CapacityProblem,
    Policy,
    Preflight,
    clamp_workers,
    walk,
)
from trainworks.submit.config import RunConfig
from trainworks.submit.follow import FollowSettings, FollowTimeout, JobFailed, job_error_message
from trainworks.submit.follow import follow_job as _follow_job
from trainworks.submit.plan import RunPlan, build_custom_job, make_run_id, plan_run
from trainworks.submit.targets import JobTarget, is_stockout_error, make_target

log = logging.getLogger("trainworks.submit")

CODE_LABEL = "trainworks-code-hash"
PENDING_STATES = frozenset({"JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_UNSPECIFIED"})


class SubmitEvents(Protocol):
    """What the submitter reports as it goes; the CLI draws it, the default logs it."""

    def info(self, message: str) -> None: ...

    def warning(self, message: str) -> None: ...

    def upload_started(self, total: int) -> None: ...

    def upload_progress(self, done: int) -> None: ...

    def state(self, name: str, state: str) -> None: ...

    def stalled(self, name: str, state: str, seconds: float) -> None: ...

    def log(self, entry: Mapping[str, Any]) -> None: ...


class LoggingEvents:
    def info(self, message: str) -> None:
        log.info("%s", message)

    def warning(self, message: str) -> None:
        log.warning("%s", message)

    def upload_started(self, total: int) -> None:
        log.info("uploading %d bytes of code", total)

    def upload_progress(self, done: int) -> None:
        pass

    def state(self, name: str, state: str) -> None:
        log.info("%s: %s", name, state)

    def stalled(self, name: str, state: str, seconds: float) -> None:
        log.warning("%s: still %s after %.0fs without a change", name, state, seconds)

    def log(self, entry: Mapping[str, Any]) -> None:
        log.info("[%s] %s", entry.get("task", ""), entry.get("text", ""))


@dataclass
class JobHandle:
    """Everything known about a submitted run, JSON-safe through :meth:`to_dict`."""

    target: str
    region: str
    job_name: str
    run_id: str
    plan: RunPlan
    ledger: CapacityLedger
    code: staging.StagedCode
    config_uri: str
    ledger_uri: str
    job: CustomJob = field(default_factory=CustomJob)

    @property
    def state(self) -> str:
        return _state(self.job)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "region": self.region,
            "jobName": self.job_name,
            "runId": self.run_id,
            "state": self.state,
            "plan": self.plan.to_dict(),
            "capacity": self.ledger.to_json(),
            "code": {"uri": self.code.uri, "sha256": self.code.digest, "uploaded": self.code.uploaded},
            "configUri": self.config_uri,
            "ledgerUri": self.ledger_uri,
        }


def _state(job: CustomJob) -> str:
    """The job's state; empty when it has none (before the job is known)."""
    return job.state.name if job.state else ""


def _machine_spec(plan: RunPlan) -> dict[str, Any]:
    spec: dict[str, Any] = {"machineType": plan.machine_type}
    if plan.accelerator_count > 0:
        spec["acceleratorType"] = plan.accelerator_type
        spec["acceleratorCount"] = plan.accelerator_count
    return spec


def run_preflight(
    target: JobTarget, regions: list[str], plan: RunPlan, ledger: CapacityLedger, events: SubmitEvents
) -> dict[str, Preflight]:
    """Ask each region for quota and free capacity; regions the target cannot ask are left out."""
    found: dict[str, Preflight] = {}
    for region in regions:
        try:
            answer = target.preflight(region, _machine_spec(plan), plan.worker_count)
        except ApiError as exc:
            if exc.status_code not in (404, 501):
                raise
            answer = None  # a server without the capacity extension
        if answer is None:
            events.info(f"{region}: no quota preflight on this target; the walk learns from create errors")
            continue
        found[region] = answer
        ledger.preflight.append(answer)
        limit = "unlimited" if answer.max_replicas is None else str(answer.max_replicas)
        status = answer.why_blocked() if answer.blocked else f"up to {limit} replicas of {plan.machine_type}"
        events.info(f"preflight {region}: {status}")
    return found


def _await_capacity(
    target: JobTarget,
    name: str,
    timeout: float,
    poll: float,
    wait: bool,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> CustomJob:
    """Until the job runs (or ends): a stock-out, seen in its waiting reason or error, or no start within
    `timeout`, cancels it and raises CapacityProblem. Without `wait`, one look only."""
    start = clock()
    while True:
        job = target.get_custom_job(name)
        state = _state(job)
        if state == "JOB_STATE_FAILED" and is_stockout_error(job.error):
            raise CapacityProblem("stockout", f"{name} failed: {job_error_message(job)}")
        if state not in PENDING_STATES:
            return job
        reason = target.waiting_reason(name)
        if reason and "stock-out" in reason:
            target.cancel_custom_job(name)
            raise CapacityProblem("stockout", f"{reason} (cancelled {name})")
        if not wait:
            return job
        if clock() - start >= timeout:
            target.cancel_custom_job(name)
            detail = f"; waiting: {reason}" if reason else ""
            raise CapacityProblem("stockout", f"not started within {timeout:g}s{detail} (cancelled {name})")
        sleep(poll)


def submit_run(
    cfg: RunConfig,
    *,
    target: JobTarget | None = None,
    wait: bool = True,
    events: SubmitEvents | None = None,
    now: datetime | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[str, str, JobHandle]:
    """Stage, walk the regions, submit and (with `wait`) follow. Returns `(run_id, job_name, handle)`.

    Raises CapacityExhausted when no region took the job, JobFailed when it ended FAILED or CANCELLED (with
    its error message), FollowTimeout when the wait ran out.
    """
    events = events or LoggingEvents()
    own_target = target is None
    target = target or make_target(cfg.target.kind, cfg.target.project, cfg.target.endpoint)
    try:
        return _submit(cfg, target, wait, events, now or datetime.now(UTC), clock, sleep)
    finally:
        if own_target:
            target.close()


def _submit(
    cfg: RunConfig,
    target: JobTarget,
    wait: bool,
    events: SubmitEvents,
    now: datetime,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> tuple[str, str, JobHandle]:
    store = target.code_store()
    code = staging.stage_code(
        store,
        cfg.package_dir,
        cfg.code_bucket,
        progress=events.upload_progress,
        on_total=events.upload_started,
    )
    events.info(
        f"code {code.uri} ({code.files} files): "
        + (f"uploaded {code.size} bytes" if code.uploaded else "unchanged, already staged")
    )
    run_id = make_run_id(cfg.name, now, code.digest)
    config_text = yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
    config_uri = staging.stage_text(store, staging.config_uri(cfg.code_bucket, run_id), config_text)
    base = plan_run(cfg, run_id=run_id, package_uri=code.uri, config_uri=config_uri)
    regions = list(cfg.regions)
    ledger = CapacityLedger(policy=cfg.capacity.policy)
    preflights = run_preflight(target, regions, base, ledger, events) if cfg.capacity.preflight else {}
    usable = [r for r in regions if not (r in preflights and preflights[r].blocked)]
    for region in regions:
        if region not in usable:
            why = preflights[region].why_blocked()
            ledger.attempts.append(Attempt(region, 0, "skipped", f"preflight: {why}"))
    if not usable:
        events.warning("preflight found no usable region; trying them all anyway")
        usable = regions

    def attempt(region: str, try_number: int) -> tuple[str, RunPlan, CustomJob]:
        granted, warning = clamp_workers(base.worker_count, preflights.get(region))
        if warning:
            ledger.warnings.append(warning)
            events.warning(warning)
        plan = base.with_workers(granted).in_region(region)
        pending = Attempt(region, try_number, "submitted", workers=granted)
        body = build_custom_job(
            plan,
            labels={
                **cfg.labels,
                LEDGER_LABEL: ledger.label_value(pending),
                CODE_LABEL: code.digest[: staging.HASH_LENGTH],
            },
            env=cfg.env,
            base_output_dir=cfg.base_output_dir,
            scheduling=cfg.scheduling,
        )
        events.info(
            f"submitting to {region} (try {try_number}): {granted} x {plan.machine_type}"
            + (f" with {plan.accelerator_count} x {plan.accelerator_type}" if plan.accelerator_count else "")
        )
        created = target.create_custom_job(region, body)
        name = created.name
        job = _await_capacity(
            target,
            name,
            cfg.capacity.provisioning_timeout,
            cfg.follow.poll_interval,
            wait,
            clock,
            sleep,
        )
        pending.job_name = name
        ledger.attempts.append(pending)
        return name, plan, job

    ledger_uri = staging.ledger_uri(cfg.code_bucket, run_id)
    try:
        job_name, plan, job = walk(
            usable,
            attempt,
            policy=Policy(cfg.capacity.policy),
            ledger=ledger,
            same_region_retries=cfg.capacity.same_region_retries,
            rounds=cfg.capacity.rounds,
            backoff=Backoff(cfg.capacity.backoff_seconds, cfg.capacity.backoff_max_seconds),
            sleep=sleep,
            on_event=events.info,
        )
    finally:
        staging.stage_text(store, ledger_uri, json.dumps(ledger.to_json(), indent=2) + "\n")
    handle = JobHandle(
        target=target.kind,
        region=plan.region,
        job_name=job_name,
        run_id=run_id,
        plan=plan,
        ledger=ledger,
        code=code,
        config_uri=config_uri,
        ledger_uri=ledger_uri,
        job=job,
    )
    events.info(f"submitted {job_name} in {plan.region}")
    if wait:
        settings = FollowSettings(
            wait_timeout=cfg.follow.wait_timeout,
            stall_grace=cfg.follow.stall_grace,
            poll_interval=cfg.follow.poll_interval,
            stream_logs=cfg.follow.stream_logs,
        )
        try:
            handle.job = _follow_job(target, job_name, settings, events, clock=clock, sleep=sleep)
        except (JobFailed, FollowTimeout) as exc:
            handle.job = target.get_custom_job(job_name)
            exc.handle = handle  # the caller still learns the run id and where the job ran
            raise
    return run_id, job_name, handle
