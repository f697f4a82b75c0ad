"""`trainworks serve --log-format json`: every line the server logs is one JSON object, with an access line
per request, and no credential ever appears in the log."""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.jobs import job, python_pool
from tests.support.server import ServerProcess, wait_job
from trainworks.observability.log_format import JsonFormatter

TOKEN = "tok-json-logs-8c1e4d"
OTHER_KEY = "key-json-logs-77aa90"
JOB_ROUTE = "/v1/projects/{project}/locations/{location}/customJobs/{job_id}"


def read_log(server: ServerProcess) -> list[dict[str, Any]]:
    lines = server.log_path.read_text().splitlines()
    assert lines, "the server logged nothing"
    records = []
    for line in lines:
        record = json.loads(line)  # every line, not only ours: uvicorn's and alembic's too
        assert isinstance(record, dict), line
        records.append(record)
    return records


def test_json_log_lines_with_access_fields_and_no_credentials(tmp_path: Path) -> None:
    server = ServerProcess(
        home=tmp_path / "home", args=["--log-format", "json", "--api-token", f"{TOKEN},{OTHER_KEY}"]
    ).start()
    try:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=server.url, timeout=30) as client:
            created = client.post(
                f"/v1/{server.parent}/customJobs", json=job(python_pool("print('hi')")), headers=bearer
            )
            assert created.status_code == 200, created.text
            name = created.json()["name"]
            job_id = name.rsplit("/", 1)[-1]
            with httpx.Client(base_url=server.url, timeout=30, headers=bearer) as authed:
                assert wait_job(authed, name)["state"] == "JOB_STATE_SUCCEEDED"
            # The other ways of presenting a key: x-goog-api-key and ?key=.
            assert client.get(f"/v1/{name}", headers={"x-goog-api-key": OTHER_KEY}).status_code == 200
            assert client.get(f"/v1/{name}", params={"key": TOKEN}).status_code == 200
            refused = client.get(f"/v1/{name}", headers={"Authorization": "Bearer wrong-token"})
            assert refused.status_code == 403
    finally:
        server.stop()  # flushes everything, including the shutdown lines

    text = server.log_path.read_text()
    assert TOKEN not in text and OTHER_KEY not in text
    records = read_log(server)
    for record in records:
        assert {"time", "level", "logger", "message"} <= record.keys(), record
        assert record["time"].endswith("Z")
        datetime.fromisoformat(record["time"])  # RFC 3339
        assert record["level"] in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
    loggers = {r["logger"] for r in records}
    assert "uvicorn.error" in loggers  # uvicorn's own lines are JSON too
    access = [r for r in records if r["logger"] == "trainworks.access"]
    gets = [r for r in access if r["route"] == JOB_ROUTE and r["method"] == "GET"]
    assert {r["status"] for r in gets} == {200, 403}
    for record in gets:
        assert record["job"] == job_id
        assert record["path"] == f"/v1/{name}"  # never the query string (?key=...)
        assert isinstance(record["duration_ms"], float) and record["duration_ms"] >= 0
    created_line = [r for r in access if r["method"] == "POST"]
    assert created_line and created_line[0]["status"] == 200
    assert created_line[0]["route"] == "/v1/projects/{project}/locations/{location}/customJobs"


def test_text_format_stays_the_default_without_access_lines(tmp_path: Path) -> None:
    server = ServerProcess(home=tmp_path / "home").start()
    try:
        with server.client() as client:
            assert client.get(f"/v1/{server.parent}/customJobs").status_code == 200
    finally:
        server.stop()
    text = server.log_path.read_text()
    assert "Application startup complete" in text
    assert "trainworks.access" not in text
    assert not text.lstrip().startswith("{")


def test_unknown_log_format_is_refused(tmp_path: Path) -> None:
    server = ServerProcess(home=tmp_path / "home", args=["--log-format", "xml"])
    try:
        with pytest.raises(RuntimeError, match="--log-format must be text or json"):
            server.start(timeout=30)
    finally:
        server.stop()  # only does something if it started after all


def test_formatter_redacts_known_tokens_and_keeps_extra_fields() -> None:
    formatter = JsonFormatter(redact={"s3cret-token", ""})
    record = logging.LogRecord("trainworks.x", logging.ERROR, __file__, 1, "got %s", ("s3cret-token",), None)
    try:
        raise ValueError("bad key s3cret-token")
    except ValueError:
        record.exc_info = sys.exc_info()
    record.job = "123"
    record.header = "Bearer s3cret-token"
    line = formatter.format(record)
    assert "s3cret-token" not in line
    body = json.loads(line)
    assert body["message"] == "got [REDACTED]"
    assert body["header"] == "Bearer [REDACTED]"
    assert body["job"] == "123"
    assert body["level"] == "ERROR" and body["logger"] == "trainworks.x"
    assert "ValueError: bad key [REDACTED]" in body["exception"]
