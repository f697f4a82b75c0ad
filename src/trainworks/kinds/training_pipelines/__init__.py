"""Training pipelines."""
