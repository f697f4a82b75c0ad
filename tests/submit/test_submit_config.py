"""The submitter's run configuration: loading YAML, every validation rule with its field path, overrides."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pydantic
import pytest
import yaml

from trainworks.submit.config import (
    MAX_USER_LABELS,
    RunConfig,
    RunConfigError,
    load_run_config,
    parse_duration,
    parse_run_config,
)

FULL_YAML = """\
name: forecast
entry_module: forecast.train
package_dir: ./src/forecast
args: ["--epochs", 3, 0.5, true]
hardware:
  profile: gpu
  machine_type: null
  gpu_type: NVIDIA_TESLA_T4
  gpu_count: 2
  threads: 3
workers: 4
regions: [us-central1, europe-west4]
image: python:3.11
python: /opt/venv/bin/python
code_bucket: gs://my-code/
base_output_dir: gs://my-out/runs
service_account: trainer@proj.iam.gserviceaccount.com
labels: {team: ml, version: 2}
env: {SEED: 42, MODE: fast}
target:
  kind: vertex
  endpoint: http://127.0.0.1:8080
  project: my-project
capacity:
  policy: eager_next_region
  preflight: false
  same_region_retries: 0
  rounds: 3
  backoff_seconds: 1.5
  backoff_max_seconds: 30
  provisioning_timeout: 10m
follow:
  wait_timeout: 0
  stall_grace: 1h
  poll_interval: 0.5
  stream_logs: false
scheduling:
  timeout: 1h30m
  restart_job_on_worker_restart: true
  strategy: spot
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with a run's package: src/forecast/{__init__,train}.py."""
    package = tmp_path / "src" / "forecast"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "train.py").write_text("print('training')\n")
    return tmp_path


def base(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "forecast",
        "entry_module": "forecast.train",
        "package_dir": "./src/forecast",
        "image": "python:3.11",
        "code_bucket": "my-code",
    }
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data


def write(folder: Path, data: Any, name: str = "run.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def load(project: Path, **changes: Any) -> RunConfig:
    return load_run_config(write(project, base(**changes)))


def problems(project: Path, **changes: Any) -> list[str]:
    path = write(project, base(**changes))
    with pytest.raises(RunConfigError) as info:
        load_run_config(path)
    lines = str(info.value).splitlines()
    prefix = f"{path}: "
    assert all(line.startswith(prefix) for line in lines), lines
    return [line[len(prefix) :] for line in lines]


def one_problem(project: Path, **changes: Any) -> str:
    found = problems(project, **changes)
    assert len(found) == 1, found
    return found[0]


# ----------------------------------------------------------------------------------------- valid files
def test_full_yaml_loads_every_field(project: Path) -> None:
    path = project / "run.yaml"
    path.write_text(FULL_YAML)
    cfg = load_run_config(path)

    assert cfg.name == "forecast"
    assert cfg.entry_module == "forecast.train"
    assert cfg.package_dir == (project / "src" / "forecast").resolve()
    assert cfg.args == ["--epochs", "3", "0.5", "true"]
    assert cfg.hardware.profile == "gpu"
    assert cfg.hardware.machine_type is None
    assert cfg.hardware.gpu_type == "T4"  # the enum name is normalised to the short name
    assert cfg.hardware.gpu_count == 2
    assert cfg.hardware.threads == 3
    assert cfg.workers == 4
    assert cfg.regions == ["us-central1", "europe-west4"]
    assert cfg.image == "python:3.11"
    assert cfg.python == "/opt/venv/bin/python"
    assert cfg.code_bucket == "my-code"
    assert cfg.base_output_dir == "gs://my-out/runs"
    assert cfg.service_account == "trainer@proj.iam.gserviceaccount.com"
    assert cfg.labels == {"team": "ml", "version": "2"}
    assert cfg.env == {"SEED": "42", "MODE": "fast"}
    assert (cfg.target.kind, cfg.target.endpoint, cfg.target.project) == (
        "vertex",
        "http://127.0.0.1:8080",
        "my-project",
    )
    cap = cfg.capacity
    assert (cap.policy, cap.preflight, cap.same_region_retries, cap.rounds) == (
        "EAGER_NEXT_REGION",
        False,
        0,
        3,
    )
    assert (cap.backoff_seconds, cap.backoff_max_seconds, cap.provisioning_timeout) == (1.5, 30.0, 600.0)
    assert (cfg.follow.wait_timeout, cfg.follow.stall_grace) == (0.0, 3600.0)
    assert (cfg.follow.poll_interval, cfg.follow.stream_logs) == (0.5, False)
    assert cfg.scheduling.timeout == 5400.0
    assert cfg.scheduling.restart_job_on_worker_restart is True
    assert cfg.scheduling.strategy == "SPOT"
    assert cfg.source == str(path)


def test_minimal_yaml_gets_the_documented_defaults(project: Path) -> None:
    cfg = load(project)
    assert cfg.args == []
    assert cfg.hardware.profile == "cpu"
    assert cfg.hardware.machine_type is None and cfg.hardware.gpu_type is None
    assert cfg.hardware.gpu_count is None and cfg.hardware.threads is None
    assert cfg.workers == 1
    assert cfg.regions == ["us-central1"]
    assert cfg.python == "python3"
    assert cfg.base_output_dir is None and cfg.service_account == ""
    assert cfg.labels == {} and cfg.env == {}
    assert (cfg.target.kind, cfg.target.endpoint, cfg.target.project) == ("trainworks", None, "default")
    cap = cfg.capacity
    assert (cap.policy, cap.preflight, cap.same_region_retries, cap.rounds) == ("FAILOVER", True, 2, 1)
    assert (cap.backoff_seconds, cap.backoff_max_seconds, cap.provisioning_timeout) == (2.0, 60.0, 600.0)
    follow = cfg.follow
    assert (follow.wait_timeout, follow.stall_grace, follow.poll_interval, follow.stream_logs) == (
        86400.0,
        1800.0,
        5.0,
        True,
    )
    assert cfg.scheduling.timeout is None and cfg.scheduling.strategy is None
    assert cfg.scheduling.restart_job_on_worker_restart is False


def test_package_dir_is_relative_to_the_yaml_folder_not_the_cwd(
    project: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    cfg = load(project)
    assert cfg.package_dir == (project / "src" / "forecast").resolve()


def test_parse_run_config_takes_a_base_dir_and_a_source(project: Path) -> None:
    cfg = parse_run_config(base(), "inline", base_dir=project)
    assert cfg.package_dir.name == "forecast"
    with pytest.raises(RunConfigError) as info:
        parse_run_config(base(workers=0), "inline", base_dir=project)
    assert str(info.value) == "inline: workers: must be >= 1, got 0"


def test_the_package_itself_may_be_the_entry_module(project: Path) -> None:
    (project / "src" / "forecast" / "__main__.py").write_text("")
    assert load(project, entry_module="forecast").entry_module == "forecast"


def test_config_is_immutable(project: Path) -> None:
    cfg = load(project)
    with pytest.raises(pydantic.ValidationError):
        cfg.workers = 3  # type: ignore[misc]


def test_a_dumped_config_loads_back_the_same(project: Path) -> None:
    path = project / "run.yaml"
    path.write_text(FULL_YAML)
    cfg = load_run_config(path)
    again = parse_run_config(cfg.model_dump(mode="json"), "staged")
    assert again.model_dump() == cfg.model_dump()
    cpu = load(project)
    assert parse_run_config(cpu.model_dump(mode="json"), "staged").model_dump() == cpu.model_dump()


# ----------------------------------------------------------------------------------------- rules
@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"name": "Forecast"}, "name: 'Forecast' must be lowercase letters, digits and hyphens"),
        ({"name": "forecast_1"}, "name: 'forecast_1' must be lowercase letters"),
        ({"name": "1forecast"}, "name: '1forecast' must be lowercase letters"),
        ({"name": "forecast-"}, "name: 'forecast-' must be lowercase letters"),
        ({"name": "f" * 41}, "name: must be at most 40 characters, got 41"),
        ({"entry_module": "forecast..train"}, "entry_module: 'forecast..train' is not a Python module name"),
        ({"entry_module": "forecast.class"}, "entry_module: 'forecast.class' is not a Python module name"),
        ({"entry_module": "other.train"}, "entry_module: must be inside the staged package 'forecast'"),
        ({"entry_module": "forecast.eval"}, "entry_module: forecast.eval is not in package_dir (no "),
        (
            {"entry_module": "forecast"},
            "entry_module: forecast is not in package_dir (no forecast/__main__.py)",
        ),
        ({"package_dir": "./src/missing"}, "package_dir: ./src/missing does not exist"),
        (
            {"package_dir": "./src/forecast/train.py"},
            "package_dir: ./src/forecast/train.py is not a directory",
        ),
        ({"args": [["--nested"]]}, "args[0]: must be a valid string, got ['--nested']"),
        ({"args": "--epochs 3"}, "args: must be a list, got a string"),
        ({"hardware": {"profile": "tpu"}}, "hardware.profile: must be 'cpu' or 'gpu', got 'tpu'"),
        (
            {"hardware": {"profile": "gpu", "gpu_type": "T4", "gpu_count": 0}},
            "hardware.gpu_count: must be >= 1 when profile is gpu",
        ),
        ({"hardware": {"gpu_type": "T4"}}, "hardware.gpu_type: only allowed when profile is gpu"),
        ({"hardware": {"gpu_count": 2}}, "hardware.gpu_count: only allowed when profile is gpu"),
        (
            {"hardware": {"profile": "gpu"}},
            "hardware.gpu_type: required when profile is gpu: one of T4, L4, V100",
        ),
        (
            {"hardware": {"profile": "gpu", "gpu_type": "T5"}},
            "hardware.gpu_type: unknown GPU type 'T5'; use one of T4, L4",
        ),
        (
            {"hardware": {"machine_type": "n2-standrd-8"}},
            "hardware.machine_type: unknown machine type 'n2-standrd-8'; did you mean n2-standard-8",
        ),
        (
            {"hardware": {"machine_type": "a2-highgpu-1g"}},
            "hardware.machine_type: a2-highgpu-1g comes with 1 x NVIDIA_TESLA_A100; set profile: gpu",
        ),
        ({"hardware": {"threads": 0}}, "hardware.threads: must be >= 1, got 0"),
        (
            {"hardware": {"profile": "gpu", "gpu_type": "T4", "gpu_count": 8}},
            "hardware.gpu_count: T4 takes 1, 2 or 4 GPUs per replica, got 8",
        ),
        (
            {"hardware": {"profile": "gpu", "gpu_type": "L4", "gpu_count": 3}},
            "hardware.gpu_count: L4 takes 1, 2, 4 or 8 GPUs per replica",
        ),
        (
            {"hardware": {"profile": "gpu", "gpu_type": "T4", "machine_type": "e2-standard-4"}},
            "hardware.machine_type: machine type e2-standard-4 does not support accelerators",
        ),
        (
            {"hardware": {"profile": "gpu", "machine_type": "a2-highgpu-2g", "gpu_count": 1}},
            "hardware.gpu_count: machine type a2-highgpu-2g requires accelerator_type NVIDIA_TESLA_A100 "
            "with accelerator_count 2",
        ),
        ({"workers": 0}, "workers: must be >= 1, got 0"),
        ({"regions": []}, "regions: at least one region is required"),
        ({"regions": ["us-central1", "us-central1"]}, "regions[1]: us-central1 is listed twice"),
        ({"regions": ["us-central1", "Mars"]}, "regions[1]: 'Mars' is not a region name"),
        ({"image": ""}, "image: must not be empty"),
        ({"python": "python -u"}, "python: 'python -u' must not contain spaces"),
        ({"code_bucket": "gs://my-code/sub/dir"}, "code_bucket: 'gs://my-code/sub/dir' has an object path"),
        ({"code_bucket": "gs://"}, "code_bucket: a bucket name is required"),
        ({"code_bucket": "My_Code"}, "code_bucket: 'My_Code' is not a valid bucket name"),
        ({"base_output_dir": "/local/out"}, "base_output_dir: must be a gs:// prefix"),
        ({"service_account": "trainer"}, "service_account: 'trainer' is not a service account email"),
        ({"labels": {"Team": "ml"}}, "labels.Team: label keys must start with a lowercase letter"),
        ({"labels": {"1team": "ml"}}, "labels.1team: label keys must start with a lowercase letter"),
        ({"labels": {"team": "ML"}}, "labels.team: label value 'ML' may contain only lowercase letters"),
        ({"labels": {"team.name": "ml"}}, "labels.team.name: label keys may contain only lowercase letters"),
        ({"labels": {"k" * 64: "v"}}, f"labels.{'k' * 64}: label keys must be 1 to 63 characters long"),
        ({"labels": {"team": "v" * 64}}, "labels.team: label values must be at most 63 characters long"),
        (
            {"labels": {"trainworks-run-id": "x"}},
            "labels.trainworks-run-id: keys starting with 'trainworks-'",
        ),
        (
            {"labels": {f"l{i}": "v" for i in range(MAX_USER_LABELS + 1)}},
            f"labels: at most {MAX_USER_LABELS} labels are allowed",
        ),
        ({"env": {"1BAD": "x"}}, "env.1BAD: not a valid variable name"),
        ({"env": {"EMPTY": ""}}, "env.EMPTY: the value must not be empty"),
        ({"env": {"TRAINWORKS_RUN_ID": "x"}}, "env.TRAINWORKS_RUN_ID: set by the submitter"),
        ({"target": {"kind": "sagemaker"}}, "target.kind: must be 'trainworks' or 'vertex', got 'sagemaker'"),
        ({"target": {"endpoint": "127.0.0.1:8080"}}, "target.endpoint: '127.0.0.1:8080' is not a server URL"),
        (
            {"target": {"kind": "vertex", "endpoint": "ftp://x"}},
            "target.endpoint: 'ftp://x' is not an API endpoint",
        ),
        ({"target": {"project": "My Project"}}, "target.project: 'My Project' is not a project id"),
        ({"capacity": {"policy": "RANDOM"}}, "capacity.policy: must be 'FAILOVER' or 'EAGER_NEXT_REGION'"),
        ({"capacity": {"same_region_retries": -1}}, "capacity.same_region_retries: must be >= 0, got -1"),
        ({"capacity": {"rounds": 0}}, "capacity.rounds: must be >= 1, got 0"),
        (
            {"capacity": {"backoff_seconds": 10, "backoff_max_seconds": 5}},
            "capacity.backoff_max_seconds: must be >= backoff_seconds (10)",
        ),
        ({"capacity": {"provisioning_timeout": 0}}, "capacity.provisioning_timeout: must be > 0, got 0"),
        (
            {"capacity": {"provisioning_timeout": "soon"}},
            "capacity.provisioning_timeout: 'soon' is not a duration",
        ),
        ({"follow": {"wait_timeout": "-5s"}}, "follow.wait_timeout: '-5s' is not a duration"),
        ({"follow": {"wait_timeout": -5}}, "follow.wait_timeout: must not be negative"),
        ({"follow": {"stall_grace": 0}}, "follow.stall_grace: must be > 0, got 0"),
        ({"follow": {"poll_interval": 0}}, "follow.poll_interval: must be > 0, got 0"),
        ({"follow": {"stream_logs": "sometimes"}}, "follow.stream_logs: must be a valid boolean"),
        (
            {"scheduling": {"strategy": "cheap"}},
            "scheduling.strategy: must be 'STANDARD', 'SPOT' or 'FLEX_START'",
        ),
        ({"scheduling": {"timeout": "0s"}}, "scheduling.timeout: must be > 0, got '0s'"),
        ({"hardware": "big"}, "hardware: must be a mapping, got a string"),
    ],
)
def test_each_rule_names_its_field(project: Path, changes: dict[str, Any], expected: str) -> None:
    found = one_problem(project, **changes)
    assert found.startswith(expected), found


@pytest.mark.parametrize("field", ["name", "entry_module", "package_dir", "image", "code_bucket"])
def test_required_fields(project: Path, field: str) -> None:
    data = base()
    del data[field]
    with pytest.raises(RunConfigError) as info:
        load_run_config(write(project, data))
    assert str(info.value).endswith(f"run.yaml: {field}: required")


def test_package_folder_must_be_an_identifier(project: Path) -> None:
    bad = project / "src" / "my-pkg"
    bad.mkdir()
    found = one_problem(project, package_dir="src/my-pkg", entry_module="forecast.train")
    assert found.startswith("package_dir: the folder name 'my-pkg' is the top-level package name")


@pytest.mark.parametrize(
    ("key", "where", "expected"),
    [
        ("gpu_cout", "hardware", "hardware.gpu_cout: unknown key; did you mean 'gpu_count'?"),
        ("codeBucket", None, "codeBucket: unknown key; did you mean 'code_bucket'?"),
        ("worker", None, "worker: unknown key; did you mean 'workers'?"),
        ("pol", "capacity", "capacity.pol: unknown key; did you mean 'policy'?"),
        ("zzz", "follow", "follow.zzz: unknown key; known keys: wait_timeout, stall_grace"),
    ],
)
def test_unknown_keys_get_a_suggestion(project: Path, key: str, where: str | None, expected: str) -> None:
    data = base()
    if where:
        data[where] = {key: 1}
    else:
        data[key] = 1
    with pytest.raises(RunConfigError) as info:
        load_run_config(write(project, data))
    assert str(info.value).startswith(f"{project / 'run.yaml'}: {expected}")


def test_every_problem_on_its_own_line(project: Path) -> None:
    found = problems(
        project,
        name="Bad Name",
        workers=0,
        regions=["us-central1", "us-central1"],
        labels={"Team": "x"},
        hardware={"threads": 0, "gpu_cout": 1},
        capacity={"rounds": 0},
    )
    fields = [line.split(":", 1)[0] for line in found]
    assert fields == [
        "name",
        "hardware.threads",
        "hardware.gpu_cout",
        "workers",
        "regions[1]",
        "labels.Team",
        "capacity.rounds",
    ]


# ----------------------------------------------------------------------------------------- coercions
@pytest.mark.parametrize(
    ("value", "seconds"),
    [(600, 600.0), (1.5, 1.5), ("600", 600.0), ("600s", 600.0), ("10m", 600.0), ("1h", 3600.0),
     ("1h30m", 5400.0), ("2d", 172800.0), (" 90S ", 90.0), ("0.5s", 0.5), (0, 0.0)],
)  # fmt: skip
def test_duration_forms(project: Path, value: Any, seconds: float) -> None:
    assert parse_duration(value) == seconds
    cfg = load(project, follow={"wait_timeout": value}, scheduling={"timeout": value or 1})
    assert cfg.follow.wait_timeout == seconds
    assert cfg.scheduling.timeout == (seconds or 1.0)


@pytest.mark.parametrize("value", ["soon", "10x", "1h 30m", "m", "", True, [1], -1, "1.5.5s"])
def test_bad_durations(value: Any) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)


@pytest.mark.parametrize(
    ("given", "expected"), [("gs://my-code", "my-code"), ("my-code", "my-code"), ("gs://my-code/", "my-code")]
)
def test_code_bucket_is_normalised_to_the_bucket_name(project: Path, given: str, expected: str) -> None:
    assert load(project, code_bucket=given).code_bucket == expected


def test_names_are_case_insensitive_where_the_wire_is_not(project: Path) -> None:
    cfg = load(
        project,
        hardware={"profile": "GPU", "gpu_type": "a100-80gb"},
        target={"kind": "Vertex", "endpoint": "us-central1-aiplatform.googleapis.com"},
        capacity={"policy": "eager-next-region"},
        scheduling={"strategy": "flex_start"},
    )
    assert (cfg.hardware.profile, cfg.hardware.gpu_type) == ("gpu", "A100_80GB")
    assert cfg.target.kind == "vertex"
    assert cfg.capacity.policy == "EAGER_NEXT_REGION"
    assert cfg.scheduling.strategy == "FLEX_START"


def test_gpu_count_may_come_from_a_machine_with_built_in_gpus(project: Path) -> None:
    cfg = load(project, hardware={"profile": "gpu", "machine_type": "a3-highgpu-4g"})
    assert cfg.hardware.gpu_type is None and cfg.hardware.gpu_count is None


# ----------------------------------------------------------------------------------------- file problems
def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(RunConfigError) as info:
        load_run_config(path)
    assert str(info.value).startswith(f"{path}: cannot read the file: ")


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("name: forecast\nargs: [unclosed\n")
    with pytest.raises(RunConfigError) as info:
        load_run_config(path)
    assert str(info.value).startswith(f"{path}: not valid YAML: line 3, column 1: ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty; expected a mapping of settings"),
        ("- a\n- b\n", "expected a mapping of settings, got a list"),
    ],
)
def test_the_file_must_hold_a_mapping(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(RunConfigError) as info:
        load_run_config(path)
    assert str(info.value) == f"{path}: {expected}"


def test_errors_are_value_errors_with_their_problems(project: Path) -> None:
    with pytest.raises(ValueError) as info:
        load(project, workers=0)
    assert isinstance(info.value, RunConfigError)
    assert ("workers", "must be >= 1, got 0") in info.value.problems


# ----------------------------------------------------------------------------------------- overrides
def test_overrides_return_a_validated_copy(project: Path) -> None:
    cfg = load(project, regions=["us-central1", "europe-west4"], workers=2)
    before = copy.deepcopy(cfg.model_dump())
    changed = cfg.with_overrides(regions=["asia-east1"], workers=5)
    assert (changed.regions, changed.workers) == (["asia-east1"], 5)
    assert cfg.model_dump() == before
    assert cfg.with_overrides().model_dump() == cfg.model_dump()
    assert cfg.with_overrides(workers=3).regions == ["us-central1", "europe-west4"]
    assert changed.source.endswith("(with overrides)")


def test_overrides_keep_gpu_settings_and_normalised_values(project: Path) -> None:
    cfg = load(project, hardware={"profile": "gpu", "gpu_type": "t4"}, code_bucket="gs://my-code")
    changed = cfg.with_overrides(workers=2)
    assert changed.hardware.model_dump() == cfg.hardware.model_dump()
    assert changed.code_bucket == "my-code"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"workers": 0}, "workers: must be >= 1, got 0"),
        ({"regions": []}, "regions: at least one region is required"),
        ({"regions": ["us-east1", "us-east1"]}, "regions[1]: us-east1 is listed twice"),
    ],
)
def test_bad_overrides_are_reported(project: Path, overrides: dict[str, Any], expected: str) -> None:
    path = write(project, base())
    cfg = load_run_config(path)
    with pytest.raises(RunConfigError) as info:
        cfg.with_overrides(**overrides)
    assert str(info.value).startswith(f"{path} (with overrides): {expected}")
