"""Dynamic client registration: every member bounded, only what the server honours, RFC 7591 errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ivoai.common.limits import (
    OAUTH_CLIENT_NAME_MAX_CHARS,
    OAUTH_MAX_CONTACTS,
    OAUTH_MAX_REDIRECT_URIS,
    OAUTH_METADATA_TEXT_MAX_CHARS,
    OAUTH_REDIRECT_URI_MAX_CHARS,
    OAUTH_REGISTRATION_MAX_BYTES,
)
from tests.server.gateway.support import data_dir, inproc, make_app

pytestmark = pytest.mark.anyio

CB = "https://client.example/callback"


@pytest.mark.parametrize(
    ("body", "error", "says"),
    [
        (
            {"redirect_uris": [CB], "client_name": "x" * (OAUTH_REGISTRATION_MAX_BYTES + 1)},
            "invalid_client_metadata",
            f"limit of {OAUTH_REGISTRATION_MAX_BYTES} bytes",
        ),
        (
            {"redirect_uris": [CB], "client_name": "x" * (OAUTH_CLIENT_NAME_MAX_CHARS + 1)},
            "invalid_client_metadata",
            f"client_name: {OAUTH_CLIENT_NAME_MAX_CHARS + 1} characters; "
            f"the limit is {OAUTH_CLIENT_NAME_MAX_CHARS}",
        ),
        (
            {"redirect_uris": [CB], "software_id": "s" * (OAUTH_METADATA_TEXT_MAX_CHARS + 1)},
            "invalid_client_metadata",
            f"software_id: {OAUTH_METADATA_TEXT_MAX_CHARS + 1} characters; the limit is",
        ),
        (
            {"redirect_uris": [CB], "contacts": ["a@example.com"] * (OAUTH_MAX_CONTACTS + 1)},
            "invalid_client_metadata",
            f"contacts: {OAUTH_MAX_CONTACTS + 1} given; the limit is {OAUTH_MAX_CONTACTS}",
        ),
        (
            {"redirect_uris": [f"https://c{i}.example/cb" for i in range(OAUTH_MAX_REDIRECT_URIS + 1)]},
            "invalid_redirect_uri",
            f"redirect_uris: {OAUTH_MAX_REDIRECT_URIS + 1} given; the limit is {OAUTH_MAX_REDIRECT_URIS}",
        ),
        (
            {"redirect_uris": ["https://client.example/" + "p" * OAUTH_REDIRECT_URI_MAX_CHARS]},
            "invalid_redirect_uri",
            f"the limit is {OAUTH_REDIRECT_URI_MAX_CHARS}",
        ),
        ({"redirect_uris": []}, "invalid_redirect_uri", "redirect_uris: at least one"),
        ({"client_name": "no redirect"}, "invalid_redirect_uri", "redirect_uris: at least one"),
        ({"redirect_uris": ["https://*.example.com/cb"]}, "invalid_redirect_uri", "wildcards"),
        ({"redirect_uris": ["https://cli_ent.example/cb"]}, "invalid_redirect_uri", "not a DNS name"),
        (
            {"redirect_uris": [CB], "grant_types": ["authorization_code", "client_credentials"]},
            "invalid_client_metadata",
            "grant_types: client_credentials not supported (allowed: authorization_code, refresh_token)",
        ),
        (
            {"redirect_uris": [CB], "grant_types": ["authorization_code", "implicit", "password"]},
            "invalid_client_metadata",
            "grant_types: 3 given; the limit is 2",
        ),
        (
            {"redirect_uris": [CB], "grant_types": ["refresh_token"]},
            "invalid_client_metadata",
            "grant_types: must include authorization_code",
        ),
        (
            {"redirect_uris": [CB], "response_types": ["token"]},
            "invalid_client_metadata",
            "response_types: only code",
        ),
        (
            {"redirect_uris": [CB], "token_endpoint_auth_method": "private_key_jwt"},
            "invalid_client_metadata",
            "token_endpoint_auth_method: 'private_key_jwt' not supported",
        ),
        (
            {"redirect_uris": [CB], "jwks": {"keys": [{"kty": "RSA", "n": "x" * 100}]}},
            "invalid_client_metadata",
            "jwks: not supported",
        ),
        (
            {"redirect_uris": [CB], "scope": "context:read admin:write"},
            "invalid_client_metadata",
            "scope: admin:write not supported",
        ),
    ],
    ids=[
        "body-size",
        "client-name",
        "text-member",
        "contacts",
        "redirect-count",
        "redirect-length",
        "no-redirects",
        "missing-redirects",
        "wildcard-host",
        "underscore-host",
        "unhonoured-grant",
        "grant-count",
        "no-code-grant",
        "token-response",
        "jwt-auth",
        "jwks",
        "unknown-scope",
    ],
)
async def test_registration_refuses_out_of_bound_or_unhonoured_metadata_naming_member_and_limit(
    tmp_path: Path, body: dict[str, Any], error: str, says: str
) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        response = await http.post("/register", json=body)
    assert response.status_code == 400
    assert response.json()["error"] == error
    assert says in response.json()["error_description"]
    assert app.oauth.summary()["registered_clients"] == 0


async def test_a_body_that_is_not_a_json_object_is_invalid_client_metadata(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        not_json = await http.post(
            "/register", content=b"{nope", headers={"Content-Type": "application/json"}
        )
        a_list = await http.post("/register", json=[CB])
    assert not_json.json() == {
        "error": "invalid_client_metadata",
        "error_description": "the body is not JSON",
    }
    assert a_list.json()["error"] == "invalid_client_metadata"


async def test_a_registration_without_scope_may_ask_for_every_advertised_scope(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        advertised = (await http.get("/.well-known/oauth-authorization-server")).json()["scopes_supported"]
        public = await http.post(
            "/register", json={"redirect_uris": [CB], "token_endpoint_auth_method": "none"}
        )
        confidential = await http.post("/register", json={"redirect_uris": [CB]})
    assert public.status_code == 201 and confidential.status_code == 201
    assert public.json()["scope"].split() == advertised
    assert "client_secret" not in public.json()
    assert confidential.json()["token_endpoint_auth_method"] == "client_secret_post"
    assert confidential.json()["client_secret_expires_at"] == 0


async def test_unknown_members_are_ignored_and_not_stored(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        response = await http.post("/register", json={"redirect_uris": [CB], "x_custom": "y" * 1000})
    assert response.status_code == 201 and "x_custom" not in response.json()
    stored = app.oauth.get_client(response.json()["client_id"])
    assert stored is not None and "x_custom" not in stored.metadata
