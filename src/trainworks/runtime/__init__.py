"""Helpers for training code running as a Trainworks (or Vertex AI) replica; standard library only."""

from trainworks.runtime.topology import Topology, shard, shard_range, topology

__all__ = ["Topology", "shard", "shard_range", "topology"]
