"""`trainworks hp-tuning-jobs` and its REST client methods: config and ranking units, then the CLI as
subprocesses against a real server whose trials report with cloudml-hypertune. Every test waits for
states, never for time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import command_forks
from tests.support.server import LOCATION, ServerProcess, wait_for
from trainworks.kernel.names import FlagError
from trainworks.kinds.tuning_jobs.cli import build_tuning_job, normalize_algorithm, tuning_job_name
from trainworks.kinds.tuning_jobs.render import best_metric_text, rank_trials, trials_progress
from trainworks.kinds.tuning_jobs.wire import HyperparameterTuningJob

REGION = ("--region", LOCATION)

# Reports score = -(x - 1)^2 at step 1, so x=1 is best. x >= 3 reports nothing: that trial is INFEASIBLE.
# --steps/--pause make a slow trial for the cancel test.
TRIAL = """
import argparse, time
import hypertune
parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float, required=True)
parser.add_argument("--steps", type=int, default=1)
parser.add_argument("--pause", type=float, default=0.0)
args, _ = parser.parse_known_args()
if args.x < 3:
    reporter = hypertune.HyperTune()
    for step in range(1, args.steps + 1):
        reporter.report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag="score", metric_value=-((args.x - 1.0) ** 2), global_step=step
        )
        time.sleep(args.pause)
"""

# GRID_SEARCH over DISCRETE x: trial n gets the n-th value, so the trial IDs and their scores are known.
GRID = [0.5, 1.0, 2.0, 3.0]  # scores -0.25, 0, -1, INFEASIBLE -> best first: trials 2, 1, 3, then 4


@pytest.fixture(scope="module")
def trial_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hp-trial") / "trial.py"
    path.write_text(TRIAL)
    return path


def camel_config(script: Path, args: list[str] | None = None, **top: Any) -> dict[str, Any]:
    """gcloud's documented shape: studySpec and trialJobSpec, camelCase keys."""
    return {
        "studySpec": {
            "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x", "discreteValueSpec": {"values": GRID}}],
            "measurementSelectionType": "LAST_MEASUREMENT",
        },
        "trialJobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": 1,
                    "containerSpec": {
                        "imageUri": "python:3.11",
                        "command": [sys.executable, str(script)],
                        "args": args or [],
                    },
                }
            ]
        },
        **top,
    }


def snake_config(script: Path) -> dict[str, Any]:
    """The same job with snake_case keys (and a single worker pool without a list, as gcloud's help)."""
    return {
        "display_name": "from-file",
        "max_trial_count": 2,
        "parallel_trial_count": 2,
        "labels": {"team_name": "ml"},
        "study_spec": {
            "metrics": [{"metric_id": "score", "goal": "MINIMIZE"}],
            "parameters": [
                {
                    "parameter_id": "x",
                    "double_value_spec": {"min_value": 0.5, "max_value": 2.0},
                    "scale_type": "UNIT_LINEAR_SCALE",
                }
            ],
            "algorithm": "RANDOM_SEARCH",
            "median_automated_stopping_spec": {"use_elapsed_duration": False},
        },
        "trial_job_spec": {
            "worker_pool_specs": {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "container_spec": {"image_uri": "python:3.11", "command": [sys.executable, str(script)]},
            }
        },
    }


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def cli(server: ServerProcess, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRAINWORKS_ENDPOINT": server.url, "COLUMNS": "200"}
    env.pop("TRAINWORKS_REGION", None)
    return command_forks.run_cli(["hp-tuning-jobs", *args], env=env, timeout=timeout)


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result


def create_json(server: ServerProcess, config: Path, *flags: str) -> dict[str, Any]:
    result = ok(cli(server, "create", "--config", str(config), *REGION, "--format", "json", *flags))
    job: dict[str, Any] = json.loads(result.stdout)
    return job


def describe_json(server: ServerProcess, name: str) -> dict[str, Any]:
    job: dict[str, Any] = json.loads(ok(cli(server, "describe", name, "--format", "json")).stdout)
    return job


# ====================================================================== config and ranking (no server)
def test_camel_and_snake_case_configs_give_the_same_fields(tmp_path: Path, trial_script: Path) -> None:
    snake = build_tuning_job(config=write(tmp_path / "snake.yaml", snake_config(trial_script)))
    assert snake["displayName"] == "from-file"
    assert (snake["maxTrialCount"], snake["parallelTrialCount"]) == (2, 2)
    assert snake["labels"] == {"team_name": "ml"}  # label keys are not camelized
    study = snake["studySpec"]
    assert study["metrics"] == [{"metricId": "score", "goal": "MINIMIZE"}]
    assert study["parameters"][0]["doubleValueSpec"] == {"minValue": 0.5, "maxValue": 2.0}
    assert study["medianAutomatedStoppingSpec"] == {"useElapsedDuration": False}
    pools = snake["trialJobSpec"]["workerPoolSpecs"]
    assert len(pools) == 1 and pools[0]["containerSpec"]["imageUri"] == "python:3.11"

    camel = build_tuning_job(
        config=write(tmp_path / "camel.yaml", camel_config(trial_script)), display_name="d"
    )
    assert camel["studySpec"]["parameters"] == [{"parameterId": "x", "discreteValueSpec": {"values": GRID}}]
    assert (camel["maxTrialCount"], camel["parallelTrialCount"]) == (1, 1)  # gcloud's defaults


def test_flags_override_the_file(tmp_path: Path, trial_script: Path) -> None:
    body = build_tuning_job(
        config=write(tmp_path / "snake.yaml", snake_config(trial_script)),
        display_name="flag-name",
        max_trial_count=7,
        parallel_trial_count=3,
        algorithm="grid-search",
        labels=["team_name=infra,env=dev"],
    )
    assert body["displayName"] == "flag-name"
    assert (body["maxTrialCount"], body["parallelTrialCount"]) == (7, 3)
    assert body["studySpec"]["algorithm"] == "GRID_SEARCH"
    assert body["labels"] == {"team_name": "infra", "env": "dev"}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"workerPoolSpecs": []}, r"has no studySpec and no trialJobSpec; the CustomJobSpec of the trials"),
        ({"studySpec": {}, "trialJobSpec": []}, r"trialJobSpec must be a mapping"),
    ],
)
def test_bad_configs(tmp_path: Path, data: dict[str, Any], expected: str) -> None:
    with pytest.raises(FlagError, match=expected) as info:
        build_tuning_job(config=write(tmp_path / "c.yaml", data), display_name="d")
    assert info.value.flag == "--config"
    with pytest.raises(FlagError, match="cannot read"):
        build_tuning_job(config=tmp_path / "missing.yaml", display_name="d")


def test_names_and_algorithms() -> None:
    assert tuning_job_name("42", "p", "r") == "projects/p/locations/r/hyperparameterTuningJobs/42"
    full = "projects/p/locations/r/hyperparameterTuningJobs/42"
    assert tuning_job_name(full, "x", None) == full
    with pytest.raises(FlagError, match="not a HyperparameterTuningJob name"):
        tuning_job_name("projects/p/locations/r/customJobs/42", "p", "r")
    with pytest.raises(FlagError, match="a region is needed"):
        tuning_job_name("42", "p", None)
    assert normalize_algorithm("random-search") == "RANDOM_SEARCH"
    assert normalize_algorithm("GRID_SEARCH") == "GRID_SEARCH"
    with pytest.raises(FlagError):
        normalize_algorithm("BAYES")


def _trial(tid: str, state: str, value: Any = None, reason: str = "") -> dict[str, Any]:
    trial: dict[str, Any] = {"id": tid, "state": state, "parameters": [{"parameterId": "x", "value": 1.0}]}
    if value is not None:
        trial["finalMeasurement"] = {"stepCount": "1", "metrics": [{"metricId": "m", "value": value}]}
    if reason:
        trial["infeasibleReason"] = reason
    return trial


@pytest.mark.parametrize(("goal", "order"), [("MAXIMIZE", ["3", "1", "2"]), ("MINIMIZE", ["2", "1", "3"])])
def test_rank_trials_follows_the_goal(goal: str, order: list[str]) -> None:
    wire = {
        "studySpec": {"metrics": [{"metricId": "m", "goal": goal}]},
        "maxTrialCount": 8,
        "trials": [
            _trial("10", "INFEASIBLE", reason="no measurement of m"),
            _trial("1", "SUCCEEDED", 0.5),
            _trial("5", "ACTIVE"),
            _trial("2", "SUCCEEDED", "-Infinity" if goal == "MINIMIZE" else -1.0),
            _trial("4", "SUCCEEDED", "NaN"),
            _trial("3", "SUCCEEDED", 2.0 if goal == "MAXIMIZE" else 9.0),
        ],
    }
    job = HyperparameterTuningJob.from_server(wire)
    assert [t.id for t in rank_trials(job)] == [*order, "4", "5", "10"]
    assert trials_progress(job) == "5/8"
    assert best_metric_text(job).endswith(f"(trial {order[0]})")
    only_infeasible = {"studySpec": wire["studySpec"], "trials": [wire["trials"][0]]}
    assert best_metric_text(HyperparameterTuningJob.from_server(only_infeasible)) == ""


# ====================================================================== the CLI against a real server
def test_create_wait_describe_list(server: ServerProcess, tmp_path: Path, trial_script: Path) -> None:
    config = write(tmp_path / "hp.yaml", camel_config(trial_script, maxFailedTrialCount=1, maxTrialCount=9))
    created = create_json(
        server,
        config,
        "--display-name",
        "grid-study",
        "--max-trial-count",
        "4",
        "--parallel-trial-count",
        "2",
        "--algorithm",
        "GRID_SEARCH",
        "--labels",
        "team=ml",
    )
    name = created["name"]
    assert "/hyperparameterTuningJobs/" in name
    assert created["maxTrialCount"] == 4 and created["maxFailedTrialCount"] == 1  # flag over file, file kept
    assert created["studySpec"]["algorithm"] == "GRID_SEARCH"
    assert created["labels"] == {"team": "ml"}

    waited = ok(cli(server, "wait", name, "--poll-interval", "0.2", "--timeout", "150"))
    assert "JOB_STATE_SUCCEEDED" in waited.stdout

    job = describe_json(server, name)
    assert job["state"] == "JOB_STATE_SUCCEEDED"
    by_id = {t["id"]: t for t in job["trials"]}
    assert [by_id[i]["parameters"][0]["value"] for i in "1234"] == GRID
    assert by_id["4"]["state"] == "INFEASIBLE"

    human = ok(cli(server, "describe", name.rsplit("/", 1)[-1], *REGION)).stdout
    assert "grid-study" in human and "score (MAXIMIZE)" in human and "GRID_SEARCH" in human
    assert "Best trial:" in human and "score=0 (trial 2): x=1" in human
    lines = human.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("TRIAL_ID"))
    rows = [line.split() for line in lines[header + 1 : header + 5]]
    assert [row[0] for row in rows] == ["2", "1", "3", "4"]  # best first, INFEASIBLE last
    assert [row[1] for row in rows] == ["SUCCEEDED"] * 3 + ["INFEASIBLE"]
    assert rows[0][2:4] == ["x=1", "0"] and rows[1][2:4] == ["x=0.5", "-0.25"]
    assert rows[0][-1] == by_id["2"]["customJob"].rsplit("/", 1)[-1]  # the custom job ID
    assert "no measurement of score" in lines[header + 4]

    listed = json.loads(ok(cli(server, "list", *REGION, "--format", "json")).stdout)
    mine = [j for j in listed if j["name"] == name]
    assert len(mine) == 1 and "trials" not in mine[0]  # as List returns it

    table = ok(cli(server, "list", *REGION, "--filter", "labels.team=ml")).stdout
    assert table.splitlines()[0].split() == [
        "HYPERPARAMETER_TUNING_JOB_ID",
        "DISPLAY_NAME",
        "STATE",
        "TRIALS",
        "BEST_METRIC",
    ]
    row = next(line for line in table.splitlines() if line.startswith(name.rsplit("/", 1)[-1]))
    assert row.split() == [
        name.rsplit("/", 1)[-1],
        "grid-study",
        "JOB_STATE_SUCCEEDED",
        "4/4",
        "score=0",
        "(trial",
        "2)",
    ]
    yaml_list = yaml.safe_load(ok(cli(server, "list", *REGION, "--limit", "1", "--format", "yaml")).stdout)
    assert len(yaml_list) == 1


def test_snake_case_config_runs(server: ServerProcess, tmp_path: Path, trial_script: Path) -> None:
    config = write(tmp_path / "snake.yaml", snake_config(trial_script))
    flags = ("--max-trial-count", "1", "--parallel-trial-count", "1")
    result = ok(cli(server, "create", "--config", str(config), *REGION, *flags))
    assert "is submitted successfully" in result.stderr
    name = result.stderr.split("HyperparameterTuningJob [", 1)[1].split("]", 1)[0]
    assert "from-file" in result.stdout and "score (MINIMIZE)" in result.stdout
    waited = json.loads(ok(cli(server, "wait", name, "--format", "json", "--timeout", "150")).stdout)
    assert waited["maxTrialCount"] == 1 and waited["labels"] == {"team_name": "ml"}
    assert waited["studySpec"]["algorithm"] == "RANDOM_SEARCH"
    (trial,) = waited["trials"]
    x = trial["parameters"][0]["value"]
    assert trial["finalMeasurement"]["metrics"][0]["value"] == pytest.approx(-((x - 1.0) ** 2))


def test_cancel_then_delete_a_slow_study(server: ServerProcess, tmp_path: Path, trial_script: Path) -> None:
    config = write(
        tmp_path / "slow.yaml",
        camel_config(trial_script, args=["--steps", "100000", "--pause", "0.05"], displayName="slow"),
    )
    # Only feasible values: three quick infeasible trials in a row (x = 3.0) would end the study first.
    study = yaml.safe_load(config.read_text())
    study["studySpec"]["parameters"][0]["discreteValueSpec"]["values"] = GRID[:3]
    config.write_text(yaml.safe_dump(study))
    name = create_json(server, config, "--max-trial-count", "4", "--parallel-trial-count", "2")["name"]
    wait_for(
        lambda: (
            len([t for t in describe_json(server, name).get("trials", []) if t["state"] == "ACTIVE"]) == 2
        ),
        timeout=120,
        what="two active trials",
    )
    result = ok(cli(server, "cancel", name))
    assert "Request to cancel" in result.stderr

    waited = cli(server, "wait", name, "--poll-interval", "0.2", "--timeout", "150")
    assert waited.returncode == 3, waited.stderr  # issue 19: a cancelled job exits 3
    assert "JOB_STATE_CANCELLED" in waited.stdout and "Traceback" not in waited.stderr
    job = describe_json(server, name)
    assert job["state"] == "JOB_STATE_CANCELLED" and job["error"]["code"] == 1

    again = cli(server, "cancel", name)  # already finished
    assert again.returncode == 1 and again.stderr.startswith("ERROR: FAILED_PRECONDITION")

    deleted = ok(cli(server, "delete", name))
    assert f"Deleted HyperparameterTuningJob [{name}]" in deleted.stderr
    gone = cli(server, "describe", name)
    assert gone.returncode == 1 and gone.stderr.startswith("ERROR: NOT_FOUND")


def test_validation_error_names_the_field(server: ServerProcess, tmp_path: Path, trial_script: Path) -> None:
    data = camel_config(trial_script, displayName="two-metrics")
    data["studySpec"]["metrics"].append({"metricId": "other", "goal": "MINIMIZE"})
    result = cli(server, "create", "--config", str(write(tmp_path / "two.yaml", data)), *REGION)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("ERROR: INVALID_ARGUMENT")
    assert "  - study_spec.metrics" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize(
    "flags",
    [
        ("--algorithm", "BAYES"),
        ("--max-trial-count", "0"),
        ("--bogus",),
        ("--labels", "novalue"),
    ],
)
def test_bad_flags_exit_2(
    server: ServerProcess, tmp_path: Path, trial_script: Path, flags: tuple[str, ...]
) -> None:
    config = write(tmp_path / "hp.yaml", camel_config(trial_script, displayName="bad"))
    result = cli(server, "create", "--config", str(config), *REGION, *flags)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr


def test_config_errors_exit_2(server: ServerProcess, tmp_path: Path) -> None:
    missing = cli(server, "create", "--config", str(tmp_path / "nope.yaml"), *REGION, "--display-name", "d")
    assert missing.returncode == 2 and "Invalid value for [--config]" in missing.stderr
    no_config = cli(server, "create", *REGION, "--display-name", "d")
    assert no_config.returncode == 2 and "--config" in no_config.stderr
    no_region = cli(server, "describe", "42")
    assert no_region.returncode == 2 and "--region" in no_region.stderr
