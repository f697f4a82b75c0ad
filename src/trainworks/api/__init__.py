"""HTTP API layer."""
