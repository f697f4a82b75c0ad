"""Free loopback ports: one per replica (never two live replicas on one), and blocks for clusters."""

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


def bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_block(host: str, first: int, step: int, size: int, taken: set[int], last: int = 60000) -> int:
    """The first port P = first + k*step, not in `taken`, with P..P+size-1 all free now."""
    for port in range(first, last - size, step):
        if port not in taken and all(bindable(host, port + i) for i in range(size)):
            return port
    raise RuntimeError(f"no free block of {size} ports on {host}")
