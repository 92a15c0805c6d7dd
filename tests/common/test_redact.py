"""Redaction: every credential form the seeds name is removed from text ivoai emits."""

from __future__ import annotations

import pytest

from ivoai.common.ids import random_token
from ivoai.common.redact import _PATTERNS, REDACTED, find_secrets, redact

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabcDEF==\n-----END RSA PRIVATE KEY-----"

CASES = [
    (
        "bearer_header",
        "Authorization: Bearer abc.def-ghi_jkl~mno",
        "abc.def-ghi_jkl~mno",
        "Authorization: Bearer ",
    ),
    ("bare_bearer", "sent bearer QWERTYUIOP12345678 upstream", "QWERTYUIOP12345678", "bearer "),
    (
        "basic_header",
        "authorization=Basic dXNlcjpwYXNzd29yZA==",
        "dXNlcjpwYXNzd29yZA==",
        "authorization=Basic ",
    ),
    (
        "enrollment_label",
        "enrollment code: Zx9_k2LmQpR7sT4vW8yB3nC6dF1gH5jK0",
        "Zx9_k2LmQpR7sT4vW8yB3nC6dF1gH5jK0",
        "",
    ),
    ("openai", "key sk-proj-AbCdEf0123456789AbCdEf0123", "sk-proj-AbCdEf0123456789AbCdEf0123", "key "),
    ("openai_plain", "OPENAI_API_KEY=sk-0123456789abcdefABCDEF", "sk-0123456789abcdefABCDEF", ""),
    ("anthropic", "x sk-ant-api03-AbCdEfGh_ij-KLMN0123 y", "sk-ant-api03-AbCdEfGh_ij-KLMN0123", " y"),
    (
        "github",
        "token ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        "",
    ),
    (
        "github_pat",
        "github_pat_11ABCDEFG0123456789_abcdefghijkl",
        "github_pat_11ABCDEFG0123456789_abcdefghijkl",
        "",
    ),
    ("aws_access", "id AKIAIOSFODNN7EXAMPLE in logs", "AKIAIOSFODNN7EXAMPLE", " in logs"),
    (
        "aws_secret",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key = ",
    ),
    ("jwt", f"id_token {JWT} end", JWT, " end"),
    ("pem", f"key:\n{PEM}\nafter", "MIIEowIBAAKCAQEA7", "after"),
    ("ivoai_credential", "cred ivc_AbCdEfGhIjKlMnOpQrStUvWx012", "ivc_AbCdEfGhIjKlMnOpQrStUvWx012", "cred "),
    ("cookie", "Cookie: session=abc; other=def", "session=abc", "Cookie: "),
    ("x_api_key", "x-api-key: whatever-value", "whatever-value", "x-api-key: "),
    ("url_password", "https://user:hunter2pass@example.com/x", "hunter2pass", "https://user:"),
    ("password_label", 'password="CorrectHorseBattery9"', "CorrectHorseBattery9", "password="),
]


@pytest.mark.parametrize(("label", "text", "secret", "kept"), CASES, ids=[c[0] for c in CASES])
def test_each_credential_form_is_redacted_keeping_its_label(
    label: str, text: str, secret: str, kept: str
) -> None:
    out = redact(text)
    assert secret not in out
    assert REDACTED in out
    assert kept in out


def test_a_bare_enrollment_code_is_redacted() -> None:
    for _ in range(20):
        code = random_token(32)
        if any(c.isdigit() for c in code) and code.lower() != code and code.upper() != code:
            break
    assert len(code) == 43
    assert code not in redact(f"your code is {code} (shown once)")


def test_an_unterminated_pem_key_is_redacted_to_the_end() -> None:
    assert redact("-----BEGIN PRIVATE KEY-----\nMIIabc\nmore") == REDACTED


@pytest.mark.parametrize(
    "text",
    [
        "config.toml: invalid TOML at line 3, column 5",
        "commit 3f9c2a1b4d5e6f708192a3b4c5d6e7f8091a2b3c touched 12 files",
        "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "Authorization is required for this route",
        "ivoai_no_such_module_for_the_doctor_provider",
        "/home/user/.config/ivoai/config.toml has mode 0644",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text
    assert find_secrets(text) == []


def test_find_secrets_names_forms_never_values() -> None:
    text = f"a {JWT} b AKIAIOSFODNN7EXAMPLE"
    assert find_secrets(text) == ["aws_access_key", "jwt"]


def test_detection_patterns_stay_ascii_name_pattern_pairs() -> None:
    # Other modules compile these to bytes (fast artifact scanning).
    for name, pattern in _PATTERNS:
        assert isinstance(name, str)
        pattern.pattern.encode("ascii")


def test_redaction_is_idempotent() -> None:
    text = " ".join(c[1] for c in CASES)
    once = redact(text)
    assert redact(once) == once


def test_documentation_of_bearer_headers_is_not_classified_as_a_credential() -> None:
    doc = 'A 401 carries `WWW-Authenticate: Bearer resource_metadata="https://h/.well-known/x"`.\n'
    doc += "Send `Authorization: Bearer <credential>` or `Authorization: Bearer $TOKEN`.\n"
    assert find_secrets(doc) == []


def test_a_real_bearer_token_in_prose_is_still_classified() -> None:
    assert find_secrets("curl -H 'Authorization: Bearer ivx9Qm2LkP0aZ7' host") != []
    assert find_secrets("sent bearer QWERTYUIOP12345678 upstream") == ["bearer"]


@pytest.mark.parametrize(
    "line",
    [
        'code = "connector_not_found"',
        'TOKEN_ENV = "IVOAI_KNOWLEDGE_TOKEN_HOOKS"',
        "token: ivoai.client.agents.process",
        'secret_key = "settings.auth.client_secret_1"',
    ],
)
def test_a_labelled_identifier_is_not_a_secret(line: str) -> None:
    """Ordinary source (`code = "connector_not_found"`) kept 29 of this repository's files out of the
    context index and would have refused such a memory page."""
    assert find_secrets(line) == []
    assert redact(line) == line


@pytest.mark.parametrize(
    "line",
    [
        'password = "correcthorsebatterystaple"',  # one unbroken word is still a secret
        "Enrollment-Code=ABCD-EFGH-IJKL-MNOP",  # hyphenated blocks: the shape of a human-readable code
        "password=abc_def_ghi_jkl_mno_1234567",  # a long number is not an identifier's part
        'api_key: "Abc_Def_Ghi_Jkl_Mn0pqr"',  # a part that mixes letters and digits
    ],
)
def test_labelled_values_that_are_not_plain_identifiers_stay_secrets(line: str) -> None:
    assert find_secrets(line) == ["labelled_secret"]
    assert REDACTED in redact(line)


def test_a_secret_whose_label_hides_in_a_refused_identifier_is_still_found_and_redacted() -> None:
    # The refused value `abcdefghijklmnopqrst.client_secret` swallows the next label; scanning on
    # from its end (as finditer does) would pass over the secret after it. Found by Hypothesis.
    line = "refresh_token:abcdefghijklmnopqrst.client_secret = ABCdef0123456789xyzXYZ"
    assert find_secrets(line) == ["labelled_secret"]
    assert redact(line) == "refresh_token:abcdefghijklmnopqrst.client_secret = [REDACTED]"
