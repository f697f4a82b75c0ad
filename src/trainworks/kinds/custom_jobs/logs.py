"""Replica and service logs of a job: read once, or followed until the job ends."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainworks.config import Settings
from trainworks.jobs.enums import JobState
from trainworks.kernel.errors import not_found
from trainworks.kernel.names import custom_job_name, numeric_id
from trainworks.kernel.projects import Projects
from trainworks.kinds.custom_jobs.store import JobStore


@dataclass
class _Source:
    task: str
    stream: str  # stdout | stderr | service
    path: Path
    offset: int = 0
    pending: bytes = b""


class LogService:
    def __init__(self, settings: Settings, jobs: JobStore, projects: Projects) -> None:
        self.settings = settings
        self.jobs = jobs
        self.projects = projects

    def _sources(self, job_dir: Path, known: dict[Path, _Source], task: str | None) -> list[_Source]:
        candidates = []
        if job_dir.is_dir():
            for replica_dir in sorted(p for p in job_dir.iterdir() if p.is_dir()):
                for stream in ("stdout", "stderr"):
                    candidates.append((replica_dir.name, stream, replica_dir / f"{stream}.log"))
        # Service messages last in each pass: "Job completed successfully." follows the replicas' output.
        candidates.append(("service", "service", job_dir / "service.log"))
        for name, stream, path in candidates:
            if task and name not in (task, "service"):
                continue
            if path not in known and path.exists():
                known[path] = _Source(name, stream, path)
        return list(known.values())

    @staticmethod
    def _entry(source: _Source, line: str) -> dict[str, Any]:
        if source.stream == "service":
            try:
                data = json.loads(line)
                return {
                    "task": "service",
                    "severity": data.get("severity", "INFO"),
                    "time": data.get("time"),
                    "text": data.get("message", ""),
                }
            except ValueError:
                pass
        severity = "ERROR" if source.stream == "stderr" else "INFO"
        return {"task": source.task, "severity": severity, "stream": source.stream, "text": line}

    @staticmethod
    def _read(source: _Source, final: bool) -> list[str]:
        try:
            with open(source.path, "rb") as handle:
                handle.seek(source.offset)
                chunk = handle.read(1 << 20)
        except OSError:
            return []
        source.offset += len(chunk)
        data = source.pending + chunk
        lines = data.split(b"\n")
        source.pending = lines.pop()
        if final and source.pending and not chunk:
            lines.append(source.pending)
            source.pending = b""
        return [line.decode("utf-8", "replace").rstrip("\r") for line in lines]

    def entries(
        self,
        project: str,
        location: str,
        job_id: str,
        task: str | None = None,
        follow: bool = False,
        poll_seconds: float = 0.2,
    ) -> Iterator[dict[str, Any]]:
        jid = numeric_id(job_id, "CustomJob")
        number = self.projects.number(project, location)
        if self.jobs.get(jid, number, location) is None:
            raise not_found(f"CustomJob {custom_job_name(number, location, jid)}")
        return self._stream(jid, task, follow, poll_seconds)

    def _stream(
        self, jid: int, task: str | None, follow: bool, poll_seconds: float
    ) -> Iterator[dict[str, Any]]:
        job_dir = self.settings.jobs_dir / str(jid)
        known: dict[Path, _Source] = {}
        finishing = False
        while True:
            row = self.jobs.get(jid)
            ended = row is None or JobState(row.state).terminal
            produced = False
            for source in self._sources(job_dir, known, task):
                for line in self._read(source, final=finishing or not follow):
                    produced = True
                    yield self._entry(source, line)
            if not follow or (finishing and not produced):
                return
            if ended:
                finishing = True  # one more pass drains what the last replicas wrote
                continue
            time.sleep(poll_seconds)
