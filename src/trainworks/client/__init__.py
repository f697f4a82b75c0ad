"""Python client for a Trainworks server (Vertex AI v1 REST wire format)."""

from trainworks.client.rest import TrainworksClient
from trainworks.kernel.client import TERMINAL_STATES, ApiError, TrainworksConnectionError

__all__ = ["TERMINAL_STATES", "ApiError", "TrainworksClient", "TrainworksConnectionError"]
