"""CustomJobs: worker pools run as real replicas, with restarts, preemption, logs and shells."""
