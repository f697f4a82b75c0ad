"""Tuning jobs."""
