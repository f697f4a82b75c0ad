"""Trainworks: a self-hostable training-job service that speaks Vertex AI's custom training API."""

__version__ = "0.1.0"
