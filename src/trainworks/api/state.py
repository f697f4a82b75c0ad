"""The app's services, typed, as routes reach them (api/app.py's lifespan puts them in the app's state)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from starlette.requests import HTTPConnection

if TYPE_CHECKING:  # the composition root imports every kind: routes need only its type
    from trainworks.wiring import Services

T = TypeVar("T")


def services(connection: HTTPConnection) -> Services:
    """The services of the app serving this request or WebSocket."""
    wired: Services = connection.app.state.services
    return wired


def required(service: T | None) -> T:
    """A service that Services types as optional but build_services always wires.

    Missing, it is a fault of the server: the error middleware answers 500, as it did for the attribute
    error of calling into None."""
    if service is None:
        raise RuntimeError("the service this route calls is not wired")
    return service
