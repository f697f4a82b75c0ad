"""Kernel."""
