"""Hyperparameter tuning: the search core (`space`, `search`), trial metrics and trial jobs.

`trainworks.tuning.search.Study` is the entry point of the search: an Optuna study in Optuna's RDB storage,
driven with plain StudySpec dicts of canonical proto JSON; it knows nothing of HTTP or of Trainworks' own
tables. This package module imports nothing itself, so that importing `tuning.metrics` or
`tuning.trial_jobs` does not load Optuna.
"""
