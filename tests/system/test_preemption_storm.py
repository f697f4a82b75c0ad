"""Preemption storm: SPOT jobs under random preemption all finish with the result of an uninterrupted run.

A real server runs 50 SPOT jobs (a fifth of them gangs: a chief and a worker pool of two) of
examples/spot_sgd_train.py, a pure-Python trainer that checkpoints and resumes. Preemptions come two ways:
a seeded storm thread fires the admin `:preempt` extension at running jobs at random moments (at start-up,
mid-run, near the end, twice in a row, at one replica of a gang or at all of it, and at jobs that are not
running, which must be refused), and a second region has a random preemption rate of its own. Every job must
succeed with model weights byte-identical to an uninterrupted run, resume from its last checkpoint, restart
its replicas together, and leave no process behind. A smaller storm runs examples/checkpointed_train.py
(torch) the same way. The races the storm found are pinned by tests that drive the server's own controller
pass by pass, and one crashes a real server between deciding a preemption and delivering it (see
"Regressions" below).

TRAINWORKS_STORM_JOBS sets the size of the storm (default 50), TRAINWORKS_STORM_SEED its seed (default:
from the clock; printed, and named in every failure).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.support.in_process import in_process_services
from tests.support.jobs import MACHINE, job, python_pool
from tests.support.logs import replica_output
from tests.support.paths import EXAMPLES
from tests.support.server import LOCATION, PROJECT, TERMINAL, ServerProcess, wait_for, wait_job
from trainworks.config import Settings
from trainworks.kinds.custom_jobs.rules import MAX_PREEMPTION_RESTARTS, preemption_exposure
from trainworks.wiring import Services

SGD = EXAMPLES / "spot_sgd_train.py"
TORCH = EXAMPLES / "checkpointed_train.py"
BUCKET = "storm-bucket"
ADMIN_LOCATION = LOCATION  # no random preemption there: only the storm thread's
RANDOM_LOCATION = "europe-west4"  # the region's own random preemption rate, and nothing else
# Per replica-hour: 0.55 preemptions in a 5 s run, 1.1 in a 10 s one on a loaded host. Seven (the stock-out)
# stay a rare tail; should it come, the job must end exactly as Vertex documents it (see check_outcome).
RANDOM_RATE_PER_HOUR = 400.0
STEPS, EVERY, STEP_SECONDS = 100, 4, 0.05
ARRIVAL_GAP = 0.2  # seconds between two submissions, at most (drawn at random): jobs arrive over time
TORCH_STEPS, TORCH_EVERY = 40, 5

SEED = int(os.environ.get("TRAINWORKS_STORM_SEED") or time.time_ns() % 1_000_000)
STORM_JOBS = int(os.environ.get("TRAINWORKS_STORM_JOBS") or 50)
CONTEXT = f"(TRAINWORKS_STORM_SEED={SEED})"


def load_example(path: Path) -> ModuleType:
    """The example script as a module, to run its own code in-process for the uninterrupted reference."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def storm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("storm")
    inventory = root / "inventory.yaml"
    inventory.write_text(
        "regions:\n"
        f"  {ADMIN_LOCATION}: {{elastic: true}}\n"
        f"  {RANDOM_LOCATION}: {{elastic: true, preemption_rate_per_hour: {RANDOM_RATE_PER_HOUR}}}\n"
    )
    # The trainers do not catch SIGTERM, so the notice only bounds a replica that is still starting up.
    args = ["--inventory", str(inventory), "--preemption-notice", "1"]
    proc = ServerProcess(home=root / "home", args=args).start()
    try:
        with proc.client() as client:  # outputs go to a bucket that exists, as on Cloud Storage
            made = client.post("/storage/v1/b", params={"project": PROJECT}, json={"name": BUCKET})
            assert made.status_code == 200, made.text
        yield proc
    finally:
        proc.stop()


# ------------------------------------------------------------------------------------------------ jobs
@dataclass
class StormJob:
    index: int
    location: str
    seed: int
    workers: int  # replicas of workerpool1 beside the chief
    planned: int  # admin preemptions to aim for (random-rate jobs: 0)
    script: Path = SGD
    name: str = ""
    fired: set[int] = field(default_factory=set)  # attempts the storm already preempted (<0: by a probe)
    moment: tuple[int, float] | None = None  # (attempt, monotonic time) of its next preemption

    @property
    def run(self) -> str:
        return f"{self.script.stem}-{self.index}"

    @property
    def job_id(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def tasks(self) -> list[str]:
        return ["workerpool0-0", *(f"workerpool1-{i}" for i in range(self.workers))]

    def body(self, args: list[str]) -> dict[str, Any]:
        container = {"imageUri": "python:3.11", "command": [sys.executable, str(self.script)], "args": args}
        pools = [{"machineSpec": MACHINE, "replicaCount": "1", "containerSpec": container}]
        if self.workers:
            pools.append(
                {"machineSpec": MACHINE, "replicaCount": str(self.workers), "containerSpec": container}
            )
        return {
            "displayName": self.run,
            "jobSpec": {
                "workerPoolSpecs": pools,
                "scheduling": {"strategy": "SPOT"},
                "baseOutputDirectory": {"outputUriPrefix": f"gs://{BUCKET}/{self.run}"},
            },
        }


def sgd_args(seed: int, step_seconds: float = STEP_SECONDS) -> list[str]:
    return [
        f"--seed={seed}",
        f"--steps={STEPS}",
        f"--checkpoint-every={EVERY}",
        f"--step-seconds={step_seconds}",
    ]


TORCH_ARGS = ["--steps", str(TORCH_STEPS), "--checkpoint-every", str(TORCH_EVERY), "--step-seconds", "0.05"]


def plan_storm(rng: random.Random, count: int) -> list[StormJob]:
    """40 % of the jobs sit in the random-rate region (single replicas: a gang of three would roll three times
    as often); the rest get 0-6 admin preemptions each, and a fifth of all jobs are gangs of three."""
    jobs = []
    for index in range(count):
        if index < count * 2 // 5:
            jobs.append(StormJob(index, RANDOM_LOCATION, rng.randrange(10**6), 0, 0))
        else:
            workers = 2 if index >= count - count // 5 else 0
            planned = rng.choices([0, 1, 2, 3, MAX_PREEMPTION_RESTARTS], weights=[1, 3, 3, 2, 1])[0]
            jobs.append(StormJob(index, ADMIN_LOCATION, rng.randrange(10**6), workers, planned))
    return jobs


def parent(location: str) -> str:
    return f"projects/{PROJECT}/locations/{location}"


def get_status(client: httpx.Client, name: str) -> dict[str, Any]:
    response = client.get(f"/trainworks/v1/{name}/status")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def job_states(client: httpx.Client, locations: set[str]) -> dict[str, dict[str, Any]]:
    """Every job of the locations by name, through the list call (one request per page)."""
    jobs: dict[str, dict[str, Any]] = {}
    for location in locations:
        token = ""
        while True:
            params: dict[str, Any] = {"pageSize": 100, **({"pageToken": token} if token else {})}
            page = client.get(f"/v1/{parent(location)}/customJobs", params=params)
            assert page.status_code == 200, page.text
            body = page.json()
            jobs.update({j["name"]: j for j in body.get("customJobs", [])})
            token = body.get("nextPageToken", "")
            if not token:
                break
    return jobs


def submit(
    client: httpx.Client,
    jobs: list[StormJob],
    args: Callable[[StormJob], list[str]],
    rng: random.Random | None = None,
) -> None:
    """Create the jobs; with `rng`, one at a time at random intervals, as jobs arrive in a real queue (and
    as the controller, starting replicas one after another, would otherwise fall seconds behind)."""
    for target in jobs:
        if rng is not None:
            time.sleep(rng.uniform(0.0, ARRIVAL_GAP))
        created = client.post(f"/v1/{parent(target.location)}/customJobs", json=target.body(args(target)))
        assert created.status_code == 200, created.text
        target.name = created.json()["name"]


def wait_all(client: httpx.Client, jobs: list[StormJob], timeout: float) -> dict[str, dict[str, Any]]:
    names = {j.name for j in jobs}

    def done() -> dict[str, dict[str, Any]] | None:
        states = job_states(client, {j.location for j in jobs})
        finished = {n: states[n] for n in names if states[n]["state"] in TERMINAL}
        return finished if len(finished) == len(names) else None

    return wait_for(done, timeout=timeout, interval=0.5, what=f"all {len(jobs)} jobs to finish")  # type: ignore[no-any-return]


# ----------------------------------------------------------------------------------------------- storm
@dataclass
class Tally:
    accepted: int = 0  # 200, and some replica was marked preempted
    doubles: int = 0  # a second preemption fired right after an accepted one
    refused: int = 0  # 400: the job (or the named replica) was not running any more, as promised
    empty: int = 0  # 200 with nothing preempted: the attempt ended between the check and the write
    probes: int = 0  # preemptions fired on purpose at queued, pending or finished jobs
    probes_landed: int = 0  # ...of which the job had started running meanwhile (it counts as a preemption)
    unexpected: list[str] = field(default_factory=list)  # anything else: a failure


class Storm(threading.Thread):
    """Fires the admin preemption at random running jobs at random moments until told to stop."""

    def __init__(
        self, server: ServerProcess, jobs: list[StormJob], rng: random.Random, window: float
    ) -> None:
        super().__init__(name="preemption-storm", daemon=True)
        self.server = server
        self.everyone = jobs
        self.targets = [j for j in jobs if j.planned > 0]
        self.rng = rng
        self.window = window  # the seconds an uninterrupted run takes: moments are drawn from it
        self.tally = Tally()
        self.halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.server.client() as client:
                while not self.halt.is_set():
                    self._round(client)
                    self.halt.wait(0.05)
        except BaseException as exc:  # reported by the test, not lost on this thread
            self.error = exc

    def _round(self, client: httpx.Client) -> None:
        jobs = job_states(client, {j.location for j in self.everyone})
        states = {name: j["state"] for name, j in jobs.items()}
        if self.rng.random() < 0.1:
            self._probe(client, states)
        due = [
            j for j in self.targets if states.get(j.name) == "JOB_STATE_RUNNING" and len(j.fired) < j.planned
        ]
        self.rng.shuffle(due)
        for target in due:
            if target.moment is not None and time.monotonic() < target.moment[1]:
                continue
            status = get_status(client, target.name)
            attempt = status["attempt"]
            if status["state"] != "JOB_STATE_RUNNING" or attempt in target.fired:
                continue
            if target.moment is None or target.moment[0] != attempt:
                # At start-up (before the trainer has even started), mid-run, or near the end.
                delay = 0.0 if self.rng.random() < 0.2 else self.rng.uniform(0.0, self.window)
                target.moment = (attempt, time.monotonic() + delay)
                if delay > 0:
                    continue
            target.fired.add(attempt)
            replicas = [r["task"] for r in status["replicas"] if r["attempt"] == attempt]
            replica = self.rng.choice([None, *replicas]) if len(replicas) > 1 else None
            # Both name the attempt they aim at: the job may have restarted meanwhile (then it is refused).
            if self._fire(client, target, replica, attempt=attempt) and self.rng.random() < 0.15:
                self.tally.doubles += 1  # two preemptions in quick succession
                self._fire(client, target, self.rng.choice([None, *replicas]), attempt=attempt, double=True)

    def _probe(self, client: httpx.Client, states: dict[str, str]) -> None:
        """A preemption of a job that is not running must be refused cleanly. A queued or pending job may
        start running meanwhile and take it, so only jobs with preemptions left to spend are probed so."""
        idle = [
            j
            for j in self.everyone
            if states.get(j.name) in TERMINAL
            or (states.get(j.name) in ("JOB_STATE_QUEUED", "JOB_STATE_PENDING") and len(j.fired) < j.planned)
        ]
        if not idle:
            return
        target = self.rng.choice(idle)
        self.tally.probes += 1
        if self._fire(client, target, None, probe=True):
            target.fired.add(-len(target.fired) - 1)  # it started meanwhile: the preemption counts

    def _fire(
        self,
        client: httpx.Client,
        target: StormJob,
        replica: str | None,
        probe: bool = False,
        double: bool = False,
        attempt: int | None = None,
    ) -> bool:
        """True when the preemption took (some replica was marked)."""
        body: dict[str, Any] = {"replica": replica} if replica else {}
        if attempt is not None:
            body["attempt"] = attempt
        answer = client.post(f"/trainworks/v1/{target.name}:preempt", json=body)
        if answer.status_code == 200:
            if not answer.json().get("preempted"):
                self.tally.empty += 1
                return False
            if probe:
                self.tally.probes_landed += 1
            elif not double:
                self.tally.accepted += 1
            return True
        error = answer.json().get("error", {}) if answer.status_code == 400 else {}
        violations = [v["field"] for d in error.get("details", []) for v in d.get("fieldViolations", [])]
        # Not running any more; or the named replica ended meanwhile (a worker that finished its part).
        if error.get("status") == "FAILED_PRECONDITION" or (
            replica is not None and violations == ["replica"]
        ):
            self.tally.refused += 1
            return False
        self.tally.unexpected.append(f"{target.name} ({replica}): {answer.status_code} {answer.text}")
        return False


# ------------------------------------------------------------------------------------------ verification
def stdout_of(server: ServerProcess, target: StormJob, task: str) -> str:
    return replica_output(server.home / "jobs" / target.job_id / task)


def output(server: ServerProcess, target: StormJob, name: str) -> bytes:
    return (server.home / "buckets" / BUCKET / target.run / "model" / name).read_bytes()


def starts_of(log: str) -> list[str]:
    """The lines each run of an example logs first (a run killed before its first line shows none)."""
    return [line for line in log.splitlines() if line.startswith(("fresh start", "resumed from step"))]


def check_resumes(log: str, every: int, steps: int, shared: bool = False) -> list[int]:
    """The steps a replica resumed from, in order. Each must be its last checkpoint, or the next one when the
    run was killed between the rename and the line that reports it (`shared`: replicas that write one
    checkpoint file may resume from another's later one). A fresh start after a checkpoint would mean one was
    lost; a torn one would have crashed the trainer."""
    last, resumed = 0, []
    for line in log.splitlines():
        if line.startswith("checkpoint "):
            last = int(line.split()[1])
        elif line.startswith("resumed from step "):
            step = int(line.split()[3])
            allowed = step >= last if shared else step in (last, min(last + every, steps))
            assert allowed and (step % every == 0 or step == steps), f"resumed from {step} after {last}"
            resumed.append(step)
            last = step
        elif line.startswith("fresh start"):
            assert last == 0, f"a fresh start after checkpoint {last}: a checkpoint was lost"
    return resumed


def check_gang(status: dict[str, Any], replicas: int, last_exit: int = 0) -> None:
    """Every attempt ran all replicas, none of an attempt started before all of the one before had ended, and
    no attempt was restarted after its chief had finished (the trainers do not catch SIGTERM: an exit 0 of
    theirs is a finished run)."""
    by_attempt: dict[int, list[dict[str, Any]]] = {}
    for replica in status["replicas"]:
        by_attempt.setdefault(replica["attempt"], []).append(replica)
    assert sorted(by_attempt) == list(range(status["attempt"] + 1)), status
    for attempt, rows in by_attempt.items():
        assert len(rows) == replicas, f"attempt {attempt}: {rows}"
        assert all(r["phase"] in ("exited", "lost") and "endTime" in r for r in rows), rows
        chief = next(r for r in rows if r["task"] == "workerpool0-0")
        if attempt < status["attempt"]:
            assert chief.get("exitCode") != 0, f"restarted after its chief had finished: {rows}"
        else:
            assert chief.get("exitCode") == last_exit, rows
        later = by_attempt.get(attempt + 1, [])
        if later:
            ended = max(stamp(r["endTime"]) for r in rows)
            started = min(stamp(r["startTime"]) for r in later)
            assert ended <= started, f"attempt {attempt + 1} started before attempt {attempt} ended: {rows}"


def check_outcome(target: StormJob, final: dict[str, Any], status: dict[str, Any]) -> bool:
    """True when the job succeeded. The one other end allowed: a job of the random-rate region that drew
    seven preemptions fails with Vertex's stock-out (admin preemptions are capped at six)."""
    restarts = status["restarts"]
    assert {r["kind"] for r in restarts} <= {"preemption"}, f"{target.name}: {restarts} {CONTEXT}"
    if final["state"] == "JOB_STATE_SUCCEEDED":
        assert len(restarts) <= (
            MAX_PREEMPTION_RESTARTS if target.location == RANDOM_LOCATION else target.planned
        )
        return True
    stockout = (
        target.location == RANDOM_LOCATION
        and final["state"] == "JOB_STATE_FAILED"
        and final["error"]["code"] == 8
        and "STOCKOUT" in final["error"]["message"]
        and len(restarts) == MAX_PREEMPTION_RESTARTS
    )
    assert stockout, f"job lost: {target.name}: {final.get('state')} {final.get('error')} {CONTEXT}"
    return False


def stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def live_replica_processes(server: ServerProcess) -> list[str]:
    """Command lines of processes still running out of this server's job folders."""
    jobs_dir = str(server.home / "jobs").encode()
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if jobs_dir in cmdline:
            alive.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return alive


def check_nothing_left(server: ServerProcess, statuses: dict[str, dict[str, Any]]) -> None:
    leftovers = [r for s in statuses.values() for r in s["replicas"] if r["phase"] in ("running", "planned")]
    assert leftovers == [], leftovers
    assert live_replica_processes(server) == []
    server_log = server.log_path.read_text(errors="replace")
    assert "Traceback" not in server_log, server_log[-4000:]


def check_sgd_logs(server: ServerProcess, target: StormJob, status: dict[str, Any]) -> list[int]:
    """Every replica's log: no more runs than attempts, each resumed from its last checkpoint. The steps
    resumed from (> 0) across the replicas."""
    resumed: list[int] = []
    for task in target.tasks:
        log = stdout_of(server, target, task)
        assert len(starts_of(log)) <= status["attempt"] + 1, f"{target.name} {task}: more runs than attempts"
        try:
            resumed += [step for step in check_resumes(log, EVERY, STEPS) if step > 0]
        except AssertionError as exc:
            raise AssertionError(f"{target.name} {task}: {exc} {CONTEXT}\n{log}") from exc
    return resumed


def sgd_reference(module: ModuleType, tmp: Path, seed: int, workers: int) -> bytes:
    """model.json of an uninterrupted run of the same script: every rank in turn, workers first."""
    base = tmp / f"reference-{seed}-{workers}"
    cluster: dict[str, list[str]] = {"workerpool0": ["chief:1"]}
    if workers:
        cluster["workerpool1"] = [f"worker{i}:1" for i in range(workers)]
    for pool, index in [*(("workerpool1", i) for i in range(workers)), ("workerpool0", 0)]:
        environ = {
            "AIP_CHECKPOINT_DIR": str(base / "checkpoints"),
            "AIP_MODEL_DIR": str(base / "model"),
            "CLUSTER_SPEC": json.dumps({"cluster": cluster, "task": {"type": pool, "index": index}}),
        }
        with contextlib.redirect_stdout(io.StringIO()):
            module.main(sgd_args(seed, step_seconds=0.0), environ)
    return (base / "model" / "model.json").read_bytes()


# -------------------------------------------------------------------------------------------------- tests
def test_storm_of_spot_jobs_all_end_exactly_like_uninterrupted_runs(
    storm_server: ServerProcess, tmp_path: Path
) -> None:
    print(f"\npreemption storm: TRAINWORKS_STORM_SEED={SEED} TRAINWORKS_STORM_JOBS={STORM_JOBS}")
    rng = random.Random(SEED)
    jobs = plan_storm(rng, STORM_JOBS)
    started = time.monotonic()
    storm = Storm(storm_server, jobs, random.Random(rng.random()), window=STEPS * STEP_SECONDS)
    with storm_server.client() as client:
        storm.start()
        try:
            submit(client, jobs, lambda j: sgd_args(j.seed), rng)
            final = wait_all(client, jobs, timeout=600)
        finally:
            storm.halt.set()
            storm.join(timeout=60)
        elapsed = time.monotonic() - started
        statuses = {j.name: get_status(client, j.name) for j in jobs}
    assert storm.error is None, f"the storm thread failed: {storm.error!r} {CONTEXT}"
    assert storm.tally.unexpected == [], f"{storm.tally.unexpected} {CONTEXT}"

    module = load_example(SGD)
    restarts: Counter[str] = Counter()  # by what preempted the job
    resumed_jobs = replica_resumes = stockouts = 0
    for target in jobs:
        status = statuses[target.name]
        kind = "random" if target.location == RANDOM_LOCATION else "admin"
        restarts[kind] += len(status["restarts"])
        if not check_outcome(target, final[target.name], status):
            stockouts += 1
            continue
        check_gang(status, len(target.tasks))
        resumed_here = check_sgd_logs(storm_server, target, status)
        replica_resumes += len(resumed_here)
        resumed_jobs += bool(resumed_here)
        expected = sgd_reference(module, tmp_path, target.seed, target.workers)
        got = output(storm_server, target, "model.json")
        assert got == expected, f"{target.name}: weights differ from an uninterrupted run {CONTEXT}"
    check_nothing_left(storm_server, statuses)

    report = {
        "jobs": len(jobs),
        "gangs": sum(1 for j in jobs if j.workers),
        "replicas": sum(len(j.tasks) for j in jobs),
        "attempts": sum(s["attempt"] + 1 for s in statuses.values()),
        "admin_preemptions_accepted": storm.tally.accepted,
        "double_preemptions": storm.tally.doubles,
        "refused_not_running": storm.tally.refused,
        "empty": storm.tally.empty,
        "probes_of_idle_jobs": storm.tally.probes,
        "probes_that_landed": storm.tally.probes_landed,
        "restarts_from_admin": restarts["admin"],
        "restarts_from_region_rate": restarts["random"],
        "jobs_resumed_from_checkpoint": resumed_jobs,
        "replica_resumes_from_checkpoint": replica_resumes,
        "stockouts_by_chance": stockouts,
        "lost": 0,
        "wrong": 0,
        "seconds": round(elapsed, 1),
    }
    print(f"storm report: {json.dumps(report)}")
    # The storm really stormed: both kinds of preemption landed, and runs resumed from their checkpoints.
    assert restarts["admin"] > 0 and restarts["random"] > 0, f"{report} {CONTEXT}"
    assert replica_resumes > 0, f"{report} {CONTEXT}"


def checkpointed_in(log: str, attempt: int) -> bool:
    """Whether this attempt of the torch example has saved a checkpoint of its own, early enough that its
    run still has a while to go."""
    lines = log.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(("fresh start", "resumed from step"))]
    if len(starts) != attempt + 1:
        return False
    saved = [int(line.split()[1]) for line in lines[starts[-1] :] if line.startswith("checkpoint ")]
    return bool(saved) and saved[-1] <= TORCH_STEPS - 2 * TORCH_EVERY


def preempt_after_checkpoints(
    server: ServerProcess, client: httpx.Client, jobs: list[StormJob], rng: random.Random
) -> None:
    """Preempt each job as often as planned, each time after a checkpoint of the running attempt's own and a
    random delay."""

    def preempt_due() -> bool:
        states = {n: j["state"] for n, j in job_states(client, {ADMIN_LOCATION}).items()}
        for target in jobs:
            if states[target.name] != "JOB_STATE_RUNNING" or len(target.fired) >= target.planned:
                continue
            attempt = get_status(client, target.name)["attempt"]
            if attempt in target.fired or not checkpointed_in(
                stdout_of(server, target, "workerpool0-0"), attempt
            ):
                continue
            time.sleep(rng.uniform(0.0, 0.2))  # the storm's random moment, between two checkpoints
            answer = client.post(f"/trainworks/v1/{target.name}:preempt", json={})
            assert answer.status_code == 200, answer.text
            target.fired.add(attempt)
        return all(len(j.fired) >= j.planned or states[j.name] in TERMINAL for j in jobs)

    wait_for(preempt_due, timeout=300, interval=0.1, what="the torch jobs' preemptions")


def test_torch_storm_resumes_the_real_example_bit_for_bit(
    storm_server: ServerProcess, tmp_path: Path
) -> None:
    """examples/checkpointed_train.py (torch): 5 SPOT jobs, one a gang of two sharing a checkpoint file, each
    preempted once or twice, after checkpoints; each ends bit for bit as an uninterrupted run of it."""
    rng = random.Random(SEED + 1)
    reference = tmp_path / "reference"
    plain = {"AIP_CHECKPOINT_DIR": str(reference / "checkpoints"), "AIP_MODEL_DIR": str(reference / "model")}
    # The same run without the per-step sleep, alongside the storm.
    command = [sys.executable, str(TORCH), *TORCH_ARGS[:4]]
    uninterrupted = subprocess.Popen(command, env={**os.environ, **plain}, stdout=subprocess.DEVNULL)
    jobs = [StormJob(i, ADMIN_LOCATION, 0, int(i == 0), rng.choice([1, 2]), script=TORCH) for i in range(5)]
    started = time.monotonic()
    try:
        with storm_server.client() as client:
            submit(client, jobs, lambda _j: TORCH_ARGS)
            preempt_after_checkpoints(storm_server, client, jobs, rng)
            final = wait_all(client, jobs, timeout=300)
            statuses = {j.name: get_status(client, j.name) for j in jobs}
        elapsed = time.monotonic() - started
        assert uninterrupted.wait(timeout=300) == 0
    finally:
        if uninterrupted.poll() is None:
            uninterrupted.kill()
            uninterrupted.wait()
    expected = (reference / "model" / "result.json").read_bytes()

    for target in jobs:
        status = statuses[target.name]
        assert final[target.name]["state"] == "JOB_STATE_SUCCEEDED", f"{final[target.name]} {CONTEXT}"
        kinds = [r["kind"] for r in status["restarts"]]
        assert kinds == ["preemption"] * len(target.fired), status["restarts"]
        check_gang(status, len(target.tasks))
        for task in target.tasks:
            log = stdout_of(storm_server, target, task)
            check_resumes(log, TORCH_EVERY, TORCH_STEPS, shared=True)
            if task == "workerpool0-0":  # preempted after a checkpoint of each attempt: every restart resumed
                starts = starts_of(log)
                assert len(starts) == len(target.fired) + 1, log
                assert all(
                    s.startswith("resumed from step") and s != "resumed from step 0" for s in starts[1:]
                )
        got = output(storm_server, target, "result.json")
        assert got == expected, f"{target.name}: not bit for bit an uninterrupted run's {CONTEXT}"
    check_nothing_left(storm_server, statuses)
    report = {"jobs": len(jobs), "preemptions": sum(len(j.fired) for j in jobs), "seconds": round(elapsed, 1)}
    print(f"torch storm report: {json.dumps(report)}")


# ------------------------------------------------------------------------------------------- regressions
# The storm found these races; here each is pinned down deterministically. The server's own services and
# controller (wiring.py) run in this process, and the test takes the controller's passes one at
# a time, so it can put a replica's exit, a preemption and a pass in exactly the order that went wrong.
@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    settings = Settings(home=tmp_path / "home", preemption_notice_seconds=1.0, cancel_grace_seconds=3.0)
    settings.replica_binds = ((tmp_path, True),)  # the replicas' go files (their own /tmp is private)
    with in_process_services(settings) as built:
        yield built


def passes(services: Services, count: int) -> bool:
    """Run `count` controller passes; False, so that wait_for(lambda: passes(...) or done()) keeps going."""
    for _ in range(count):
        services.controller.reconcile_once()
    return False


def spot_job(services: Services, *pools: dict[str, Any]) -> str:
    body = job(*pools, scheduling={"strategy": "SPOT"})
    return services.custom_jobs.create(PROJECT, LOCATION, body)["name"].rsplit("/", 1)[-1]  # type: ignore[no-any-return]


def drive(
    services: Services, job_id: str, what: str, until: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Controller passes, one at a time, until `until(status)` holds; the status it held for."""

    def step() -> dict[str, Any] | None:
        services.controller.reconcile_once()
        status = services.job_status.status(PROJECT, LOCATION, job_id)
        return status if until(status) else None

    return wait_for(step, timeout=60, interval=0.02, what=what)  # type: ignore[no-any-return]


def running(attempt: int) -> Callable[[dict[str, Any]], bool]:
    return lambda s: s["state"] == "JOB_STATE_RUNNING" and s["attempt"] == attempt


def finished(status: dict[str, Any]) -> bool:
    return status["state"] in TERMINAL


def exited(services: Services, job_id: str, task: str) -> None:
    """Wait for the replica's supervisor to record its exit (no controller pass looks meanwhile)."""
    record = services.settings.jobs_dir / job_id / task / "exit.json"
    wait_for(record.exists, what=f"{task} to exit")


def wait_for_go(go: Path) -> str:
    return f"import pathlib, time\nwhile not pathlib.Path({str(go)!r}).exists(): time.sleep(0.01)"


@pytest.mark.parametrize(
    ("code", "state"),
    [("print('trained')", "JOB_STATE_SUCCEEDED"), ("raise SystemExit(3)", "JOB_STATE_FAILED")],
    ids=["finished", "crashed"],
)
def test_an_exit_just_before_a_preemption_decides_the_job(services: Services, code: str, state: str) -> None:
    job_id = spot_job(services, python_pool(code))
    drive(services, job_id, "the job to run", running(0))
    exited(services, job_id, "workerpool0-0")
    answer = services.job_status.preempt(PROJECT, LOCATION, job_id, None)
    assert answer == {"preempted": ["workerpool0-0"]}  # still RUNNING for the API: the reclaim is accepted
    done = drive(services, job_id, "the job to end", finished)
    # Before the fix: restarted, so a finished training ran a second time and a crash was retried.
    assert done["state"] == state, done
    assert done["restarts"] == []
    if state == "JOB_STATE_FAILED":
        assert (
            "non-zero status of 3" in services.custom_jobs.get(PROJECT, LOCATION, job_id)["error"]["message"]
        )


def test_a_job_that_finishes_while_its_preemption_is_undelivered_succeeds(tmp_path: Path) -> None:
    """The server dies between recording a preemption and sending its notice, and the job finishes meanwhile:
    the restarted server must see that it finished first. Before the fix it restarted the finished job."""
    go = tmp_path / "go"
    home, args = tmp_path / "home", ["--preemption-notice", "1"]
    body = job(python_pool(wait_for_go(go)), scheduling={"strategy": "SPOT"})
    server = ServerProcess(home=home, args=args, env={"TRAINWORKS_CRASH_AT": "preemption-decided"}).start()
    try:
        with server.client() as client:
            name = client.post(f"/v1/{parent(LOCATION)}/customJobs", json=body).json()["name"]
            wait_for(lambda: server_running(client, name, 0), what="the job to run")
            # The controller may act on it (and die) before the answer is sent: either way it was recorded.
            with contextlib.suppress(httpx.RemoteProtocolError):
                assert client.post(f"/trainworks/v1/{name}:preempt", json={}).status_code == 200
        assert server.process is not None
        assert server.process.wait(timeout=60) == -9  # it died right after recording the preemption
        server.process = None
        go.touch()  # the training ends on its own, before any notice reached it
        wait_for(
            (home / "jobs" / name.rsplit("/", 1)[-1] / "workerpool0-0" / "exit.json").exists, what="exit"
        )
        server = ServerProcess(home=home, args=args).start()
        with server.client() as client:
            done = wait_job(client, name, timeout=60)
            status = get_status(client, name)
    finally:
        server.stop()
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    assert status["restarts"] == [], status["restarts"]


def test_a_job_that_finishes_before_its_stockout_is_delivered_succeeds(
    services: Services, tmp_path: Path
) -> None:
    """The same for the seventh preemption, which fails a job with a stock-out; here the controller's own
    decision (what its pass does before sending the notice) stands in for the crash in between."""
    go = tmp_path / "go"
    job_id = spot_job(services, python_pool(wait_for_go(go)))
    for attempt in range(MAX_PREEMPTION_RESTARTS):  # spend the restarts: the next preemption is the stock-out
        drive(services, job_id, f"attempt {attempt + 1} to run", running(attempt))
        services.job_status.preempt(PROJECT, LOCATION, job_id, None)
        drive(services, job_id, f"restart {attempt + 1}", lambda s, a=attempt: s["attempt"] == a + 1)
    drive(services, job_id, "the last attempt to run", running(MAX_PREEMPTION_RESTARTS))
    row = services.controller.jobs.get(int(job_id))
    assert row is not None
    services.controller._preempt(row, ["workerpool0-0"])  # decided: FAILED, STOCKOUT; no notice sent yet
    assert row.outcome is not None and "STOCKOUT" in row.outcome["error"]["message"]
    go.touch()
    exited(services, job_id, "workerpool0-0")
    done = drive(services, job_id, "the job to end", finished)
    assert done["state"] == "JOB_STATE_SUCCEEDED", done  # before the fix: FAILED with the stock-out
    assert len(done["restarts"]) == MAX_PREEMPTION_RESTARTS


def server_running(client: httpx.Client, name: str, attempt: int) -> bool:
    status = get_status(client, name)
    return status["state"] == "JOB_STATE_RUNNING" and status["attempt"] == attempt


def test_preempting_a_worker_that_already_finished_restarts_nothing(
    services: Services, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    job_id = spot_job(services, python_pool(wait_for_go(go)), python_pool("print('my part is done')"))
    drive(services, job_id, "the job to run", running(0))
    exited(services, job_id, "workerpool1-0")
    answer = services.job_status.preempt(PROJECT, LOCATION, job_id, "workerpool1-0")
    assert answer == {"preempted": ["workerpool1-0"]}  # its exit is not recorded yet: still running
    passes(services, 1)
    row = services.controller.jobs.get(int(job_id))
    assert row is not None and row.outcome is None  # before the fix: the whole gang restarted for it
    go.touch()
    done = drive(services, job_id, "the job to end", finished)
    assert done["state"] == "JOB_STATE_SUCCEEDED" and done["restarts"] == [], done


def test_a_preemption_is_delivered_in_the_pass_that_decides_it(services: Services) -> None:
    job_id = spot_job(services, python_pool("import time; print('up', flush=True); time.sleep(60)"))
    drive(services, job_id, "the job to run", running(0))
    replica = services.settings.jobs_dir / job_id / "workerpool0-0"
    wait_for(lambda: "up" in replica_output(replica), what="the command to start")
    services.job_status.preempt(PROJECT, LOCATION, job_id, None)
    passes(services, 1)
    row = services.controller.jobs.get(int(job_id))
    # Before the fix the notice waited for the next pass; one that starts many replicas takes seconds, and
    # in the storm most jobs trained on to the end before their preemption reached them.
    assert row is not None and row.outcome is not None and row.teardown_started is not None
    done = drive(services, job_id, "the restart", lambda s: s["attempt"] == 1)
    first = next(r for r in done["replicas"] if r["attempt"] == 0)
    assert first["exitCode"] == 143 and first["detail"] == "killed by signal SIGTERM", first


def test_random_preemption_exposure_is_the_time_an_attempt_ran() -> None:
    t = datetime(2026, 1, 1, tzinfo=UTC)
    s = timedelta(seconds=1)
    watching = t - 100 * s
    # The first roll of an attempt covers its replicas' whole run so far, not only the time since a pass first
    # saw them (before the fix: nothing, so with slow passes short jobs were never preempted at all).
    assert preemption_exposure(t + 10 * s, 0, None, t, watching) == 10.0
    assert preemption_exposure(t + 10 * s, 2, (2, t + 9 * s), t, watching) == 1.0  # then since the last roll
    # A restarted job's wait in the queue is no replica's running time (before the fix it counted, and a
    # restarted job was soon preempted again): attempt 0 last rolled at t+50, attempt 1 started at t+60.
    assert preemption_exposure(t + 61 * s, 1, (0, t + 50 * s), t + 60 * s, watching) == 1.0
    assert preemption_exposure(t + 10 * s, 0, None, t, t + 5 * s) == 5.0  # a restarted server starts again
    assert preemption_exposure(t, 0, None, None, watching) == 0.0  # nothing has started yet
