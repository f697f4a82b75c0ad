"""The model registry: models, their versions and aliases, and the registry's own copy of their artifacts."""
