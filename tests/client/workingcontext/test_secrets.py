"""Credential detection over large payloads agrees with `common.redact.find_secrets`."""

from __future__ import annotations

import os

import pytest

from ivoai.client.workingcontext import scan_bytes
from ivoai.client.workingcontext._secrets import SCAN_EXACT_MAX_BYTES
from ivoai.common.redact import find_secrets

CORPUS = [
    "password: hunter2hunter2hunter2xx",
    'token="abcdefghijklmnop1234"',
    "client_secret = ABCdef0123456789xyzXYZ",
    "Authorization: Bearer abcdefgh12345678",
    "sk-ant-abcdefghijklmnop",
    "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstu",
    "AKIAABCDEFGHIJKLMNOP",
    "ghp_abcdefghijklmnopqrstuvwxyz",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEow",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
    "aws_secret_access_key = abcdefghijabcdefghijabcdefghijabcdefghij",
    "https://deploy:s3cr3tpassw0rd@git.example.com/repo.git",
    "x-api-key: 0123456789abcdef",
    "Cookie: session=abcdef0123456789",
    # look-alikes that are not credentials
    "nothing here: code=1 tokens used: 1234",
    "task-42 asked for a token refresh",
    "sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "the password field is empty",
]
FILLER = b"2026-11-30T07:00:00Z INFO task-42 compiled foo/bar.py in 12ms; tokens used: 1234 code=0 ok\n"


@pytest.mark.parametrize("text", CORPUS)
def test_small_payloads_get_exactly_the_find_secrets_verdict(text: str) -> None:
    assert scan_bytes(text.encode()) == find_secrets(text)


@pytest.mark.parametrize("text", CORPUS)
def test_a_credential_buried_in_a_large_payload_gets_the_same_verdict(text: str) -> None:
    filler = FILLER * (2 * SCAN_EXACT_MAX_BYTES // len(FILLER))
    payload = filler + text.encode() + b"\n" + filler
    assert len(payload) > SCAN_EXACT_MAX_BYTES
    assert sorted(scan_bytes(payload)) == sorted(find_secrets(text))


def test_large_random_binary_has_no_false_positive() -> None:
    data = os.urandom(4 * SCAN_EXACT_MAX_BYTES)
    assert scan_bytes(data) == find_secrets(data.decode("latin-1"))


def test_extra_raw_auth_forms_are_detected() -> None:
    assert scan_bytes(b"SLACK=xoxb-1234567890-abcdefghij") == ["slack_token"]
    assert scan_bytes(b"key AIza" + b"B" * 35) == ["google_api_key"]
