"""OAuth 2.1 for /mcp end to end with a scripted client, and every attack the issue lists, each a test."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest

from ivoai.server.app import GatewayApp
from ivoai.server.gateway.settings import GatewaySettings
from tests.server.auth.oauth_client import (
    REDIRECT,
    Client,
    approve,
    authorize_params,
    code_for,
    full_flow,
    mcp_status,
    pkce,
    query_of,
    register,
    registered,
    token_request,
    tools_call,
)
from tests.server.gateway.support import Clock, data_dir, enroll, inproc, make_app, mcp_session

pytestmark = pytest.mark.anyio


# -- the happy path ----
async def test_metadata_documents_describe_the_authorization_server_and_the_mcp_resource(
    tmp_path: Path,
) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        asm = (await http.get("/.well-known/oauth-authorization-server")).json()
        prm = (await http.get("/.well-known/oauth-protected-resource/mcp")).json()
    assert asm["issuer"] == "http://127.0.0.1:7744"
    assert asm["code_challenge_methods_supported"] == ["S256"]
    assert asm["authorization_response_iss_parameter_supported"] is True
    assert asm["revocation_endpoint"] == "http://127.0.0.1:7744/revoke"
    assert prm["resource"] == "http://127.0.0.1:7744/mcp"
    assert prm["authorization_servers"] == ["http://127.0.0.1:7744"]


async def test_full_flow_issues_tokens_that_open_a_web_mcp_session(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        verifier, challenge = pkce()
        activation = app.oauth.create_activation()
        start = await http.get("/authorize", params=authorize_params(app, client, challenge))
        assert start.status_code == 302 and "/oauth/consent?request=" in start.headers["location"]
        decision = await approve(http, start.headers["location"], activation.code)
        q = query_of(decision.headers["location"])
        assert decision.headers["location"].startswith(REDIRECT + "?")
        assert q["state"] == "state-123" and q["iss"] == "http://127.0.0.1:7744"
        tokens = (
            await token_request(
                http,
                client,
                grant_type="authorization_code",
                code=q["code"],
                code_verifier=verifier,
                redirect_uri=REDIRECT,
                resource=app.settings.mcp_resource_url,
            )
        ).json()
        assert tokens["token_type"] == "Bearer" and tokens["expires_in"] == 3600
        assert tokens["scope"] == "context:read memory:read memory:write"
        http.headers["Authorization"] = f"Bearer {tokens['access_token']}"
        async with mcp_session(f"{app.settings.base_url}/mcp", http) as s:
            init_tools = {t.name for t in (await s.list_tools()).tools}
            resources = (await s.list_resources()).resources
            skill = await s.read_resource(resources[0].uri)
            found = await s.call_tool("search", {"query": "anything"})
    assert {"context_search", "memory_query", "search", "fetch", "memory_delete_page"} <= init_tools
    assert str(resources[0].uri) == "skill://ivoai-memory-context/SKILL.md"
    assert resources[0].meta is not None and resources[0].meta["io.ivoai/digest"].startswith("sha256:")
    assert "memory" in skill.contents[0].text.lower()  # type: ignore[union-attr]
    assert found.structured_content == {"results": []}


async def test_activation_codes_tokens_and_codes_are_stored_only_as_hashes(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        verifier, challenge = pkce()
        activation = app.oauth.create_activation()
        start = await http.get("/authorize", params=authorize_params(app, client, challenge))
        request_id = query_of(start.headers["location"])["request"]
        decision = await approve(http, start.headers["location"], activation.code)
        code = query_of(decision.headers["location"])["code"]
        form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier}
        tokens = (await token_request(http, client, **form, redirect_uri=REDIRECT)).json()
    # The database and its write-ahead log, as they are on disk.
    raw = b"".join(p.read_bytes() for p in app.hub.data_dir.oauth.iterdir() if p.is_file())
    assert raw and b"ivo_at_" not in raw
    secrets = [tokens["access_token"], tokens["refresh_token"], client.client_secret, activation.code, code]
    for secret in [*secrets, request_id]:
        assert secret and secret.encode() not in raw


async def test_wrong_activation_code_keeps_the_request_and_shows_a_uniform_error(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        _, challenge = pkce()
        start = await http.get("/authorize", params=authorize_params(app, client, challenge))
        wrong = await approve(http, start.headers["location"], "not-the-code")
        right = await approve(http, start.headers["location"], app.oauth.create_activation().code)
    assert wrong.status_code == 400 and "invalid, expired, already used or revoked" in wrong.text
    assert right.status_code == 303 and "code" in query_of(right.headers["location"])


async def test_five_wrong_codes_across_two_gateway_instances_end_the_request_with_access_denied(
    tmp_path: Path,
) -> None:
    data = data_dir(tmp_path)
    app, other = make_app(data), make_app(data)  # two gateways sharing one database
    async with inproc(app) as http, inproc(other) as http2:
        client = await registered(http)
        _, challenge = pkce()
        start = await http.get("/authorize", params=authorize_params(app, client, challenge))
        request_id = query_of(start.headers["location"])["request"]
        wrong = {"request": request_id, "activation_code": "wrong", "action": "approve"}
        answers = [await (http if i % 2 else http2).post("/oauth/consent", data=wrong) for i in range(5)]
    assert [a.status_code for a in answers] == [400, 400, 400, 400, 303]
    assert query_of(answers[-1].headers["location"])["error"] == "access_denied"
    assert app.oauth.pending(request_id) is None


async def test_after_narrowing_deny_still_denies_and_the_code_stays_unused(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    activation = app.oauth.create_activation(scopes=["context:read"])
    async with inproc(app) as http:
        client = await registered(http)
        _, challenge = pkce()
        start = await http.get(
            "/authorize", params=authorize_params(app, client, challenge, scope="context:read memory:write")
        )
        narrowed = await approve(http, start.headers["location"], activation.code, confirm_narrowed=False)
        assert narrowed.status_code == 200 and "allows only part" in narrowed.text
        assert "activation_code" not in narrowed.text  # the confirmation asks for no code again
        request_id = query_of(start.headers["location"])["request"]
        denied = await http.post("/oauth/consent", data={"request": request_id, "action": "deny"})
    assert query_of(denied.headers["location"])["error"] == "access_denied"
    assert app.oauth.activation_status(app.oauth.check_activation(activation.code)) == "open"


async def test_an_activation_code_works_once(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    activation = app.oauth.create_activation()
    async with inproc(app) as http:
        client = await registered(http)
        for expected in (303, 400):
            _, challenge = pkce()
            start = await http.get("/authorize", params=authorize_params(app, client, challenge))
            assert (await approve(http, start.headers["location"], activation.code)).status_code == expected


async def test_consent_page_forbids_framing_and_cross_site_posts(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        _, challenge = pkce()
        start = await http.get("/authorize", params=authorize_params(app, client, challenge))
        page = await http.get(start.headers["location"])
        forged = await http.post(
            "/oauth/consent",
            data={
                "request": query_of(start.headers["location"])["request"],
                "activation_code": "x",
                "action": "approve",
            },
            headers={"Origin": "https://evil.example"},
        )
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert forged.status_code == 403


async def test_deny_returns_access_denied_with_state_and_iss(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        _, challenge = pkce()
        start = await http.get("/authorize", params=authorize_params(app, client, challenge))
        request_id = query_of(start.headers["location"])["request"]
        denied = await http.post("/oauth/consent", data={"request": request_id, "action": "deny"})
    q = query_of(denied.headers["location"])
    assert q == {"error": "access_denied", "state": "state-123", "iss": "http://127.0.0.1:7744"}


async def test_a_public_client_revokes_its_whole_grant_with_token_and_client_id_only(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client, tokens = await full_flow(app, http, token_endpoint_auth_method="none")
        assert client.client_secret is None
        assert await mcp_status(http, tokens["access_token"]) == 200
        # RFC 7009 §2.1 as a public client sends it: no secret, no Authorization header.
        form = {"token": tokens["refresh_token"], "client_id": client.client_id}
        revoked = await http.post("/revoke", data=form)
        assert revoked.status_code == 200, revoked.text
        assert await mcp_status(http, tokens["access_token"]) == 401
        refreshed = await token_request(
            http, client, grant_type="refresh_token", refresh_token=tokens["refresh_token"]
        )
    assert refreshed.status_code == 400


async def test_a_confidential_client_must_authenticate_to_revoke(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client, tokens = await full_flow(app, http)
        assert client.client_secret is not None
        bare = {"token": tokens["access_token"], "client_id": client.client_id}
        anonymous = await http.post("/revoke", data=bare)
        assert anonymous.status_code == 401 and anonymous.json()["error"] == "invalid_client"
        assert await mcp_status(http, tokens["access_token"]) == 200
        form = {
            "token": tokens["access_token"],
            "token_type_hint": "some_future_hint",  # RFC 7009 §2.1: an unknown hint is ignored
            "client_id": client.client_id,
            "client_secret": client.client_secret,
        }
        assert (await http.post("/revoke", data=form)).status_code == 200
        assert await mcp_status(http, tokens["access_token"]) == 401


async def test_revoking_another_clients_token_or_an_unknown_token_changes_nothing(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        _, victim = await full_flow(app, http, token_endpoint_auth_method="none")
        attacker, _ = await full_flow(app, http, token_endpoint_auth_method="none")
        foreign = {"token": victim["access_token"], "client_id": attacker.client_id}
        unknown = {"token": "ivo_at_" + "x" * 43, "client_id": attacker.client_id}
        assert (await http.post("/revoke", data=foreign)).status_code == 200
        assert (await http.post("/revoke", data=unknown)).status_code == 200
        missing = await http.post("/revoke", data={"client_id": attacker.client_id})
        assert await mcp_status(http, victim["access_token"]) == 200
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"


async def test_refresh_rotates_and_the_new_pair_works(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client, tokens = await full_flow(app, http)
        rotated = await token_request(
            http,
            client,
            grant_type="refresh_token",
            refresh_token=tokens["refresh_token"],
            resource=app.settings.mcp_resource_url,
        )
        assert rotated.status_code == 200, rotated.text
        new = rotated.json()
        assert new["refresh_token"] != tokens["refresh_token"]
        assert await mcp_status(http, new["access_token"]) == 200


# -- redirect URI attacks ----
@pytest.mark.parametrize(
    "uri",
    [
        "http://client.example/callback",  # non-loopback http
        "javascript:alert(1)",
        "https://user:pw@client.example/callback",  # userinfo
        "https://client.example/callback#frag",  # fragment
        "data:text/html,hi",
        "myapp://callback",
    ],
)
async def test_registration_refuses_unsafe_redirect_uris(tmp_path: Path, uri: str) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        response = await register(http, [uri])
    assert response.status_code == 400
    assert response.json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata")


@pytest.mark.parametrize(
    "requested",
    [
        "https://client.example/other",  # path
        "https://client.example/callback/",  # trailing slash
        "https://client.example/callback?x=1",  # query
        "https://client.example@evil.example/callback",  # userinfo
        "https://client.example/callback#x",  # fragment
        "http://client.example/callback",  # non-loopback http
        "javascript:alert(1)",
    ],
)
async def test_authorize_refuses_redirect_uri_variants_without_redirecting(
    tmp_path: Path, requested: str
) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        _, challenge = pkce()
        response = await http.get(
            "/authorize", params=authorize_params(app, client, challenge, redirect_uri=requested)
        )
    assert response.status_code == 400
    assert "location" not in response.headers


async def test_loopback_redirect_may_use_any_port(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http, "http://127.0.0.1/callback")
        _, challenge = pkce()
        ok = await http.get(
            "/authorize",
            params=authorize_params(app, client, challenge, redirect_uri="http://127.0.0.1:53117/callback"),
        )
        other_path = await http.get(
            "/authorize",
            params=authorize_params(app, client, challenge, redirect_uri="http://127.0.0.1:53117/other"),
        )
    assert ok.status_code == 302 and "/oauth/consent" in ok.headers["location"]
    assert other_path.status_code == 400


# -- PKCE attacks ----
async def test_pkce_missing_is_refused_with_iss_in_the_error_redirect(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        response = await http.get("/authorize", params=authorize_params(app, client, None))
    q = query_of(response.headers["location"])
    assert (
        q["error"] == "invalid_request" and q["iss"] == "http://127.0.0.1:7744" and q["state"] == "state-123"
    )


@pytest.mark.parametrize(
    "challenge", ["", "abc", "a" * 42 + "=", "a" * 128], ids=["empty", "short", "padded", "long"]
)
async def test_a_challenge_that_is_not_s256_is_refused_at_authorize_before_anything_is_used(
    tmp_path: Path, challenge: str
) -> None:
    app = make_app(data_dir(tmp_path))
    activation = app.oauth.create_activation()
    async with inproc(app) as http:
        client = await registered(http)
        response = await http.get("/authorize", params=authorize_params(app, client, challenge))
    assert response.status_code == 302 and response.headers["location"].startswith(REDIRECT + "?")
    q = query_of(response.headers["location"])
    assert q["error"] == "invalid_request" and "code_challenge" in q["error_description"]
    assert q["iss"] == "http://127.0.0.1:7744" and q["state"] == "state-123"
    assert app.oauth.summary()["pending_authorizations"] == 0  # no consent page was reached
    assert app.oauth.check_activation(activation.code).consumed_at is None


async def test_an_oversized_state_is_refused_at_authorize(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        _, challenge = pkce()
        response = await http.get(
            "/authorize", params=authorize_params(app, client, challenge, state="s" * 1025)
        )
    assert query_of(response.headers["location"])["error"] == "invalid_request"
    assert app.oauth.summary()["pending_authorizations"] == 0


async def test_pkce_plain_is_refused(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        response = await http.get(
            "/authorize", params=authorize_params(app, client, "a" * 43, code_challenge_method="plain")
        )
    assert query_of(response.headers["location"])["error"] == "invalid_request"


async def test_verifier_without_matching_challenge_is_refused(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        _, challenge = pkce()
        code = await code_for(app, http, client, challenge)
        other_verifier, _ = pkce()
        wrong = await token_request(
            http,
            client,
            grant_type="authorization_code",
            code=code,
            code_verifier=other_verifier,
            redirect_uri=REDIRECT,
        )
        missing = await token_request(
            http, client, grant_type="authorization_code", code=code, redirect_uri=REDIRECT
        )
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"


# -- code and refresh replay ----
async def test_code_replay_fails_and_revokes_what_the_code_issued(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        verifier, challenge = pkce()
        code = await code_for(app, http, client, challenge)
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "code_verifier": verifier,
            "redirect_uri": REDIRECT,
        }
        first = await token_request(http, client, **form)
        assert first.status_code == 200
        assert await mcp_status(http, first.json()["access_token"]) == 200
        replay = await token_request(http, client, **form)
        assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
        assert await mcp_status(http, first.json()["access_token"]) == 401


async def test_two_concurrent_redemptions_of_one_code_yield_at_most_one_token(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        verifier, challenge = pkce()
        code = await code_for(app, http, client, challenge)
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "code_verifier": verifier,
            "redirect_uri": REDIRECT,
        }
        results: list[httpx2.Response] = []

        async def redeem() -> None:
            results.append(await token_request(http, client, **form))

        async with anyio.create_task_group() as tg:
            tg.start_soon(redeem)
            tg.start_soon(redeem)
        statuses = sorted(r.status_code for r in results)
        assert statuses == [200, 400]
        winner = next(r for r in results if r.status_code == 200).json()
        # The loser's attempt is a replay: the grant is revoked, so the winner's token is dead too.
        assert await mcp_status(http, winner["access_token"]) == 401


async def test_refresh_replay_after_rotation_revokes_the_family(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client, tokens = await full_flow(app, http)
        rotated = (
            await token_request(
                http, client, grant_type="refresh_token", refresh_token=tokens["refresh_token"]
            )
        ).json()
        replay = await token_request(
            http, client, grant_type="refresh_token", refresh_token=tokens["refresh_token"]
        )
        assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
        assert await mcp_status(http, rotated["access_token"]) == 401
        again = await token_request(
            http, client, grant_type="refresh_token", refresh_token=rotated["refresh_token"]
        )
        assert again.status_code == 400


# -- audience (RFC 8707) ----
async def test_wrong_resource_at_authorize_is_refused_with_invalid_target(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        _, challenge = pkce()
        wrong = await http.get(
            "/authorize",
            params=authorize_params(app, client, challenge, resource="https://other.example/mcp"),
        )
        missing = await http.get("/authorize", params=authorize_params(app, client, challenge, resource=None))
    assert query_of(wrong.headers["location"])["error"] == "invalid_target"
    assert query_of(missing.headers["location"])["error"] == "invalid_target"


async def test_wrong_resource_at_token_is_refused_with_invalid_target(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        verifier, challenge = pkce()
        code = await code_for(app, http, client, challenge)
        response = await token_request(
            http,
            client,
            grant_type="authorization_code",
            code=code,
            code_verifier=verifier,
            redirect_uri=REDIRECT,
            resource="https://other.example/mcp",
        )
    assert response.status_code == 400 and response.json()["error"] == "invalid_target"


async def test_token_for_another_resource_is_refused_on_every_request(tmp_path: Path) -> None:
    data = data_dir(tmp_path)
    old = make_app(data)
    async with inproc(old) as http:
        _, tokens = await full_flow(old, http)
        assert await mcp_status(http, tokens["access_token"]) == 200
    # Same state, different canonical /mcp URL: the token's audience no longer matches.
    moved = make_app(data, settings=GatewaySettings(public_url="https://ai.example.com"))
    async with inproc(moved) as http:
        assert await mcp_status(http, tokens["access_token"], Host="ai.example.com") == 401


# -- expiry ----
async def test_expired_access_token_and_expired_code_are_refused(tmp_path: Path) -> None:
    clock = Clock()
    app = make_app(data_dir(tmp_path), clock=clock)
    async with inproc(app) as http:
        client, tokens = await full_flow(app, http)
        assert await mcp_status(http, tokens["access_token"]) == 200
        clock.now += 3601
        assert await mcp_status(http, tokens["access_token"]) == 401
        verifier, challenge = pkce()
        code = await code_for(app, http, client, challenge)
        clock.now += 301
        late = await token_request(
            http,
            client,
            grant_type="authorization_code",
            code=code,
            code_verifier=verifier,
            redirect_uri=REDIRECT,
        )
    assert late.status_code == 400 and late.json()["error"] == "invalid_grant"


async def test_expired_refresh_token_is_refused(tmp_path: Path) -> None:
    clock = Clock()
    app = make_app(data_dir(tmp_path), clock=clock)
    async with inproc(app) as http:
        client, tokens = await full_flow(app, http)
        clock.now += 30 * 86400 + 1
        response = await token_request(
            http, client, grant_type="refresh_token", refresh_token=tokens["refresh_token"]
        )
    assert response.status_code == 400


# -- scope escalation ----
async def test_requesting_more_than_the_activation_code_grants_is_narrowed_never_escalated(
    tmp_path: Path,
) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http, scope="context:read memory:read memory:write memory:delete")
        verifier, challenge = pkce()
        code = await code_for(
            app,
            http,
            client,
            challenge,
            scopes="context:read memory:delete",
            activation_scopes=["context:read"],
        )
        tokens = (
            await token_request(
                http,
                client,
                grant_type="authorization_code",
                code=code,
                code_verifier=verifier,
                redirect_uri=REDIRECT,
            )
        ).json()
        denied = await tools_call(
            http, tokens["access_token"], "memory_delete_page", {"path": "a.md", "confirm": "a.md"}
        )
    assert tokens["scope"] == "context:read"
    assert denied.status_code == 403


async def test_a_request_with_nothing_activated_is_refused_with_invalid_scope(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http, scope="context:read memory:read memory:write memory:delete")
        _, challenge = pkce()
        activation = app.oauth.create_activation(scopes=["context:read"])
        start = await http.get(
            "/authorize", params=authorize_params(app, client, challenge, scope="memory:delete")
        )
        decision = await approve(http, start.headers["location"], activation.code)
    assert query_of(decision.headers["location"])["error"] == "invalid_scope"


async def test_scope_escalation_at_refresh_and_at_the_tool_boundary_is_refused(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client, tokens = await full_flow(app, http, scopes="context:read", activation_scopes=["context:read"])
        wider = await token_request(
            http,
            client,
            grant_type="refresh_token",
            refresh_token=tokens["refresh_token"],
            scope="context:read memory:write",
        )
        assert wider.status_code == 400 and wider.json()["error"] == "invalid_scope"
        denied = await tools_call(
            http, tokens["access_token"], "memory_write_page", {"path": "a.md", "body": "x"}
        )
    assert denied.status_code == 403
    assert 'error="insufficient_scope"' in denied.headers["www-authenticate"]
    assert 'scope="memory:write"' in denied.headers["www-authenticate"]
    assert "resource_metadata=" in denied.headers["www-authenticate"]


# -- cross-use, Host and Origin ----
async def test_native_credentials_are_refused_on_web_mcp_and_oauth_tokens_on_native_routes(
    tmp_path: Path,
) -> None:
    app = make_app(data_dir(tmp_path))
    native = enroll(app)
    async with inproc(app) as http:
        _, tokens = await full_flow(app, http)
        assert await mcp_status(http, native) == 401
        on_native = await http.post(
            "/v1/mcp/context", json={}, headers={"Authorization": f"Bearer {tokens['access_token']}"}
        )
        admin = await http.get(
            "/v1/admin/status", headers={"Authorization": f"Bearer {tokens['access_token']}"}
        )
    assert on_native.status_code == 401 and admin.status_code == 401


async def test_web_mcp_refuses_bad_origin_and_bad_host(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        _, tokens = await full_flow(app, http)
        good = await mcp_status(http, tokens["access_token"], Origin="http://127.0.0.1:7744")
        origin = await mcp_status(http, tokens["access_token"], Origin="https://evil.example")
        host = await mcp_status(http, tokens["access_token"], Host="evil.example:7744")
    assert (good, origin, host) == (200, 403, 421)


def test_client_dataclass_is_importable() -> None:
    assert Client("a", None, REDIRECT).redirect_uri == REDIRECT
    assert isinstance(GatewayApp, type)


# -- client authentication ----
async def test_public_client_without_a_secret_completes_the_flow_with_pkce(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client, tokens = await full_flow(app, http, token_endpoint_auth_method="none")  # asserts HTTP 200
    assert client.client_secret is None
    assert tokens["access_token"] and tokens["refresh_token"]


async def test_basic_client_authentication_and_wrong_secrets(tmp_path: Path) -> None:
    import base64

    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http, token_endpoint_auth_method="client_secret_basic")
        assert client.client_secret is not None
        verifier, challenge = pkce()
        code = await code_for(app, http, client, challenge)
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "code_verifier": verifier,
            "redirect_uri": REDIRECT,
            "client_id": client.client_id,
        }
        wrong = base64.b64encode(f"{client.client_id}:nope".encode()).decode()
        bad = await http.post("/token", data=form, headers={"Authorization": f"Basic {wrong}"})
        right = base64.b64encode(f"{client.client_id}:{client.client_secret}".encode()).decode()
        good = await http.post("/token", data=form, headers={"Authorization": f"Basic {right}"})
    assert bad.status_code == 401 and bad.json()["error"] == "invalid_client"
    assert good.status_code == 200, good.text


async def test_post_client_secret_must_match(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    async with inproc(app) as http:
        client = await registered(http)
        verifier, challenge = pkce()
        code = await code_for(app, http, client, challenge)
        forged = Client(client.client_id, "0" * 64, client.redirect_uri)
        response = await token_request(
            http,
            forged,
            grant_type="authorization_code",
            code=code,
            code_verifier=verifier,
            redirect_uri=REDIRECT,
        )
    assert response.status_code == 401 and response.json()["error"] == "invalid_client"
