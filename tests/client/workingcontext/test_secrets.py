"""Credential detection over large payloads gives exactly the verdict of the Python patterns.

The authority is `common.redact.find_secrets` (plus the store's extra raw-auth forms) over the
payload decoded as Latin-1; `scan_bytes` must report the same names wherever a credential sits.
"""

from __future__ import annotations

import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ivoai.client.workingcontext._secrets as secrets_module
from ivoai.client.workingcontext import scan_bytes
from ivoai.client.workingcontext._secrets import DETECTORS
from ivoai.common.limits import ARTIFACT_IO_CHUNK_BYTES, ARTIFACT_MAX_BYTES, KIB, MIB
from ivoai.common.redact import _PATTERNS, find_secrets

OLD_WINDOW_THRESHOLD = 64 * KIB  # the previous scanner switched to candidate windows past this size

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
    'WWW-Authenticate: Bearer resource_metadata="https://example.com/.well-known"',
    "Authorization: Bearer <token>",
]

# At least one sample per detector (the set is checked against the detectors below).
SAMPLES: list[tuple[str, str]] = [
    ("pem_private_key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA"),
    ("pem_private_key", "-----BEGIN PRIVATE KEY-----"),
    ("authorization_header", "Authorization: Basic dXNlcjpwYXNz"),
    ("authorization_header", "proxy-authorization = token abc"),
    ("bearer", "sent bearer QWERTYUIOP12345678 upstream"),
    ("bearer", "BEARER\t\tabcdefgh9"),
    ("anthropic_key", "sk-ant-abcdefghijklmnop"),
    ("openai_key", "sk-proj-abcdefghijklmnopqrstu"),
    ("openai_key", "sk-abcdefghijklmnop1234"),
    ("github_token", "ghp_abcdefghijklmnopqrstuvwxyz"),
    ("github_token", "github_pat_11ABCDEFG0123456789_abcdefghij"),
    ("ivoai_credential", "ivc_abcdefghijklmnopqrstuvwx"),
    ("aws_access_key", "AKIAABCDEFGHIJKLMNOP"),
    ("aws_access_key", "ASIA0123456789ABCDEF"),
    ("aws_secret", "aws_secret_access_key = abcdefghijabcdefghijabcdefghijabcdefghij"),
    ("aws_secret", "AWS_SECRET_ACCESS_KEY:'abcdefghij/+=defghijabcdefghijabcdefghij'"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"),
    ("labelled_secret", "client_secret = ABCdef0123456789xyzXYZ"),
    ("labelled_secret", "password: hunter2hunter2hunter2xx"),
    ("labelled_secret", 'token="abcdefghijklmnop1234"'),
    ("labelled_secret", "Enrollment-Code=ABCD-EFGH-IJKL-MNOP"),
    ("labelled_secret", "API_KEY=0123456789abcdef0123"),
    ("labelled_secret", "refresh_token:abcdefghijklmnopqrst"),
    ("labelled_secret", "credential=abcdefghijklmnopqrst"),
    ("slack_token", "xoxb-1234567890-abcdefghij"),
    ("google_api_key", "AIza" + "B" * 35),
    ("npm_token", "npm_" + "a1" * 18),
    ("stripe_key", "sk_live_abcdEFGH12345678"),
    ("stripe_key", "rk_live_abcdEFGH12345678"),
]

FILLER = b"2026-11-30T07:00:00Z INFO task-42 compiled foo/bar.py in 12ms; tokens used: 1234 code=0 ok\n"


@pytest.fixture(autouse=True, params=["hyperscan-prefilter", "re2-only"])
def scanner(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs twice: prefilter on every payload, and never (the RE2 path alone)."""
    threshold = 0 if request.param == "hyperscan-prefilter" else sys.maxsize
    monkeypatch.setattr(secrets_module, "PREFILTER_MIN_BYTES", threshold)
    return str(request.param)


def authority(data: bytes) -> list[str]:
    """The verdict `scan_bytes` must reproduce: every detector's Python authority (its pattern, and
    redact's `accept` for each match where the rule has one) over the whole text."""
    text = data.decode("latin-1")
    return [d.name for d in DETECTORS if d.search(text)]


def filler(size: int) -> bytes:
    """Log lines cut at `size` (the last one unfinished: callers add a separator)."""
    return (FILLER * (size // len(FILLER) + 1))[:size]


def test_detectors_are_find_secrets_patterns_then_the_extra_forms() -> None:
    names = [d.name for d in DETECTORS]
    assert names[: len(_PATTERNS)] == [name for name, _ in _PATTERNS]
    assert names[len(_PATTERNS) :] == ["slack_token", "google_api_key", "npm_token", "stripe_key"]


def test_every_detector_has_an_re2_form_pinned_to_its_current_python_source() -> None:
    # Fails when common.redact changes a detection rule: detection stays exact (that rule is searched
    # with Python over the whole payload) but 16 MiB puts get ~30x slower. Update _RE2_FORMS.
    assert [d.name for d in DETECTORS if d.fast is None] == []


def test_samples_cover_every_detector_and_each_is_detected_on_its_own() -> None:
    assert {name for name, _ in SAMPLES} == {d.name for d in DETECTORS}
    for name, sample in SAMPLES:
        assert name in authority(sample.encode("latin-1")), sample


@pytest.mark.parametrize("text", CORPUS)
def test_small_payloads_get_exactly_the_find_secrets_verdict(text: str) -> None:
    assert scan_bytes(text.encode()) == find_secrets(text)


@pytest.mark.parametrize("text", CORPUS)
def test_a_credential_buried_in_a_large_payload_gets_the_same_verdict(text: str) -> None:
    pad = filler(2 * OLD_WINDOW_THRESHOLD)
    payload = pad + b"\n" + text.encode() + b"\n" + pad
    assert scan_bytes(payload) == find_secrets(text)


def test_every_credential_form_is_found_at_the_start_middle_end_and_across_boundaries() -> None:
    size = ARTIFACT_IO_CHUNK_BYTES + 8 * KIB
    base = filler(size)
    assert authority(FILLER * 3) == []  # the filler repeats this line
    for _name, sample in SAMPLES:
        secret = sample.encode("latin-1")
        expected = authority(b"\n" + secret + b"\n")
        half = len(secret) // 2
        placements = {
            "start": secret + b"\n" + base,
            "past 64 KiB": base[: OLD_WINDOW_THRESHOLD + 777] + b"\n" + secret + b"\n" + base,
            "across 64 KiB": base[: OLD_WINDOW_THRESHOLD - half] + b"\n" + secret + b"\n" + base,
            "across a 1 MiB chunk": base[: ARTIFACT_IO_CHUNK_BYTES - half] + b"\n" + secret + b"\n" + base,
            "very end": base + b"\n" + secret,
        }
        for where, payload in placements.items():
            assert scan_bytes(payload) == expected, (sample, where)


def test_a_full_16_mib_payload_reports_credentials_at_its_first_and_last_bytes() -> None:
    jwt = b"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
    key = b"AKIAABCDEFGHIJKLMNOP"
    body = filler(ARTIFACT_MAX_BYTES - len(jwt) - len(key) - 2)
    payload = jwt + b"\n" + body + b"\n" + key
    assert len(payload) == ARTIFACT_MAX_BYTES
    assert scan_bytes(payload) == ["aws_access_key", "jwt"]
    assert scan_bytes(body) == []


@pytest.mark.parametrize(
    "text",
    [
        "password" + " " * 1000 + "= hunter2hunter2hunter2xx",  # far past any candidate window
        "bearer" + "\n" * 700 + "abcdefgh12345678",
        "Authorization:" + "\t" * 600 + "Bearer" + " " * 600 + "x",
        "aws_secret_access_key" + " " * 900 + "=" + "a" * 40,
        "eyJ" + "a" * 5000 + ".eyJ" + "b" * 5000 + ".c2lnbmF0dXJl",
        "-----BEGIN " + "RSA " * 300 + "PRIVATE KEY-----",
        "bearer " + "abcdefgh" * 200 + "9",  # the digit the bearer rule wants comes 1,600 bytes in
    ],
)
def test_credentials_with_long_runs_inside_are_found_in_a_large_payload(text: str) -> None:
    payload = filler(OLD_WINDOW_THRESHOLD + 100) + b"\n" + text.encode() + b"\n" + filler(1000)
    expected = find_secrets(text)
    assert expected != []
    assert scan_bytes(payload) == expected


def test_word_and_space_rules_match_python_for_every_byte_around_every_form() -> None:
    # `\b` and `\s` follow Unicode rules over Latin-1 (é is a word character, \xa0 a space): each
    # byte before and after each sample, and each byte inside the separators, gives Python's verdict.
    for _name, sample in SAMPLES:
        secret = sample.encode("latin-1")
        for c in range(256):
            b = bytes([c])
            for payload in (b + secret, secret + b, secret.replace(b" ", b, 1), secret.replace(b":", b, 1)):
                assert scan_bytes(payload) == authority(payload), payload


def test_large_random_binary_gets_the_same_verdict() -> None:
    data = os.urandom(4 * OLD_WINDOW_THRESHOLD)
    assert scan_bytes(data) == authority(data)


def test_extra_raw_auth_forms_are_detected() -> None:
    assert scan_bytes(b"SLACK=xoxb-1234567890-abcdefghij") == ["slack_token"]
    assert scan_bytes(b"key AIza" + b"B" * 35) == ["google_api_key"]


def test_two_forms_starting_at_the_same_byte_are_both_reported() -> None:
    payload = filler(OLD_WINDOW_THRESHOLD) + b" sk-ant-abcdefghijklmnopqrstuvwxyz\n"
    assert scan_bytes(payload) == ["anthropic_key", "openai_key"]


def test_bytearray_and_memoryview_payloads_are_scanned_like_bytes() -> None:
    payload = filler(OLD_WINDOW_THRESHOLD) + b"\nghp_abcdefghijklmnopqrstuvwxyz\n"
    assert scan_bytes(bytearray(payload)) == scan_bytes(memoryview(payload)) == ["github_token"]


def test_a_rule_without_an_re2_form_is_still_searched_over_the_whole_payload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slow = tuple(replace(d, fast=None) if d.name == "jwt" else d for d in DETECTORS)
    monkeypatch.setattr(secrets_module, "DETECTORS", slow)
    payload = filler(MIB) + b"\neyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
    assert scan_bytes(payload) == ["jwt"]


@pytest.mark.parametrize("max_hits", [3, 4096])
def test_re2_hits_the_python_rule_refutes_never_hide_a_later_credential(
    monkeypatch: pytest.MonkeyPatch, max_hits: int
) -> None:
    # A deliberately loose RE2 form: every "eyJ" is a candidate the Python rule must refute, both
    # below the refutation limit and past it (then the rest is searched with Python).
    loose = tuple(replace(d, fast=b"eyJ") if d.name == "jwt" else d for d in DETECTORS)
    monkeypatch.setattr(secrets_module, "DETECTORS", loose)
    monkeypatch.setattr(secrets_module, "ARTIFACT_SCAN_MAX_ANCHOR_HITS", max_hits)
    noise = b"eyJ not a token; " * 100
    payload = noise + b"AKIAABCDEFGHIJKLMNOP " + noise + b"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
    assert scan_bytes(payload) == ["aws_access_key", "jwt"]
    assert scan_bytes(noise) == []


_PIECES = st.sampled_from(
    [s for _, s in SAMPLES]
    + [s[: len(s) // 2] for _, s in SAMPLES]
    + [" ", "\t", "\n", "\xa0", "\x85", "\x1c", "\xe9", "_", "-", ":", "=", '"', "'", ".", "x", "7", "Z"]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_PIECES, max_size=12))
def test_random_mixtures_of_credential_fragments_get_pythons_verdict(pieces: list[str]) -> None:
    payload = "".join(pieces).encode("latin-1")
    assert scan_bytes(payload) == authority(payload)


def test_python_classes_inside_the_rules_are_ascii_over_latin_1() -> None:
    # The RE2 forms spell out letter classes and case-insensitive literals in ASCII: this holds only
    # because no Latin-1 character outside ASCII case-folds onto an ASCII letter.
    folded = re.compile(r"(?i)[a-z]")
    assert [c for c in range(128, 256) if folded.fullmatch(chr(c))] == []


_BYTE_PIECES = st.one_of(
    st.sampled_from([s.encode("latin-1") for _, s in SAMPLES]),
    st.binary(max_size=8),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_BYTE_PIECES, max_size=10))
def test_random_bytes_around_credential_forms_get_pythons_verdict(pieces: list[bytes]) -> None:
    payload = b"".join(pieces)
    assert scan_bytes(payload) == authority(payload)


def test_hyperscan_is_installed_so_large_payloads_are_prefiltered() -> None:
    forms = tuple((d.name, d.fast) for d in DETECTORS if d.fast is not None)
    prefilter = secrets_module._prefilter(forms)
    assert prefilter is not None
    assert prefilter.unfiltered == frozenset()  # Hyperscan compiles every RE2 form as written
    assert set(prefilter.names) == {name for name, _ in forms}


def test_a_clean_large_payload_is_decided_by_the_prefilter_alone(
    monkeypatch: pytest.MonkeyPatch, scanner: str
) -> None:
    def no_re2(names: tuple[str, ...]) -> None:
        raise AssertionError(f"RE2 union compiled for {names}")

    monkeypatch.setattr(secrets_module, "_union", no_re2)
    payload = filler(MIB) + os.urandom(MIB)
    if scanner == "hyperscan-prefilter":
        assert scan_bytes(payload) == authority(payload) == []
    else:
        with pytest.raises(AssertionError, match="RE2 union"):
            scan_bytes(payload)


def test_only_the_forms_the_prefilter_found_reach_re2(monkeypatch: pytest.MonkeyPatch, scanner: str) -> None:
    seen: list[tuple[str, ...]] = []
    real_union = secrets_module._union

    def spy(names: tuple[str, ...]) -> object:
        seen.append(names)
        return real_union(names)

    monkeypatch.setattr(secrets_module, "_union", spy)
    payload = filler(MIB) + b"\nghp_abcdefghijklmnopqrstuvwxyz\n" + filler(MIB)
    assert scan_bytes(payload) == ["github_token"]
    if scanner == "hyperscan-prefilter":
        assert seen == [("github_token",)]
    else:
        assert len(seen[0]) == len([d for d in DETECTORS if d.fast is not None])


def test_a_form_hyperscan_cannot_compile_is_left_to_re2(monkeypatch: pytest.MonkeyPatch) -> None:
    # `{0}` is valid RE2 but Hyperscan rejects it: that form is never prefiltered away.
    odd = tuple(
        replace(d, fast=d.fast.replace(b"eyJ", b"e[y]{0}yJ", 1)) if d.name == "jwt" and d.fast else d
        for d in DETECTORS
    )
    monkeypatch.setattr(secrets_module, "DETECTORS", odd)
    prefilter = secrets_module._prefilter(tuple((d.name, d.fast) for d in odd if d.fast is not None))
    assert prefilter is not None and prefilter.unfiltered == {"jwt"}
    payload = filler(MIB) + b"\neyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
    assert scan_bytes(payload) == ["jwt"]
    assert scan_bytes(filler(MIB)) == []


def test_threads_scanning_large_payloads_at_once_each_get_their_own_verdict() -> None:
    clean = filler(2 * MIB)
    dirty = filler(MIB) + b"\nAKIAABCDEFGHIJKLMNOP\n" + filler(MIB)
    payloads = [clean, dirty] * 8
    with ThreadPoolExecutor(max_workers=4) as pool:
        verdicts = list(pool.map(scan_bytes, payloads))
    assert verdicts == [[], ["aws_access_key"]] * 8


def test_the_byte_scanner_and_its_authority_agree_on_a_secret_behind_a_refused_identifier() -> None:
    payload = b"refresh_token:abcdefghijklmnopqrst.client_secret = ABCdef0123456789xyzXYZ"
    assert scan_bytes(payload) == authority(payload) == ["labelled_secret"]
