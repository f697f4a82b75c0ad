"""PersistentResources: pools of machines kept for jobs, with warm interpreters; every change an LRO."""
