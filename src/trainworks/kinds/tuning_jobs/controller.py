"""Reconciles hyperparameter tuning jobs: asks the study for trials, runs each as a CustomJob, reads the
metrics the trials report, stops unpromising trials, and ends the job when its trials are done.

State lives in the database only: the tuning job and trial rows (unique per trial id and per study trial
number), the study in Optuna's tables, and the CustomJobs labelled with their trial. After a crash the
controller adopts what was half recorded (a study trial asked for but not recorded, a CustomJob created
but not recorded) instead of starting it again, so no trial is lost or duplicated.

Failed trials: with maxFailedTrialCount N > 0 the job fails once more than N trials are INFEASIBLE. With 0
(the service decides) it fails when its first 3 finished trials (or all of them, with fewer trials) are all
INFEASIBLE: the training code is then most likely broken, and the rest of the budget would be wasted.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainworks.config import Settings
from trainworks.contract.environment import task_name
from trainworks.jobs.enums import JobState
from trainworks.jobs.store import ACTIVE_STATES
from trainworks.kernel.changes import ChangeFeed
from trainworks.kernel.errors import ApiError
from trainworks.kernel.feed_loop import FeedLoop
from trainworks.kernel.status import Code, status_dict
from trainworks.kernel.wire import now_utc
from trainworks.kinds.custom_jobs.rules import PRIMARY
from trainworks.kinds.custom_jobs.service import CustomJobService
from trainworks.kinds.tuning_jobs.store import TuningStore
from trainworks.kinds.tuning_jobs.wire import FINISHED_TRIAL_STATES, LIVE_TRIAL_STATES, TrialState
from trainworks.store.crash_points import crash_point
from trainworks.store.tables import TuningJobRow, TuningTrialRow
from trainworks.tuning.metrics import Measurement, final_measurement, merge, read_reports
from trainworks.tuning.trial_jobs import METRIC_FILE, TUNING_JOB_LABEL, trial_job_body

if TYPE_CHECKING:
    from trainworks.tuning.search import Study

log = logging.getLogger(__name__)
S = JobState

T = TrialState
_UNCANCELLED = frozenset(int(s) for s in (S.JOB_STATE_QUEUED, S.JOB_STATE_PENDING, S.JOB_STATE_RUNNING))
SERVICE_FAILED_TRIALS = 3  # maxFailedTrialCount 0: this many finished trials, all failed, fail the job
STOPPING_SPECS = ("medianAutomatedStoppingSpec", "decayCurveStoppingSpec", "convexAutomatedStoppingSpec")


def _measurements(trial: TuningTrialRow) -> list[Measurement]:
    return [
        Measurement(int(m["step"]), float(m["value"]), float(m["timestamp"]))
        for m in trial.measurements or []
    ]


class TuningJobController(FeedLoop[TuningJobRow]):
    name = "tuning-job-controller"
    logger = log
    what = "tuning job"

    def __init__(
        self,
        settings: Settings,
        store: TuningStore,
        custom_jobs: CustomJobService,
        storage_url: str,
        changes: ChangeFeed | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.custom_jobs = custom_jobs
        self.storage_url = storage_url
        self._studies: dict[int, Study] = {}  # a cache: the study itself is in the database
        # Its rows follow their trials' CustomJobs (kernel/feed_loop.py); a job with a trial running is polled
        # for the reports, which come in a file, not through the database.
        super().__init__(
            settings.resync_seconds,
            settings.full_resync_seconds,
            changes or ChangeFeed(store.db),
            store.kind,
            [custom_jobs.store.kind],
        )
        self._asked: set[int] = set()  # jobs whose study's unrecorded suggestions were adopted

    def study(self, job: TuningJobRow) -> Study:
        study = self._studies.get(job.id)
        if study is None:
            # Optuna (and numpy) load with the first tuning job a server sees: ~0.2 s off each server start.
            from trainworks.tuning.search import Study

            study = Study.create_or_load(
                self.storage_url, f"tuning-job-{job.id}", job.spec["studySpec"], None
            )
            self._studies[job.id] = study
        return study

    def job_dir(self, job: TuningJobRow) -> Path:
        return self.settings.jobs_dir / f"tuning-{job.id}"

    def active_rows(self) -> list[TuningJobRow]:
        return self.store.active()

    def active_rows_among(self, ids: set[int]) -> list[TuningJobRow]:
        return self.store.active_among(ids)

    def forgotten(self, row_id: int) -> None:
        self._asked.discard(row_id)

    # -------------------------------------------------------------- one tuning job
    def reconcile(self, job: TuningJobRow) -> bool:
        state = S(job.state)
        if job.delete_operation_id is not None and state.terminal:
            self._finish_delete(job)
            return False
        if state in (S.JOB_STATE_QUEUED, S.JOB_STATE_PENDING):
            if self.store.transition(job.id, [state], state=S.JOB_STATE_RUNNING, start_time=now_utc()):
                job.state = int(S.JOB_STATE_RUNNING)
            state = S.JOB_STATE_RUNNING
        trials = self.store.trials(job.id)
        reporting = self._sync(job, trials)
        if job.outcome is not None or state == S.JOB_STATE_CANCELLING:
            self._wind_down(job, trials)  # its trials' ends come as changes of their CustomJobs
            moving = False
        else:  # in motion: trials recorded now, started on the next pass
            moving = self._advance(job, trials)
        self.poll(job.id, reporting)
        return moving

    def _decide(self, job: TuningJobRow, state: JobState, error: dict[str, Any] | None) -> None:
        outcome = {"state": int(state), "error": error}
        if self.store.transition(job.id, ACTIVE_STATES, outcome=outcome):
            job.outcome = outcome

    # -------------------------------------------------------------- trials
    def _sync(self, job: TuningJobRow, trials: list[TuningTrialRow]) -> bool:
        """Start requested trials and follow running ones to their end; True while one runs (its reports are
        read on every pass)."""
        spec = job.spec["studySpec"]
        metric = spec["metrics"][0]
        maximize = metric.get("goal") == "MAXIMIZE"
        selection = spec.get("measurementSelectionType", "LAST_MEASUREMENT")
        stopping = any(key in spec for key in STOPPING_SPECS)
        children: dict[int, Any] | None = None
        running = False
        for trial in trials:
            if trial.custom_job_id is not None and trial.state not in LIVE_TRIAL_STATES:
                self.unfollow(self.custom_jobs.store.kind, trial.custom_job_id)
            if trial.state not in LIVE_TRIAL_STATES:
                continue
            if trial.custom_job_id is None:
                if children is None:  # CustomJobs created before a crash but not recorded
                    children = {
                        int(c.labels.get("trainworks-trial", "0")): c
                        for c in self.custom_jobs.jobs_labelled(TUNING_JOB_LABEL, str(job.id))
                    }
                self._start_trial(job, trial, children.get(trial.trial_id))
                if trial.custom_job_id is not None:  # its changes name this job from now on
                    self.follow(self.custom_jobs.store.kind, trial.custom_job_id, job.id)
                continue
            self.follow(self.custom_jobs.store.kind, trial.custom_job_id, job.id)
            child = self.custom_jobs.job_row(trial.custom_job_id)
            if child is None:
                self._end_trial(job, trial, None, "The CustomJob of this trial was deleted.")
                continue
            if trial.stopped_early and child.state in _UNCANCELLED:
                self._stop_early(job, trial, child)  # marked stopped, but a crash came before the cancel
            run_dir = self.settings.jobs_dir / str(child.id) / task_name(*PRIMARY)
            known = _measurements(trial)
            measurements = merge(known, read_reports(run_dir / METRIC_FILE, metric["metricId"]))
            if len(measurements) != len(known):
                self.store.update_trial(
                    trial.id,
                    measurements=[
                        {"step": m.step, "value": m.value, "timestamp": m.timestamp} for m in measurements
                    ],
                )
                trial.measurements = [
                    {"step": m.step, "value": m.value, "timestamp": m.timestamp} for m in measurements
                ]
                study = self.study(job)
                started = (trial.start_time or now_utc()).timestamp()
                for position, m in enumerate(measurements[len(known) :], start=len(known) + 1):
                    if study.uses_elapsed_duration:  # the stopping rule compares elapsed milliseconds
                        step = max(0, int((m.timestamp - started) * 1000))
                    else:  # hypertune writes step 0 when the code gives none: use the report's position
                        step = m.step if m.step > 0 else position
                    study.report(trial.study_number, step, m.value)
                if stopping and trial.state == T.ACTIVE and study.should_stop(trial.study_number):
                    self._stop_early(job, trial, child)
            if S(child.state).terminal:
                final = final_measurement(measurements, selection, maximize)
                if final is not None and (child.state == int(S.JOB_STATE_SUCCEEDED) or trial.stopped_early):
                    self._end_trial(job, trial, final, None)
                else:
                    reason = (child.error or {}).get("message") or (
                        f"The trial reported no measurement of {metric['metricId']}."
                    )
                    self._end_trial(job, trial, None, reason)
                self.unfollow(self.custom_jobs.store.kind, child.id)
            else:
                running |= child.state == int(S.JOB_STATE_RUNNING)
        return running

    def _start_trial(self, job: TuningJobRow, trial: TuningTrialRow, existing: Any) -> None:
        if existing is not None:
            child_id = existing.id
        else:
            body = trial_job_body(
                job.display_name, job.spec["trialJobSpec"], job.id, trial.trial_id, trial.args
            )
            try:
                created = self.custom_jobs.create(job.project_number, job.location, body)
            except ApiError as exc:
                self._end_trial(job, trial, None, f"The trial's CustomJob was rejected: {exc.message}")
                return
            child_id = int(created["name"].rsplit("/", 1)[-1])
        self.store.update_trial(trial.id, custom_job_id=child_id, state=T.ACTIVE, start_time=now_utc())
        trial.custom_job_id, trial.state = child_id, T.ACTIVE

    def _stop_early(self, job: TuningJobRow, trial: TuningTrialRow, child: Any) -> None:
        # Marked first: its cancelled job then still counts as a stopped trial with its measurements (not as
        # a failed one) should a crash come between the two; the cancel is repeated after a restart.
        self.store.update_trial(trial.id, state=T.STOPPING, stopped_early=True)
        trial.state, trial.stopped_early = T.STOPPING, True
        crash_point("trial-stopping")
        with contextlib.suppress(ApiError):  # it may have finished meanwhile
            self.custom_jobs.cancel(job.project_number, job.location, str(child.id))

    def _end_trial(
        self, job: TuningJobRow, trial: TuningTrialRow, final: Measurement | None, reason: str | None
    ) -> None:
        study = self.study(job)
        metric_id = job.spec["studySpec"]["metrics"][0]["metricId"]
        started = trial.start_time or now_utc()
        # The study is told first (telling twice is a no-op): a crash before the trial row is updated ends
        # the trial again on the next pass, while the other order left the study's trial running for ever.
        if final is not None:
            study.complete(trial.study_number, final.value)
            crash_point("trial-told")
            elapsed = max(0.0, final.timestamp - started.timestamp()) if final.timestamp else None
            self.store.update_trial(
                trial.id,
                state=T.SUCCEEDED,
                final_measurement=final.wire(metric_id, elapsed),
                end_time=now_utc(),
            )
            trial.state = T.SUCCEEDED
        else:
            study.fail(trial.study_number)
            crash_point("trial-told")
            self.store.update_trial(
                trial.id, state=T.INFEASIBLE, infeasible_reason=reason, end_time=now_utc()
            )
            trial.state = T.INFEASIBLE

    # -------------------------------------------------------------- the job
    def _advance(self, job: TuningJobRow, trials: list[TuningTrialRow]) -> bool:
        """Ask the study for the trials the budget allows, or decide the job's end; True when it recorded
        trials or decided (the next pass starts them, or winds the job down)."""
        max_trials = int(job.spec.get("maxTrialCount", 0))
        parallel = int(job.spec.get("parallelTrialCount", 1))
        max_failed = int(job.spec.get("maxFailedTrialCount", 0) or 0)
        finished = [t for t in trials if t.state in FINISHED_TRIAL_STATES]
        failed = [t for t in finished if t.state == T.INFEASIBLE]
        if (max_failed > 0 and len(failed) > max_failed) or (
            max_failed == 0
            and failed
            and len(failed) == len(finished) >= min(SERVICE_FAILED_TRIALS, max_trials)
        ):
            reason = failed[-1].infeasible_reason or "no measurement"
            self._decide(
                job,
                S.JOB_STATE_FAILED,
                status_dict(Code.INVALID_ARGUMENT, f"{len(failed)} trials failed. The last one: {reason}"),
            )
            return job.outcome is not None
        study = self.study(job)
        live = sum(1 for t in trials if t.state in LIVE_TRIAL_STATES)
        recorded = {t.study_number for t in trials}
        total = before = len(trials)
        # Asked for before a crash (or a failed record), never recorded: adopt, do not ask again. Read once
        # per job and controller, and after a record that failed: the study's trials are a query of their own.
        for pending in [] if job.id in self._asked else study.pending():
            if (
                pending.number not in recorded
                and total < max_trials
                and self._record(job, total + 1, pending)
            ):
                total, live = total + 1, live + 1
                recorded.add(pending.number)
        self._asked.add(job.id)
        while live < parallel and total < max_trials and not study.exhausted():
            if not self._record(job, total + 1, study.suggest()):
                self._asked.discard(job.id)
                break
            total, live = total + 1, live + 1
        if not live and (total >= max_trials or study.exhausted()):
            succeeded = [t for t in trials if t.state == T.SUCCEEDED]
            if succeeded:
                self._decide(job, S.JOB_STATE_SUCCEEDED, None)
            else:
                self._decide(
                    job, S.JOB_STATE_FAILED, status_dict(Code.INVALID_ARGUMENT, "No trial succeeded.")
                )
        return total > before or job.outcome is not None

    def _record(self, job: TuningJobRow, trial_id: int, suggestion: Any) -> bool:
        row = TuningTrialRow(
            tuning_job_id=job.id,
            trial_id=trial_id,
            study_number=suggestion.number,
            state=T.REQUESTED,
            parameters=list(suggestion.parameters),
            args=list(suggestion.args),
            measurements=[],
        )
        return self.store.add_trial(row)

    def _wind_down(self, job: TuningJobRow, trials: list[TuningTrialRow]) -> bool:
        """Stop every running trial, then give the job its final state."""
        live = [t for t in trials if t.state in LIVE_TRIAL_STATES]
        for trial in live:
            if trial.custom_job_id is None:
                self._end_trial(job, trial, None, "The tuning job ended before this trial started.")
                continue
            child = self.custom_jobs.job_row(trial.custom_job_id)
            if (
                child is not None
                and not S(child.state).terminal
                and child.state != int(S.JOB_STATE_CANCELLING)
            ):
                with contextlib.suppress(ApiError):
                    self.custom_jobs.cancel(job.project_number, job.location, str(child.id))
        if any(t.state in LIVE_TRIAL_STATES and t.custom_job_id is not None for t in live):
            return True
        outcome = job.outcome or {
            "state": int(S.JOB_STATE_CANCELLED),
            "error": status_dict(Code.CANCELLED, "CANCELED"),
        }
        self.store.transition(
            job.id,
            ACTIVE_STATES,
            state=S(outcome["state"]),
            error=outcome.get("error"),
            end_time=now_utc(),
            outcome=None,
        )
        self._studies.pop(job.id, None)
        return False

    def _finish_delete(self, job: TuningJobRow) -> None:
        for child in self.custom_jobs.jobs_labelled(TUNING_JOB_LABEL, str(job.id)):
            shutil.rmtree(self.settings.jobs_dir / str(child.id), ignore_errors=True)
            self.custom_jobs.remove_job(child.id)
        shutil.rmtree(self.job_dir(job), ignore_errors=True)
        self.store.remove(job.id, finish_operation=job.delete_operation_id)
        self._studies.pop(job.id, None)
