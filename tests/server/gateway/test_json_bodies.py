"""Hostile JSON bodies (found by probing the running server): nesting deeper than the parser's
recursion limit and strings that cannot be encoded are client errors, never a 500 with a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.auth.oauth_client import MCP_HEADERS, full_flow
from tests.server.gateway.support import data_dir, enroll, inproc, make_app

pytestmark = pytest.mark.anyio

DEEP = b"[" * 4000  # within every body bound, past json's recursion limit
JSON = {"Content-Type": "application/json"}


async def test_deeply_nested_json_is_refused_as_a_client_error_on_unauthenticated_routes(
    tmp_path: Path,
) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        register = await http.post("/register", content=DEEP, headers=JSON)
        enrollment = await http.post("/v1/enroll", content=DEEP, headers=JSON)
    assert register.status_code == 400 and register.json()["error"] == "invalid_client_metadata"
    assert enrollment.status_code == 400


async def test_deeply_nested_json_to_authenticated_mcp_routes_is_not_a_server_error(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    native = enroll(app)
    async with inproc(app) as http:
        _, tokens = await full_flow(app, http)
        web = await http.post(
            "/mcp", content=DEEP, headers={**MCP_HEADERS, "Authorization": f"Bearer {tokens['access_token']}"}
        )
        context = await http.post(
            "/v1/mcp/context", content=DEEP, headers={**MCP_HEADERS, "Authorization": f"Bearer {native}"}
        )
    assert 400 <= web.status_code < 500 and 400 <= context.status_code < 500


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b'{"redirect_uris":["https://a.example/cb"],"client_name":"\\ud800"}', "client_name"),
        (b'{"redirect_uris":["https://a.example/cb"],"client_name":"a\\u0000b"}', "client_name"),
        (b'{"redirect_uris":["https://a.example/cb"],"software_id":"a\\u001bb"}', "software_id"),
        (b'{"redirect_uris":["https://a.example/cb"],"contacts":["\\udfff"]}', "contacts"),
        (b'{"redirect_uris":["https://a.example/cb"],"\\ud800":1}', "a member name"),
    ],
    ids=["lone-surrogate", "nul", "escape", "contact-surrogate", "surrogate-key"],
)
async def test_registration_strings_with_control_characters_or_lone_surrogates_are_refused(
    tmp_path: Path, raw: bytes, says: str
) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        response = await http.post("/register", content=raw, headers=JSON)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "invalid_client_metadata"
    assert says in response.json()["error_description"]
    assert app.oauth.summary()["registered_clients"] == 0
