"""Following a submitted job: poll until it ends, report stalls, stream its logs meanwhile.

A job that is FAILED or CANCELLED raises :class:`JobFailed` carrying the job's own error message; a wait that
runs out raises :class:`FollowTimeout` and leaves the job running.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from trainworks.kernel.client import TERMINAL_STATES
from trainworks.kinds.custom_jobs.wire import CustomJob
from trainworks.submit.targets import JobTarget

FAILED_STATES = frozenset({"JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"})
STARTED_STATES = frozenset({"JOB_STATE_RUNNING"}) | TERMINAL_STATES


class JobFailed(Exception):
    def __init__(self, name: str, state: str, message: str) -> None:
        super().__init__(f"CustomJob {name} ended {state}: {message or 'no error message'}")
        self.name = name
        self.state = state
        self.error_message = message
        self.handle: Any = None


class FollowTimeout(Exception):
    def __init__(self, name: str, state: str, seconds: float) -> None:
        super().__init__(
            f"CustomJob {name} is still {state} after waiting {seconds:g}s; it keeps running on the server"
        )
        self.name = name
        self.state = state
        self.handle: Any = None


@dataclass(frozen=True)
class FollowSettings:
    wait_timeout: float = 0.0  # seconds; 0 waits for ever
    stall_grace: float = 1800.0  # no state change for this long is reported (once per grace period)
    poll_interval: float = 5.0
    stream_logs: bool = True


class FollowEvents(Protocol):
    def state(self, name: str, state: str) -> None: ...

    def stalled(self, name: str, state: str, seconds: float) -> None: ...

    def log(self, entry: Mapping[str, Any]) -> None: ...


class _LogPump:
    """Copies the job's log stream to the events in a background thread (the stream ends with the job)."""

    def __init__(self, target: JobTarget, name: str, events: FollowEvents) -> None:
        self.error: Exception | None = None
        self.thread = threading.Thread(target=self._run, args=(target, name, events), daemon=True)
        self.thread.start()

    def _run(self, target: JobTarget, name: str, events: FollowEvents) -> None:
        try:
            stream = target.stream_logs(name)
            for entry in stream or ():
                events.log(entry)
        except Exception as exc:  # noqa: BLE001 - logs are a convenience: the state poll decides the outcome
            self.error = exc

    def drain(self, timeout: float) -> None:
        self.thread.join(timeout)


def job_error_message(job: CustomJob) -> str:
    return job.error.message if job.error is not None else ""


def follow_job(
    target: JobTarget,
    name: str,
    settings: FollowSettings,
    events: FollowEvents,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> CustomJob:
    """Poll `name` until it reaches a terminal state and return the final job."""
    pump = _LogPump(target, name, events) if settings.stream_logs else None
    start = last_change = clock()
    last_state = ""
    stall_reported_at = 0.0
    while True:
        job = target.get_custom_job(name)
        state = job.state.name
        now = clock()
        if state != last_state:
            events.state(name, state)
            last_state, last_change, stall_reported_at = state, now, 0.0
        if state in TERMINAL_STATES:
            break
        quiet = now - last_change
        if (
            settings.stall_grace > 0
            and quiet >= settings.stall_grace
            and quiet - stall_reported_at >= (settings.stall_grace)
        ):
            events.stalled(name, state, quiet)
            stall_reported_at = quiet
        if settings.wait_timeout > 0 and now - start >= settings.wait_timeout:
            raise FollowTimeout(name, state, settings.wait_timeout)
        sleep(settings.poll_interval)
    if pump is not None:
        pump.drain(timeout=30.0)  # the server ends the stream once the job has ended and its logs are out
    if state in FAILED_STATES:
        raise JobFailed(name, state, job_error_message(job))
    return job
