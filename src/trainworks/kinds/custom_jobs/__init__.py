"""Custom jobs."""
