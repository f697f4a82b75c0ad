"""The REST routes write their JSON answers themselves (kernel/routes.py `json_response`, orjson with
pydantic's writer as the fallback): every answer must be byte for byte what FastAPI wrote before, from a
route whose response model is `JsonObject`. Both routes run in one real FastAPI app, side by side, over
values where JSON writers differ: floats, large ints, non-ASCII, escapes, lone surrogates, types orjson
writes its own way."""

from __future__ import annotations

import dataclasses
import enum
import math
import random
import struct
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI, Request
from fastapi.testclient import TestClient

from trainworks.api.errors import install_error_handlers
from trainworks.kernel.routes import JsonObject, add_route, json_bytes


class Color(enum.Enum):
    RED = "red"


class Number(enum.IntEnum):
    ONE = 1


class Text(str):
    """A subclass of str: orjson refuses it (passthrough), pydantic writes it as a string."""


@dataclasses.dataclass
class Point:
    x: int
    y: float


FLOATS = [1e-7, 1e21, 0.1, 1.0, -0.0, 1e16, 1e15, 123456789.123, 5e-324, 1.7976931348623157e308, 2.5e-5]
FLOATS += [math.nan, math.inf, -math.inf]
TRICKY: dict[str, Any] = {
    "ascii": "plain",
    "non_ascii": "über € 😀 日本語",
    "line_separators": "a\u2028b\u2029c",
    "controls": "".join(chr(c) for c in range(0x20)) + "\x7f",
    "escapes": '"\\/\b\f\n\r\t',
    "html": "<script>&'</script>",
    "floats": FLOATS,
    "ints": [0, -1, 2**31, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1],
    "large_int": 2**64,
    "huge_int": -(10**40),
    "nested": {"a": [{"b": None, "c": True, "d": False}], "": {}},
    "enum": Color.RED,
    "int_enum": Number.ONE,
    "uuid": uuid.UUID(int=7),
    "tuple": (1, "two", 3.0),
    "subclass": Text("sub"),
    "datetime": datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC),
    "naive_datetime": datetime(2024, 5, 6, 7, 8, 9),
    "dataclass": Point(1, 2.5),
    "bytes": b"raw",
    "set": {3},
    "lone_surrogate": "a\ud800b",
    "surrogate_pair_escape": "\ud83d\ude00",
}


def random_floats(count: int) -> list[float]:
    rng = random.Random(18)
    return [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(count)]


def cases() -> Iterator[tuple[str, JsonObject]]:
    for key, value in TRICKY.items():
        yield key, {key: value}
    yield (
        "all_json_values",
        {k: v for k, v in TRICKY.items() if k in ("ascii", "non_ascii", "floats", "ints")},
    )
    yield "random_floats", {"values": random_floats(5000)}
    yield (
        "every_bmp_code_point",
        {"text": "".join(chr(c) for c in range(0xD800)) + "".join(map(chr, range(0xE000, 0x10000)))},
    )
    yield "astral", {"text": "".join(chr(c) for c in range(0x10000, 0x110000, 97))}
    yield "str_subclass_key", {Text("key"): 1}
    yield "nested_non_str_key", {"outer": {1: "one"}}  # written as "1" by both
    yield "non_str_key", {1: "one"}  # fails FastAPI's validation of the answer: a 500
    yield "empty", {}


CASES = dict(cases())


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    app = FastAPI()
    install_error_handlers(app)  # an answer no writer can write is a google.rpc 500, as in the server

    @app.get("/fastapi/{case}")
    def fastapi_route(case: str) -> JsonObject:  # FastAPI's own path: response model JsonObject
        return CASES[case]

    def answer(_request: Request, path: dict[str, str], _body: Any) -> JsonObject:
        return CASES[path["case"]]

    api = APIRouter()
    add_route(api, "GET", "/ours/{case}", "ours", answer)
    app.include_router(api)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.mark.parametrize("case", list(CASES))
def test_answer_is_byte_identical_to_fastapi(client: TestClient, case: str) -> None:
    before = client.get(f"/fastapi/{case}")
    after = client.get(f"/ours/{case}")
    assert after.status_code == before.status_code
    assert after.content == before.content
    assert after.headers["content-type"] == before.headers["content-type"]
    assert after.headers["content-length"] == before.headers["content-length"]


def test_the_tricky_values_take_both_paths() -> None:
    """orjson writes the plain JSON values; the fallback writes the rest (or fails as FastAPI did)."""
    import orjson

    plain = CASES["all_json_values"]
    assert json_bytes(plain) == orjson.dumps(plain)
    assert json_bytes(CASES["large_int"]) == b'{"large_int":18446744073709551616}'
    assert json_bytes(CASES["datetime"]) == b'{"datetime":"2024-05-06T07:08:09.123456Z"}'
    assert json_bytes({"f": [1e-7, 1e21, 0.1, math.nan]}) == b'{"f":[1e-7,1e+21,0.1,null]}'


def test_unwritable_answers_fail_as_before(client: TestClient) -> None:
    for case in ("lone_surrogate", "non_str_key"):
        response = client.get(f"/ours/{case}")
        assert response.status_code == 500, case
        assert response.json()["error"]["status"] == "INTERNAL"
