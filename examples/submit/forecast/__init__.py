"""A toy forecasting package for `trainworks submit` (see run.yaml)."""
