"""Domain rules per resource: validation, state transitions, create/cancel/delete semantics."""
