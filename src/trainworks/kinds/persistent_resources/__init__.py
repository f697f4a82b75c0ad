"""Persistent resources."""
