"""Real Slurm clusters on this host: slurm.conf rendering (conf) and the local daemons (daemons)."""
