"""Page tokens of the kernel: what they carry comes back; anything else is INVALID_ARGUMENT on page_token."""

from __future__ import annotations

import base64
import json

import pytest

from trainworks.kernel.errors import ApiError
from trainworks.kernel.listing import fingerprint, offset_page_token, read_offset_page_token
from trainworks.kernel.status import Code

FP = fingerprint('state="JOB_STATE_SUCCEEDED"')


def _token(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode()


@pytest.mark.parametrize("bound", [None, 2**31])
def test_an_offset_token_gives_its_offset_back(bound: int | None) -> None:
    assert read_offset_page_token(offset_page_token(40, FP), FP, bound=bound, issued_for="filter") == 40


@pytest.mark.parametrize(
    "raw",
    [
        f'{{"o": Infinity, "f": "{FP}"}}',  # int(inf) overflows: once a 500
        f'{{"o": NaN, "f": "{FP}"}}',
        f'{{"o": -1, "f": "{FP}"}}',
        f'{{"o": "x", "f": "{FP}"}}',
        f'{{"f": "{FP}"}}',
        "[]",
        "not json",
    ],
)
def test_a_forged_offset_token_is_invalid_argument(raw: str) -> None:
    with pytest.raises(ApiError) as caught:
        read_offset_page_token(_token(raw), FP, bound=None, issued_for="filter")
    assert caught.value.code == Code.INVALID_ARGUMENT
    assert [(v.field, v.description) for v in caught.value.violations] == [
        ("page_token", "invalid page token")
    ]


def test_the_bound_is_exclusive() -> None:
    read_offset_page_token(offset_page_token(2**31 - 1, FP), FP, bound=2**31, issued_for="filter")
    with pytest.raises(ApiError):
        read_offset_page_token(offset_page_token(2**31, FP), FP, bound=2**31, issued_for="filter")


def test_a_token_of_another_filter_says_so() -> None:
    with pytest.raises(ApiError) as caught:
        read_offset_page_token(
            offset_page_token(3, FP), fingerprint(""), bound=None, issued_for="filter or order"
        )
    assert caught.value.violations[0].description == (
        "the page token was issued for a different filter or order"
    )


def test_json_cannot_smuggle_a_huge_offset_past_the_bound() -> None:
    token = _token(json.dumps({"o": 10**30, "f": FP}))
    with pytest.raises(ApiError):
        read_offset_page_token(token, FP, bound=2**31, issued_for="filter")
