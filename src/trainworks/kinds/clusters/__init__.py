"""Clusters."""
