"""Log entries of jobs, as the Cloud Logging API (v2 entries:list) and Trainworks' own log endpoints
show them."""

# What other kinds read a job's log with (the store is this kind's own module).
from trainworks.kinds.log_entries.store import (
    Entry,
    JobLog,
    LogSource,
    dropped_entry,
    insert_id,
    job_sources,
    read_entries,
)

__all__ = ["Entry", "JobLog", "LogSource", "dropped_entry", "insert_id", "job_sources", "read_entries"]
