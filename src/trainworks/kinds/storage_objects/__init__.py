"""Storage objects."""
