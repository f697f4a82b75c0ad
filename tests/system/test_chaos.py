"""Chaos: the server is SIGKILLed at random moments while clients create, cancel and delete custom jobs, run
hyperparameter tuning jobs, poll operations and update a training cluster; after the last restart every job,
trial and operation reaches the state it must, none is lost or duplicated, and no replica is left running
or ran twice.

The run is seeded: the seed is printed (shown on failure) and TRAINWORKS_CHAOS_SEED replays its choices
(the interleaving with the kills still varies). TRAINWORKS_CHAOS_JOBS sets the number of custom jobs
(default 100) for a longer run.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.chaos import Killer, OutcomeClient, processes_with
from tests.support.server import LOCATION, PROJECT, TERMINAL, ServerProcess, wait_for, wait_job
from tests.support.slurm import require_slurm
from trainworks.config import Settings
from trainworks.slurm.daemons import LocalSlurm

# Starts Slurm daemons: one such module at a time across test workers (tests/conftest.py).
pytestmark = pytest.mark.slurm_daemons

SEED = int(os.environ.get("TRAINWORKS_CHAOS_SEED") or random.SystemRandom().randrange(2**32))
JOBS = int(os.environ.get("TRAINWORKS_CHAOS_JOBS") or 100)
KILLS = max(10, JOBS // 10)  # spread over the custom jobs' creates: kill k once k/(KILLS+1) of them started
TUNING_EVERY = 12  # one tuning job (3 or 4 trials, 2 in parallel) per this many custom jobs
CLIENTS = 4
PARENT = f"projects/{PROJECT}/locations/{LOCATION}"
CLUSTERS = f"/v1beta1/{PARENT}/modelDevelopmentClusters"
CLUSTER_ID = "chaos1"
PRIMARY = "workerpool0-0"

# Every replica (and trial) leaves one file per run in the marker folder: <job id>.<task>.<random>. A "crash"
# job's primary aborts (SIGABRT, a transient crash that restarts the job) on its first run only.
REPLICA = """
import json, os, pathlib, resource, sys, time, uuid
markers, kind, pause = pathlib.Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
spec = json.loads(os.environ["CLUSTER_SPEC"])
task = f"{spec['task']['type']}-{spec['task']['index']}"
job = os.environ["CLOUD_ML_JOB_ID"]
runs_before = len(list(markers.glob(f"{job}.{task}.*")))
(markers / f"{job}.{task}.{uuid.uuid4().hex}").touch()
primary = task == "workerpool0-0"
if kind == "crash" and primary and runs_before == 0:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.abort()
time.sleep(pause if primary else 30 * pause)
if kind == "fail" and primary:
    sys.exit(3)
"""

TRIAL = """
import argparse, json, os, pathlib, sys, time, uuid
import hypertune
parser = argparse.ArgumentParser()
parser.add_argument("--markers")
parser.add_argument("--x", type=float)
args, _ = parser.parse_known_args()
spec = json.loads(os.environ["CLUSTER_SPEC"])
task = f"{spec['task']['type']}-{spec['task']['index']}"
(pathlib.Path(args.markers) / f"{os.environ['CLOUD_ML_JOB_ID']}.{task}.{uuid.uuid4().hex}").touch()
time.sleep(0.3)
hypertune.HyperTune().report_hyperparameter_tuning_metric(
    hyperparameter_metric_tag="score", metric_value=-(args.x - 1.0) ** 2, global_step=1)
"""

# kind -> (weight, replicas of workerpool1, primary's pause in seconds)
KINDS = {
    "ok": (40, 0, 0.3),
    "multi": (15, 2, 0.5),
    "fail": (15, 0, 0.2),
    "crash": (10, 0, 0.3),
    "long": (20, 0, 600.0),  # runs until cancelled: every one of them is cancelled
}
EXPECTED = {
    "ok": "JOB_STATE_SUCCEEDED",
    "multi": "JOB_STATE_SUCCEEDED",
    "crash": "JOB_STATE_SUCCEEDED",
    "fail": "JOB_STATE_FAILED",
    "long": "JOB_STATE_CANCELLED",
}


@dataclass
class Attempt:
    """One create request (a custom job or tuning job), named by its own label."""

    label: str
    kind: str
    name: str | None = None  # the job, once the server answered or a lookup found it
    cancel_acked: bool = False
    deleted: bool = False
    delete_op: str | None = None
    tuning: dict[str, Any] | None = None  # a deleted tuning job as it was before deletion
    # /status (the replica runs) of a deleted job, or of a deleted tuning job's trial jobs, by job name
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Ledger:
    run: str
    markers: Path
    lock: threading.Lock = field(default_factory=threading.Lock)
    attempts: list[Attempt] = field(default_factory=list)
    started: int = 0  # custom job creates started (the workload ends at JOBS)
    cluster_updates: int = 0
    cluster_rev: int | None = None  # the last update the server acknowledged
    ops_seen: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)

    def add(self, attempt: Attempt) -> Attempt:
        with self.lock:
            self.attempts.append(attempt)
        return attempt

    def fail(self, message: str) -> None:
        with self.lock:
            self.failures.append(message)


class Workload:
    """What the client threads do; every request retries through restarts of the server."""

    def __init__(self, server: ServerProcess, ledger: Ledger, trial_script: Path) -> None:
        self.server = server
        self.ledger = ledger
        self.trial_script = trial_script
        self.clients: list[OutcomeClient] = []
        self.done = threading.Event()

    def client(self) -> OutcomeClient:
        client = OutcomeClient(self.server.url)
        self.clients.append(client)
        return client

    # -------------------------------------------------------------- bodies
    def labels(self, attempt: str) -> dict[str, str]:
        return {"chaos-run": self.ledger.run, "chaos-attempt": attempt}

    def env(self) -> list[dict[str, str]]:
        return [{"name": "TRAINWORKS_CHAOS_RUN", "value": self.ledger.run}]

    def custom_job(self, kind: str, attempt: str) -> dict[str, Any]:
        return custom_job_body(kind, self.ledger.markers, self.ledger.run, attempt)

    def tuning_job(self, attempt: str, trials: int) -> dict[str, Any]:
        return {
            "displayName": "chaos-tuning",
            "labels": self.labels(attempt),
            "maxTrialCount": trials,
            "parallelTrialCount": 2,
            "studySpec": {
                "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
                "parameters": [
                    {
                        "parameterId": "x",
                        "doubleValueSpec": {"minValue": -3, "maxValue": 3},
                        "scaleType": "UNIT_LINEAR_SCALE",
                    }
                ],
            },
            "trialJobSpec": {
                "workerPoolSpecs": [
                    {
                        "machineSpec": {"machineType": "n1-standard-4"},
                        "replicaCount": "1",
                        "containerSpec": {
                            "imageUri": "python:3.11",
                            "command": [sys.executable, str(self.trial_script)],
                            "args": [f"--markers={self.ledger.markers}"],
                            "env": self.env(),
                        },
                    }
                ]
            },
        }

    # -------------------------------------------------------------- creates
    def create(self, client: OutcomeClient, collection: str, kind: str, body_of: Any) -> Attempt:
        """Create a job; when the outcome is unknown, look it up by its attempt label once the server is
        back, and try again with a new label only if it is not there."""
        url = f"/v1/{PARENT}/{collection}"
        while True:
            attempt = self.ledger.add(Attempt(uuid.uuid4().hex, kind))
            response = client.send("POST", url, json=body_of(attempt.label))
            if response is not None:
                assert response.status_code == 200, f"create {kind}: {response.status_code} {response.text}"
                attempt.name = response.json()["name"]
                return attempt
            found = client.list_all(
                url, self.list_key(collection), {"filter": f"labels.chaos-attempt={attempt.label}"}
            )
            if len(found) > 1:
                self.ledger.fail(f"attempt {attempt.label} created {len(found)} jobs")
            if found:
                attempt.name = found[0]["name"]
                return attempt

    @staticmethod
    def list_key(collection: str) -> str:
        return "customJobs" if collection == "customJobs" else "hyperparameterTuningJobs"

    def wait_terminal(self, client: OutcomeClient, name: str, timeout: float = 240.0) -> dict[str, Any]:
        return wait_for(  # type: ignore[no-any-return]
            lambda: (job := client.get_json(f"/v1/{name}")).get("state") in TERMINAL and job,
            timeout=timeout,
            interval=0.1,
            what=f"{name} to finish",
        )

    def cancel(self, client: OutcomeClient, attempt: Attempt) -> None:
        """Cancel until the server says it was (or, after an unanswered try, that it is over)."""
        assert attempt.name is not None
        unanswered = False
        while True:
            response = client.send("POST", f"/v1/{attempt.name}:cancel", json={})
            if response is None:
                unanswered = True
                continue
            if response.status_code == 200:
                attempt.cancel_acked = True
                return
            assert response.status_code == 400, response.text
            # Finished already: fine for a short job, perhaps by an earlier unanswered try; a long one can
            # only have ended that way.
            attempt.cancel_acked = unanswered
            if attempt.kind == "long" and not unanswered:
                self.ledger.fail(f"{attempt.name} finished before its cancel: {response.text}")
            return

    def delete(self, client: OutcomeClient, attempt: Attempt) -> None:
        """Delete a finished job and follow its operation to the end."""
        assert attempt.name is not None
        unanswered = False
        while True:
            response = client.send("DELETE", f"/v1/{attempt.name}")
            if response is None:
                unanswered = True
                continue
            if response.status_code == 404 and unanswered:
                attempt.deleted = True  # an earlier, unanswered try deleted it already
                return
            assert response.status_code == 200, (
                f"delete {attempt.name}: {response.status_code} {response.text}"
            )
            break
        op = response.json()
        attempt.delete_op, attempt.deleted = op["name"], True
        with self.ledger.lock:
            self.ledger.ops_seen.add(op["name"])
        wait_for(
            lambda: client.get_json(f"/v1/{op['name']}").get("done"),
            timeout=120,
            interval=0.1,
            what=f"the operation deleting {attempt.name}",
        )
        gone = client.answer("GET", f"/v1/{attempt.name}")
        if gone.status_code != 404:
            self.ledger.fail(f"{attempt.name} still there after its delete finished: {gone.text[:300]}")

    # -------------------------------------------------------------- client threads
    def take_job(self) -> int:
        """The number of the next custom job to create (from 1), or 0 once JOBS were started."""
        with self.ledger.lock:
            if self.ledger.started >= JOBS or self.done.is_set():
                return 0
            self.ledger.started += 1
            return self.ledger.started

    def jobs_client(self, index: int) -> None:
        rng = random.Random(SEED * 1000 + index)
        client = self.client()
        mine: list[Attempt] = []
        kinds, weights = zip(*((k, v[0]) for k, v in KINDS.items()), strict=True)
        while number := self.take_job():
            if number % TUNING_EVERY == 0:
                self.tuning_scenario(client, rng)
            kind = rng.choices(kinds, weights)[0]
            attempt = self.create(
                client, "customJobs", kind, lambda label, kind=kind: self.custom_job(kind, label)
            )
            mine.append(attempt)
            if kind == "long":
                if rng.random() < 0.5:  # now (QUEUED or PENDING), or once it runs
                    self.wait_state(client, attempt, {"JOB_STATE_RUNNING"})
                self.cancel(client, attempt)
            elif kind == "ok" and rng.random() < 0.1:
                self.cancel(client, attempt)  # may come before or after it finished
            if rng.random() < 0.15:
                candidates = [a for a in mine if a.kind != "long" and not a.deleted]
                if candidates:
                    victim = rng.choice(candidates)
                    self.wait_terminal(client, victim.name or "")
                    victim.statuses[victim.name or ""] = self.status(client, victim.name or "")
                    self.delete(client, victim)

    def wait_state(self, client: OutcomeClient, attempt: Attempt, states: set[str]) -> None:
        wait_for(
            lambda: client.get_json(f"/v1/{attempt.name}").get("state") in states | TERMINAL,
            timeout=120,
            interval=0.1,
            what=f"{attempt.name} in {sorted(states)}",
        )

    def tuning_scenario(self, client: OutcomeClient, rng: random.Random) -> None:
        trials = rng.choice([3, 4])
        attempt = self.create(
            client,
            "hyperparameterTuningJobs",
            f"tuning-{trials}",
            lambda label: self.tuning_job(label, trials),
        )
        roll = rng.random()
        if roll < 0.25:
            wait_for(
                lambda: client.get_json(f"/v1/{attempt.name}").get("trials"),
                timeout=120,
                interval=0.1,
                what=f"a trial of {attempt.name}",
            )
            self.cancel(client, attempt)
        elif roll < 0.5:
            attempt.tuning = self.wait_terminal(client, attempt.name or "")
            for trial in attempt.tuning.get("trials", []):
                if "customJob" in trial:
                    attempt.statuses[trial["customJob"]] = self.status(client, trial["customJob"])
            self.delete(client, attempt)

    @staticmethod
    def status(client: OutcomeClient, name: str) -> dict[str, Any]:
        """Trainworks' status of a custom job: its attempts and every replica run."""
        return client.get_json(f"/trainworks/v1/{name}/status")

    def cluster_client(self) -> None:
        """Create one training cluster, then update it (labels and a slurm.conf value) until the end."""
        client = self.client()
        body = cluster_body(0)
        while True:
            response = client.send(
                "POST", CLUSTERS, params={"modelDevelopmentClusterId": CLUSTER_ID}, json=body
            )
            if response is None:
                continue
            assert response.status_code in (200, 409), response.text  # 409: an unanswered try made it
            break
        self.wait_cluster_running(client)
        self.ledger.cluster_rev = 0
        rev = 0
        while not self.done.is_set():
            rev += 1
            self.update_cluster(client, rev)
            self.ledger.cluster_rev = rev
            with self.ledger.lock:
                self.ledger.cluster_updates += 1

    def wait_cluster_running(self, client: OutcomeClient) -> dict[str, Any]:
        return wait_for(  # type: ignore[no-any-return]
            lambda: (
                (c := client.get_json(f"{CLUSTERS}/{CLUSTER_ID}"))["clusterStatus"]["state"] == "RUNNING"
                and c
            ),
            timeout=180,
            interval=0.1,
            what="the training cluster to be RUNNING",
        )

    def update_cluster(self, client: OutcomeClient, rev: int) -> None:
        body = cluster_body(rev)
        mask = "labels,orchestrator_spec.slurm_spec.config"
        while True:
            response = client.send(
                "PATCH", f"{CLUSTERS}/{CLUSTER_ID}", params={"updateMask": mask}, json=body
            )
            if response is None or response.status_code == 400:
                # Unanswered, or refused because an unanswered try is still being applied: once the cluster
                # is RUNNING again its labels say whether this update was applied.
                if response is not None:
                    assert "UPDATING" in response.text, response.text
                cluster = self.wait_cluster_running(client)
                if cluster.get("labels", {}).get("chaos-rev") == str(rev):
                    return
                continue
            assert response.status_code == 200, response.text
            op = response.json()
            with self.ledger.lock:
                self.ledger.ops_seen.add(op["name"])
            done = wait_for(
                lambda op=op: (got := client.get_json(f"/v1/{op['name']}")).get("done") and got,
                timeout=180,
                interval=0.1,
                what=f"cluster update {rev}",
            )
            if "error" in done:
                self.ledger.fail(f"cluster update {rev} failed: {done['error']}")
            return


def custom_job_body(kind: str, markers: Path, run: str, attempt: str) -> dict[str, Any]:
    """A custom job of one of the KINDS, labelled with its run and create attempt."""
    _, workers, pause = KINDS[kind]

    def pool(replicas: int) -> dict[str, Any]:
        return {
            "machineSpec": {"machineType": "n1-standard-4"},
            "replicaCount": str(replicas),
            "containerSpec": {
                "imageUri": "python:3.11",
                "command": [sys.executable, "-c", REPLICA],
                "args": [str(markers), kind, str(pause)],
                "env": [{"name": "TRAINWORKS_CHAOS_RUN", "value": run}],
            },
        }

    pools = [pool(1)] + ([pool(workers)] if workers else [])
    return {
        "displayName": f"chaos-{kind}",
        "jobSpec": {"workerPoolSpecs": pools},
        "labels": {"chaos-run": run, "chaos-attempt": attempt},
    }


def cluster_body(rev: int) -> dict[str, Any]:
    """A one-node CPU cluster; each update sets its labels and a slurm.conf value to `rev`."""
    machine = {"machine_type": "n2-standard-8"}
    disk = {"boot_disk_type": "pd-standard", "boot_disk_size_gb": 120}
    return {
        "display_name": "chaos",
        "labels": {"chaos-rev": str(rev)},
        "network": {
            "network": "projects/test-project/global/networks/default",
            "subnetwork": "projects/test-project/regions/us-central1/subnetworks/default",
        },
        "node_pools": [
            {
                "id": "cpu",
                "machine_spec": machine,
                "scaling_spec": {"min_node_count": 1, "max_node_count": 1},
                "zone": "us-central1-a",
                "enable_public_ips": True,
                "boot_disk": disk,
            },
            {
                "id": "login",
                "machine_spec": machine,
                "scaling_spec": {"min_node_count": 1, "max_node_count": 1},
                "zone": "us-central1-a",
                "enable_public_ips": True,
                "boot_disk": disk,
            },
        ],
        "orchestrator_spec": {
            "slurm_spec": {
                "home_directory_storage": "projects/test-project/locations/us-central1-a/instances/home",
                "partitions": [{"id": "cpu", "node_pool_ids": ["cpu"]}],
                "login_node_pool_id": "login",
                "config": {"PriorityType": "priority/multifactor", "priority_weight_age": str(rev)},
            }
        },
    }


@pytest.fixture
def chaos_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    try:
        yield home
    finally:
        for base in Settings(home=home).clusters_dir.glob("*"):  # clusters outlive the server, like VMs
            LocalSlurm(base).down()


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing(chaos_home: Path, tmp_path: Path) -> None:
    require_slurm()
    print(f"chaos seed {SEED} (replay with TRAINWORKS_CHAOS_SEED={SEED}), {JOBS} custom jobs")
    began = time.monotonic()
    markers = tmp_path / "markers"
    markers.mkdir()
    trial_script = tmp_path / "trial.py"
    trial_script.write_text(TRIAL)
    run = uuid.uuid4().hex[:16]
    ledger = Ledger(run=run, markers=markers)
    server = ServerProcess(home=chaos_home).start()
    workload = Workload(server, ledger, trial_script)
    killer = Killer(
        server, random.Random(SEED), KILLS, ready=lambda k: ledger.started * (KILLS + 1) >= k * JOBS
    )
    errors: list[BaseException] = []

    def guarded(target: Any, *args: Any) -> None:
        try:
            target(*args)
        except BaseException as exc:
            errors.append(exc)
            workload.done.set()

    threads = [threading.Thread(target=guarded, args=(workload.jobs_client, i)) for i in range(CLIENTS)]
    cluster = threading.Thread(target=guarded, args=(workload.cluster_client,))
    try:
        killer.start()
        cluster.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        if errors:
            killer.abort()
        killer.finish()
        workload.done.set()  # the cluster's updates go on until the last restart
        cluster.join(timeout=300)
        chaos_seconds = time.monotonic() - began
        if errors:
            raise errors[0]
        assert not any(t.is_alive() for t in [*threads, cluster]), "a client thread hung"
        report = check(server, ledger, workload)
    finally:
        workload.done.set()
        killer.abort()
        if killer.is_alive():
            killer.join(timeout=300)
        server.stop()
        for client in workload.clients:
            client.close()
    report.update(
        seed=SEED,
        kills=killer.kills,
        restarts=len(killer.restart_seconds),
        mean_restart_s=round(sum(killer.restart_seconds) / max(1, len(killer.restart_seconds)), 2),
        unanswered=sum(c.unknown for c in workload.clients),
        chaos_s=round(chaos_seconds, 1),
        total_s=round(time.monotonic() - began, 1),
        cluster_updates=ledger.cluster_updates,
    )
    print("chaos report:", json.dumps(report))
    assert killer.kills == KILLS


def check(server: ServerProcess, ledger: Ledger, workload: Workload) -> dict[str, Any]:
    """Wait for everything to settle, then check every job, trial, operation, replica run and the cluster."""
    client = workload.client()
    failures = ledger.failures
    jobs_url, tuning_url = f"/v1/{PARENT}/customJobs", f"/v1/{PARENT}/hyperparameterTuningJobs"
    by_run = {"filter": f"labels.chaos-run={ledger.run}"}
    attempts = {a.label: a for a in ledger.attempts}

    # Long jobs from unanswered creates that nobody knew of are cancelled now; then everything must finish.
    for job in client.list_all(jobs_url, "customJobs", by_run):
        attempt = attempts.get(job["labels"]["chaos-attempt"])
        if attempt is not None and attempt.name is None and attempt.kind == "long":
            attempt.name = job["name"]
            workload.cancel(client, attempt)
    for job in client.list_all(jobs_url, "customJobs", by_run) + client.list_all(
        tuning_url, "hyperparameterTuningJobs", by_run
    ):
        workload.wait_terminal(client, job["name"])

    jobs = client.list_all(jobs_url, "customJobs", by_run)
    tunings = client.list_all(tuning_url, "hyperparameterTuningJobs", by_run)
    found = Counter(j["labels"]["chaos-attempt"] for j in jobs + tunings)
    for label, count in found.items():
        if label not in attempts:
            failures.append(f"a job of no create attempt: {label}")
        if count > 1:
            failures.append(f"create attempt {label} made {count} jobs")
    states: Counter[str] = Counter()
    statuses: dict[str, dict[str, Any]] = {}
    for job in jobs:
        attempt = attempts.get(job["labels"]["chaos-attempt"])
        if attempt is None:
            continue  # reported above
        if attempt.name is not None and attempt.name != job["name"]:
            failures.append(f"attempt {attempt.label} answered {attempt.name} but {job['name']} exists")
        want = {EXPECTED[attempt.kind]} | ({"JOB_STATE_CANCELLED"} if attempt.cancel_acked else set())
        if attempt.kind == "long":
            want = {"JOB_STATE_CANCELLED"}
        states[job["state"]] += 1
        if job["state"] not in want:
            failures.append(
                f"{attempt.kind} job {job['name']} ended {job['state']}, want {sorted(want)}: "
                f"{job.get('error')}"
            )
        status = client.get_json(f"/trainworks/v1/{job['name']}/status")
        statuses[job["name"]] = status
        if job["state"] == "JOB_STATE_SUCCEEDED":
            expected_attempt = 1 if attempt.kind == "crash" else 0
            if status["attempt"] != expected_attempt:
                failures.append(
                    f"{attempt.kind} job {job['name']} ran {status['attempt'] + 1} attempts: "
                    f"{status['restarts']}"
                )
            if "startTime" not in job:
                failures.append(f"{job['name']} succeeded without a startTime")
    for attempt in ledger.attempts:
        statuses.update(attempt.statuses)  # what deleted jobs ran, recorded before they were deleted
        if attempt.name is None:
            continue
        listed = any(j["name"] == attempt.name for j in jobs + tunings)
        if attempt.deleted and listed:
            failures.append(f"{attempt.name} was deleted but is still listed")
        if not attempt.deleted and not listed:
            failures.append(f"acknowledged {attempt.kind} job {attempt.name} is lost")

    # Tuning jobs: trials 1..n, each with its own CustomJob, exactly the CustomJobs labelled for the job.
    trials_total = 0
    deleted_tunings = [a.tuning for a in ledger.attempts if a.tuning is not None and a.deleted]
    for listed_or_recorded in tunings + deleted_tunings:
        attempt = attempts.get(listed_or_recorded["labels"]["chaos-attempt"])
        if attempt is None:
            continue  # reported above
        full = listed_or_recorded if attempt.deleted else client.get_json(f"/v1/{listed_or_recorded['name']}")
        trials = full.get("trials", [])
        trials_total += len(trials)
        ids = [t["id"] for t in trials]
        if ids != [str(i) for i in range(1, len(ids) + 1)]:
            failures.append(f"{full['name']} has trial ids {ids}")
        trial_jobs = [t["customJob"] for t in trials if "customJob" in t]
        if len(set(trial_jobs)) != len(trial_jobs):
            failures.append(f"{full['name']} trials share a CustomJob: {trial_jobs}")
        if full["state"] == "JOB_STATE_SUCCEEDED":
            if len(trials) != int(full["maxTrialCount"]) or any(t["state"] != "SUCCEEDED" for t in trials):
                failures.append(
                    f"{full['name']} succeeded with trials {[(t['id'], t['state']) for t in trials]}"
                )
        elif not (attempt.cancel_acked and full["state"] == "JOB_STATE_CANCELLED"):
            failures.append(f"tuning job {full['name']} ended {full['state']}: {full.get('error')}")
        tuning_id = full["name"].rsplit("/", 1)[-1]
        children = client.list_all(
            jobs_url, "customJobs", {"filter": f"labels.trainworks-tuning-job={tuning_id}"}
        )
        if attempt.deleted:
            if children:
                failures.append(f"deleted {full['name']} left trial jobs {[c['name'] for c in children]}")
            continue
        if sorted(c["name"] for c in children) != sorted(trial_jobs):
            failures.append(
                f"{full['name']}: trial jobs {trial_jobs}, labelled jobs {[c['name'] for c in children]}"
            )
        for child in children:
            if child["state"] not in TERMINAL:
                failures.append(f"trial job {child['name']} of finished {full['name']} is {child['state']}")
            statuses[child["name"]] = client.get_json(f"/trainworks/v1/{child['name']}/status")

    # Operations: every one done (a cluster's is completed just after the cluster is RUNNING again), none
    # failed, none lost.
    def all_operations() -> list[dict[str, Any]]:
        return client.list_all(f"/v1/{PARENT}/operations", "operations")

    try:
        operations = wait_for(
            lambda: (ops := all_operations()) and all(op.get("done") for op in ops) and ops,
            timeout=60,
            interval=0.2,
            what="every operation to be done",
        )
    except AssertionError:
        operations = all_operations()
    for op in operations:
        if not op.get("done"):
            failures.append(f"operation {op['name']} never finished: {op}")
        elif "error" in op:
            failures.append(f"operation {op['name']} failed: {op['error']}")
    listed_ops = {op["name"] for op in operations}
    for name in ledger.ops_seen - listed_ops:
        failures.append(f"acknowledged operation {name} is lost")

    # Replica runs: no replica ran twice for one launch, and every primary that ended by itself left its mark.
    runs = Counter(p.name.rsplit(".", 1)[0] for p in ledger.markers.iterdir())
    launched: Counter[str] = Counter()
    must_have_run: Counter[str] = Counter()
    for name, status in statuses.items():
        job_id = name.rsplit("/", 1)[-1]
        for replica in status["replicas"]:
            key = f"{job_id}.{replica['task']}"
            if "pid" in replica:
                launched[key] += 1
            if replica["task"] == PRIMARY and status["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"):
                must_have_run[key] += 1
    for key, count in runs.items():
        if count > launched[key]:
            failures.append(f"{key} ran {count} times for {launched[key]} launches")
    for key, count in must_have_run.items():
        if runs[key] != count:
            failures.append(f"{key} ended {count} times but ran {runs[key]} times")

    # No replica (or its supervisor) of any job is left running.
    marker = f"TRAINWORKS_CHAOS_RUN={ledger.run}"
    try:
        wait_for(lambda: not processes_with(marker), timeout=60, interval=0.2, what="replicas to be gone")
    except AssertionError:
        failures.append(f"replicas left running: {processes_with(marker)}")

    # The training cluster: running, with the last acknowledged update applied in Slurm as well.
    cluster = workload.wait_cluster_running(client)
    rev = ledger.cluster_rev
    if rev is None or cluster.get("labels", {}).get("chaos-rev") != str(rev):
        failures.append(f"cluster labels {cluster.get('labels')}, last acknowledged update {rev}")
    for base in Settings(home=server.home).clusters_dir.glob("*"):
        config = LocalSlurm(base).show_config()
        if config.get("PriorityWeightAge") != str(rev):
            failures.append(f"slurm PriorityWeightAge {config.get('PriorityWeightAge')}, want {rev}")

    for c in workload.clients:
        failures.extend(c.server_errors)
    assert not failures, f"seed {SEED}:\n" + "\n".join(failures)
    deleted = sum(1 for a in ledger.attempts if a.deleted)
    return {
        "jobs_total": len(jobs) + deleted + len(tunings) + trials_total,  # trials' jobs included
        "custom_jobs": len(jobs),
        "job_states": dict(states),
        "create_attempts": len(ledger.attempts),
        "tuning_jobs": len(tunings) + len(deleted_tunings),
        "trials": trials_total,
        "deleted": deleted,
        "operations": len(operations),
        "replica_runs": sum(runs.values()),
        "lost": 0,
    }


# ------------------------------------------------------------------------------ crash points
# Each window the chaos run found (or could hit only by luck), pinned: the server SIGKILLs itself at one point
# (TRAINWORKS_CRASH_AT, store/crash_points.py) and a clean restart must finish the work.


def crash_at(home: Path, point: str) -> ServerProcess:
    return ServerProcess(home=home, env={"TRAINWORKS_CRASH_AT": point}).start()


def restart_after_crash(server: ServerProcess) -> None:
    """Wait for the server to kill itself at its crash point, then start it again without one."""
    process = server.process
    assert process is not None
    wait_for(lambda: process.poll() is not None, timeout=60, what="the server to crash at its crash point")
    assert process.returncode == -9, process.returncode
    server.stop()
    server.env = {}
    server.start()


def simple_job(kind: str, markers: Path) -> dict[str, Any]:
    return custom_job_body(kind, markers, "crash-points", uuid.uuid4().hex)


def test_crash_after_a_replica_exit_is_recorded_still_restarts_the_job(tmp_path: Path) -> None:
    """Found by the chaos run: the primary's crash (SIGABRT) was recorded, the restart it calls for was not,
    and the job stayed RUNNING for ever."""
    markers = tmp_path / "markers"
    markers.mkdir()
    server = crash_at(tmp_path / "home", "replica-exit-recorded")
    try:
        with server.client() as client:
            name = client.post(f"/v1/{server.parent}/customJobs", json=simple_job("crash", markers)).json()[
                "name"
            ]
        restart_after_crash(server)
        with server.client() as client:
            done = wait_job(client, name, timeout=60)
            status = client.get(f"/trainworks/v1/{name}/status").json()
        assert done["state"] == "JOB_STATE_SUCCEEDED", done
        assert status["attempt"] == 1 and [r["kind"] for r in status["restarts"]] == ["transient"]
        assert len(list(markers.glob(f"{name.rsplit('/', 1)[-1]}.{PRIMARY}.*"))) == 2
    finally:
        server.stop()


def test_crash_right_after_a_job_starts_running_keeps_its_start_time(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    server = crash_at(tmp_path / "home", "job-running")
    try:
        with server.client() as client:
            name = client.post(f"/v1/{server.parent}/customJobs", json=simple_job("ok", markers)).json()[
                "name"
            ]
        restart_after_crash(server)
        with server.client() as client:
            done = wait_job(client, name, timeout=60)
        assert done["state"] == "JOB_STATE_SUCCEEDED", done
        assert done["createTime"] <= done["startTime"] <= done["endTime"], done
    finally:
        server.stop()


def finished_job(server: ServerProcess, markers: Path) -> str:
    with server.client() as client:
        name: str = client.post(f"/v1/{server.parent}/customJobs", json=simple_job("ok", markers)).json()[
            "name"
        ]
        assert wait_job(client, name, timeout=60)["state"] == "JOB_STATE_SUCCEEDED"
    return name


def undone_operations(server: ServerProcess) -> list[dict[str, Any]]:
    with server.client() as client:
        listed = client.get(f"/v1/{server.parent}/operations").json().get("operations", [])
    return [op for op in listed if not op.get("done")]


def test_crash_while_a_delete_is_recorded_leaves_no_operation_undone(tmp_path: Path) -> None:
    """The delete's operation was stored before the job was linked to it: a crash in between left an
    operation that nothing would ever complete."""
    markers = tmp_path / "markers"
    markers.mkdir()
    server = crash_at(tmp_path / "home", "delete-recording")
    try:
        name = finished_job(server, markers)
        with server.client() as client, pytest.raises(httpx.TransportError):
            client.delete(f"/v1/{name}")  # the server dies before it answers
        restart_after_crash(server)
        assert undone_operations(server) == []  # neither the operation nor the link was kept
        with server.client() as client:
            op = client.delete(f"/v1/{name}").json()
            wait_for(lambda: client.get(f"/v1/{op['name']}").json().get("done"), what="the deletion")
            assert client.get(f"/v1/{name}").status_code == 404
        assert undone_operations(server) == []
    finally:
        server.stop()


def test_crash_while_a_deleted_job_is_removed_still_completes_its_operation(tmp_path: Path) -> None:
    """The job was removed and its operation completed in two transactions: a crash in between left the
    operation undone for ever (the job it would be completed for was gone)."""
    markers = tmp_path / "markers"
    markers.mkdir()
    server = crash_at(tmp_path / "home", "delete-finishing")
    try:
        name = finished_job(server, markers)
        with server.client() as client:
            op = client.delete(f"/v1/{name}").json()  # answered; the controller dies removing the job
        restart_after_crash(server)
        with server.client() as client:
            done = wait_for(
                lambda: (got := client.get(f"/v1/{op['name']}").json()).get("done") and got,
                what="the deletion",
            )
            assert done["response"]["@type"] == "type.googleapis.com/google.protobuf.Empty"
            assert client.get(f"/v1/{name}").status_code == 404
    finally:
        server.stop()


def test_crash_while_a_cluster_create_is_recorded_leaves_no_operation_undone(tmp_path: Path) -> None:
    """The create's operation was stored before the cluster: a crash in between left an undone operation."""
    server = crash_at(tmp_path / "home", "cluster-operation")
    try:
        with server.client() as client, pytest.raises(httpx.TransportError):
            client.post(CLUSTERS, params={"modelDevelopmentClusterId": CLUSTER_ID}, json=cluster_body(0))
        restart_after_crash(server)
        assert undone_operations(server) == []
        with server.client() as client:
            assert client.get(f"{CLUSTERS}/{CLUSTER_ID}").status_code == 404
    finally:
        server.stop()


def test_crash_after_a_trial_is_told_to_its_study_leaves_no_study_trial_running(tmp_path: Path) -> None:
    """The trial row was marked ended before the study was told: a crash in between left the study's trial
    RUNNING for ever (its result lost to the search)."""
    import optuna

    markers = tmp_path / "markers"
    markers.mkdir()
    script = tmp_path / "trial.py"
    script.write_text(TRIAL)
    home = tmp_path / "home"
    server = crash_at(home, "trial-told")
    try:
        workload = Workload(server, Ledger(run="crash-points", markers=markers), script)
        body = {**workload.tuning_job(uuid.uuid4().hex, 1), "parallelTrialCount": 1}
        with server.client() as client:
            name = client.post(f"/v1/{server.parent}/hyperparameterTuningJobs", json=body).json()["name"]
        restart_after_crash(server)
        with server.client() as client:
            done = wait_for(
                lambda: (got := client.get(f"/v1/{name}").json())["state"] in TERMINAL and got,
                timeout=90,
                what="the tuning job",
            )
        assert done["state"] == "JOB_STATE_SUCCEEDED", done
        assert [t["state"] for t in done["trials"]] == ["SUCCEEDED"]
        study = optuna.load_study(
            study_name=f"tuning-job-{name.rsplit('/', 1)[-1]}",
            storage=f"sqlite:///{home / 'trainworks.optuna.db'}",
        )
        assert [t.state for t in study.get_trials()] == [optuna.trial.TrialState.COMPLETE]
    finally:
        server.stop()


# A trial that reports once; the hopeless one then waits, reporting nothing more, until it is stopped.
STOPPABLE = """
import argparse, time
import hypertune
parser = argparse.ArgumentParser()
parser.add_argument("--kind")
args, _ = parser.parse_known_args()
hypertune.HyperTune().report_hyperparameter_tuning_metric(
    hyperparameter_metric_tag="score", metric_value=-100.0 if args.kind == "bad" else 1.0, global_step=1)
if args.kind == "bad":
    time.sleep(120)
"""


def test_crash_between_stopping_a_trial_and_cancelling_its_job_keeps_the_trial(tmp_path: Path) -> None:
    """The trial's job was cancelled before the trial was marked stopped early: a crash in between made the
    stopped trial, measurement and all, INFEASIBLE (a failed trial, which can fail the whole job)."""
    from tests.kinds.tuning_jobs.test_api import tuning_body

    script = tmp_path / "trial.py"
    script.write_text(STOPPABLE)
    kinds = {"parameterId": "kind", "categoricalValueSpec": {"values": ["good-a", "good-b", "good-c", "bad"]}}
    body = tuning_body(
        script,
        trials=4,
        parallel=1,
        parameters=[kinds],
        algorithm="GRID_SEARCH",
        medianAutomatedStoppingSpec={},
    )
    server = crash_at(tmp_path / "home", "trial-stopping")
    try:
        with server.client() as client:
            name = client.post(f"/v1/{server.parent}/hyperparameterTuningJobs", json=body).json()["name"]
        restart_after_crash(server)  # the crash comes when the median rule stops the hopeless trial
        with server.client() as client:
            done = wait_for(
                lambda: (got := client.get(f"/v1/{name}").json())["state"] in TERMINAL and got,
                timeout=120,
                what="the tuning job",
            )
            assert done["state"] == "JOB_STATE_SUCCEEDED", done
            bad = [t for t in done["trials"] if t["parameters"][0]["value"] == "bad"]
            assert len(bad) == 1 and bad[0]["state"] == "SUCCEEDED", bad
            assert bad[0]["finalMeasurement"]["metrics"][0]["value"] == -100.0
            assert client.get(f"/v1/{bad[0]['customJob']}").json()["state"] == "JOB_STATE_CANCELLED"
    finally:
        server.stop()


def test_crash_as_a_refused_cluster_update_is_rolled_back_still_fails_its_operation(chaos_home: Path) -> None:
    """The cluster went back to RUNNING before its update's operation was failed: after a crash in between
    the next pass completed the operation as a success, although Slurm had refused the update."""
    require_slurm()
    server = crash_at(chaos_home, "cluster-operation-ended")
    try:
        with server.client() as client:
            created = client.post(
                CLUSTERS, params={"modelDevelopmentClusterId": CLUSTER_ID}, json=cluster_body(0)
            )
            assert created.status_code == 200, created.text
            wait_for(
                lambda: client.get(f"/v1/{created.json()['name']}").json().get("done"),
                timeout=120,
                what="the cluster",
            )
            refused = cluster_body(1)
            refused["orchestrator_spec"]["slurm_spec"]["config"] = {"SelectType": "select/nonexistent"}
            mask = {"updateMask": "orchestrator_spec.slurm_spec.config"}
            op = client.patch(f"{CLUSTERS}/{CLUSTER_ID}", params=mask, json=refused).json()
        restart_after_crash(server)  # Slurm refused it; the server dies as it records that
        with server.client() as client:
            done = wait_for(
                lambda: (got := client.get(f"/v1/{op['name']}").json()).get("done") and got,
                timeout=120,
                what="the update's operation",
            )
            assert "Slurm refused" in done.get("error", {}).get("message", ""), done
            cluster = client.get(f"{CLUSTERS}/{CLUSTER_ID}").json()
        assert cluster["clusterStatus"]["state"] == "RUNNING"
        assert cluster["orchestratorSpec"]["slurmSpec"]["config"]["priority_weight_age"] == "0"
    finally:
        server.stop()
