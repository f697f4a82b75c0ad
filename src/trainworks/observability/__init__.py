"""Observability of the server: Prometheus metrics, structured JSON logs and TensorBoard log directories."""
