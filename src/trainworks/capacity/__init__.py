"""Capacity."""
