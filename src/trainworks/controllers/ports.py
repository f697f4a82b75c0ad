"""Free loopback ports for replicas, never handed to two live replicas at once."""

from __future__ import annotations

import socket


def free_port(host: str, taken: set[int]) -> int:
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in taken:
            taken.add(port)
            return port
    raise RuntimeError("no free port found")
