"""The one parser of the `Authorization` header (bearer gate, OAuth client auth, knowledge router)."""

from __future__ import annotations

import base64

import pytest

from ivoai.common.httpauth import basic_credentials, bearer_token, parse_authorization


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Bearer tok", ("bearer", "tok")),
        (b"bEaReR   tok  ", ("bearer", "tok")),
        ("  Basic abc", ("basic", "abc")),
        ("Bearer", None),
        ("Bearer    ", None),
        ("", None),
        (None, None),
    ],
)
def test_the_scheme_is_case_insensitive_and_blank_credentials_are_none(
    value: str | bytes | None, expected: tuple[str, str] | None
) -> None:
    assert parse_authorization(value) == expected


def test_a_bearer_token_comes_only_from_the_bearer_scheme() -> None:
    assert bearer_token("Bearer ivc_abc") == "ivc_abc"
    assert bearer_token("Basic ivc_abc") is None
    assert bearer_token("ivc_abc") is None


def test_basic_credentials_are_decoded_and_percent_decoded_as_rfc_6749_asks() -> None:
    encoded = base64.b64encode(b"client%3A1:s%40cret:with:colons").decode()
    assert basic_credentials(f"Basic {encoded}") == ("client:1", "s@cret:with:colons")
    assert basic_credentials("Basic " + base64.b64encode(b"only-id").decode()) == ("only-id", "")
    assert basic_credentials("Bearer abc") is None
    with pytest.raises(ValueError, match="base64"):
        basic_credentials("Basic " + base64.b64encode(b"\xff\xfe").decode())
