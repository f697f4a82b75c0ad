"""A follower keeps the job's order when a replica's log appears after it began: a replica that starts fast
writes lines stamped before the platform's next message, and the follower must look for its log before it
hands that message on (kinds/custom_jobs/logs.py). Real log files, a real job store on SQLite."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from trainworks.backends.capture import LogWriter, log_dir, platform_record
from trainworks.config import Settings
from trainworks.jobs.enums import JobState
from trainworks.jobs.service_log import log_service
from trainworks.kernel.projects import Projects
from trainworks.kernel.wire import now_utc
from trainworks.kinds.custom_jobs.logs import LogQuery, LogService, LogStream
from trainworks.kinds.custom_jobs.store import JobStore
from trainworks.kinds.log_entries import JobLog
from trainworks.store.database import Database
from trainworks.store.tables import CustomJobRow


def test_a_log_that_appears_while_following_keeps_its_place(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    db = Database(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        db.upgrade()
        jobs = JobStore(db)
        now = now_utc()
        row = CustomJobRow(
            id=7,
            project_number="1",
            location="us-central1",
            display_name="follow",
            state=int(JobState.JOB_STATE_RUNNING),
            spec={"displayName": "follow"},
            labels={},
            create_time=now,
            update_time=now,
        )
        jobs.insert(row)
        service = LogService(settings, jobs, Projects(db))
        job_dir = service.job_dir(7)
        log_service(job_dir, "first")
        stream = LogStream(service, 7, JobLog("7", "p"), LogQuery(follow=True))
        seen: list[dict[str, Any]] = []
        seen += stream.next_batch() or []  # it has looked for logs: only the service's is there
        # A replica starts: its log is made, its first line written, then the platform's next message.
        replica = LogWriter(log_dir(str(job_dir / "workerpool0-0")))
        replica.write(platform_record(time.time_ns(), "replica line", "INFO"))
        replica.close()
        log_service(job_dir, "second")
        deadline = time.monotonic() + 10
        while len(seen) < 3 and time.monotonic() < deadline:
            batch = stream.next_batch() or []
            # Lines held back are a reason to look again after the poll, not at once (no busy loop).
            assert batch or stream.waiting
            seen += batch
            time.sleep(0.01)
        assert [line["text"] for line in seen] == ["first", "replica line", "second"], seen
    finally:
        db.dispose()
