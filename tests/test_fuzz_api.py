"""Schemathesis against the server's own /openapi.json: every operation, a few thousand generated requests.

A real server process is fuzzed over HTTP. Each operation gets valid requests (per its description) and,
where its parameters can be violated, invalid ones; every response must be free of 5xx and conform to the
described schema (errors are google.rpc bodies, or the GCS error form under /storage). Runs are derandomized
so CI sees the same cases each time; findings get a plain reproduction in tests/test_fuzz_regressions.py.

What is not fuzzed with valid input, and why:
- the replica shell WebSocket: not an HTTP operation, so it is not in the description at all;
- log following (`follow=true`) streams until the job ends: the parameter is pinned to false;
- creating or patching training clusters (modelDevelopmentClusters) starts real daemons: only requests that
  violate the description (which must fail validation with a 4xx) are sent to them.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.support.server import ServerProcess

# Per operation and mode: ~125 operations x 2 modes x 10 keeps the file near a minute.
EXAMPLES = 10
MIN_CASES = 1800
CHECKS = [not_a_server_error, response_schema_conformance]


@dataclass
class Outcome:
    cases: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    covered: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path_factory.mktemp("fuzz-home")).start()
    try:
        yield proc
    finally:
        proc.stop()


def _modes(method: str, path: str) -> tuple[GenerationMode, ...]:
    if "/modelDevelopmentClusters" in path and method in ("POST", "PATCH"):
        return (GenerationMode.NEGATIVE,)
    return (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)


def _fuzz(
    operation: Any, mode: GenerationMode, base_url: str, session: requests.Session, out: Outcome
) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        if operation.path.endswith("/logs"):
            case.query = {**(case.query or {}), "follow": "false"}  # never hold a stream open
        response = case.call(base_url=base_url, session=session, timeout=30)
        out.cases += 1
        out.statuses[response.status_code] += 1
        out.covered.add(operation.label)
        try:
            case.validate_response(response, checks=CHECKS)
        except Exception as exc:  # a schemathesis FailureGroup: keep going, report them all at the end
            out.failures.append(f"{operation.label} [{mode.value}]: {exc}\n  {case.as_curl_command()}")

    # Unsatisfiable: nothing to violate, in an operation whose only parameters are free-form strings.
    with contextlib.suppress(Unsatisfiable):
        run()


def test_every_operation_survives_fuzzing(fuzz_server: ServerProcess) -> None:
    schema = schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    out = Outcome()
    with requests.Session() as session:
        for operation in operations:
            for mode in _modes(operation.method.upper(), operation.path):
                _fuzz(operation, mode, fuzz_server.url, session, out)

    report = "\n".join(out.failures[:20])
    assert not out.failures, f"{len(out.failures)} failing cases:\n{report}"
    assert {op.label for op in operations} == out.covered
    assert out.cases >= MIN_CASES, out.cases
    # The run reached the services both ways: accepted requests and field validation errors.
    assert out.statuses[200] > 0 and out.statuses[400] > 0, out.statuses
    assert not [s for s in out.statuses if s >= 500], out.statuses
    print(f"fuzzed {len(operations)} operations with {out.cases} cases: {dict(sorted(out.statuses.items()))}")
    assert fuzz_server.process is not None and fuzz_server.process.poll() is None


def test_description_covers_hand_read_parameters(fuzz_server: ServerProcess) -> None:
    """Routes read bodies and query parameters by hand; the description must still say what they take."""
    described = requests.get(fuzz_server.url + "/openapi.json", timeout=30).json()
    paths = described["paths"]
    jobs = paths["/v1/projects/{project}/locations/{location}/customJobs"]
    assert jobs["post"]["requestBody"]["required"] is True
    assert {p["name"] for p in jobs["get"]["parameters"] if p["in"] == "query"} >= {
        "pageSize",
        "pageToken",
        "filter",
        "readMask",
    }
    for path, operations in paths.items():
        for method, operation in operations.items():
            assert "422" not in operation["responses"], (method, path)  # validation answers 400
            if method in ("post", "patch") and path.endswith(("Jobs", "Resources", "datasets", "Pipelines")):
                assert "requestBody" in operation, (method, path)
    assert "HTTPValidationError" not in described.get("components", {}).get("schemas", {})
