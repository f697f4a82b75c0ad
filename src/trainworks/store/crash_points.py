"""Crash points for the crash-safety tests: with TRAINWORKS_CRASH_AT=<point> the server SIGKILLs itself the
moment it reaches that point, as a power cut there would. Read once; unset, it does nothing.

Points (tests/system/test_chaos.py pins each one):
* replica-exit-recorded: a replica's end is recorded (with the job's decision, when it led to one), the
  decision is not acted on yet (kinds/custom_jobs/controller.py)
* job-running: a job has just been recorded as RUNNING (kinds/custom_jobs/controller.py)
* preemption-decided: a SPOT job's preemption is recorded, its notice is not sent
  (kinds/custom_jobs/controller.py; pinned by tests/system/test_preemption_storm.py)
* delete-recording: inside the transaction recording a delete request and its operation (jobs/store.py)
* delete-finishing: inside the transaction that removes a deleted job and completes its operation
* trial-stopping: a trial is marked stopped early, its job not yet cancelled
  (kinds/tuning_jobs/controller.py)
* trial-told: a trial's end is told to its study, not yet recorded on the trial
  (kinds/tuning_jobs/controller.py)
* cluster-operation: inside the transaction recording a cluster change and its operation
  (kinds/clusters/store.py)
* cluster-operation-ended: inside the transaction of a cluster change that ends an operation unfinished

Pinned by tests/system/test_crash_points_resources.py:
* persistent-resource-operation: inside the transaction recording a persistent resource change and its
  operation (kinds/persistent_resources/store.py)
* persistent-resource-operation-ended: inside the transaction of a persistent resource change that ends an
  operation (a failed provisioning or update, or one a delete aborts)
* persistent-resource-running: a resource is recorded RUNNING, its operation not yet completed
  (kinds/persistent_resources/controller.py)
* dataset-operation: inside the transaction recording a dataset change and its finished operation
  (kinds/datasets/store.py)
"""

from __future__ import annotations

import functools
import os
import signal

ENV = "TRAINWORKS_CRASH_AT"


@functools.cache
def _point() -> str:
    """The point named, read at the first crash point the process passes (not at import: a process forked
    from one that imported this module has an environment of its own)."""
    return os.environ.get(ENV, "").strip()


def crash_point(name: str) -> None:
    """Die here, without any clean-up, when TRAINWORKS_CRASH_AT names this point."""
    if name == _point():
        os.kill(os.getpid(), signal.SIGKILL)
