"""Issue 13 item 6: unauthenticated registrations can neither grow the OAuth state without bound nor
break sign-in. Floods run against the real app on a real socket; the full walk must succeed after."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx2
import pytest

from ivoai.common.limits import OAUTH_REGISTRATION_MAX_BYTES
from ivoai.server.auth.oauth_store import OAuthStore
from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.runtime.runner import running
from ivoai.server.runtime.status import server_status
from tests.server.auth.oauth_client import full_flow, mcp_status
from tests.server.gateway.support import data_dir, inproc, make_app, make_hub

pytestmark = pytest.mark.anyio

BIG_NAME = "A" * (3_900_000)  # just under the gateway's 4 MiB body bound


def _padded_registration(i: int) -> dict[str, object]:
    """A valid registration within a few hundred bytes of the metadata bound (the server's defaults
    for the members it omits must still fit)."""
    uris = [f"https://flood{i}.example/{n}/" + "p" * 440 for n in range(7)]
    body: dict[str, object] = {"redirect_uris": uris, "client_name": "n" * 150, "software_id": "s" * 200}
    assert OAUTH_REGISTRATION_MAX_BYTES - 500 < len(json.dumps(body)) < OAUTH_REGISTRATION_MAX_BYTES - 250
    return body


def _state_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "oauth").iterdir() if p.is_file())


async def test_a_flood_of_big_many_and_concurrent_registrations_leaves_sign_in_working(
    tmp_path: Path,
) -> None:
    data = data_dir(tmp_path)
    with running(data, GatewaySettings(listen_port=0), hub=make_hub(data)) as srv:
        srv.app.oauth.max_unused_clients = 20  # the real bound is larger; the eviction rule is the same
        statuses: list[int] = []
        async with httpx2.AsyncClient(base_url=srv.url, timeout=60) as http:

            async def big() -> None:
                body = {"redirect_uris": ["https://x.example/cb"], "client_name": BIG_NAME}
                statuses.append((await http.post("/register", json=body)).status_code)

            async def many(i: int) -> None:
                statuses.append((await http.post("/register", json=_padded_registration(i))).status_code)

            async with anyio.create_task_group() as tg:
                for _ in range(6):
                    tg.start_soon(big)
            assert statuses == [400] * 6
            statuses.clear()
            async with anyio.create_task_group() as tg:
                for i in range(60):
                    tg.start_soon(many, i)
            assert statuses == [201] * 60
            assert srv.app.oauth.summary()["unused_clients"] == 20
            _, tokens = await full_flow(srv.app, http)  # register, authorize, consent, token
            assert await mcp_status(http, tokens["access_token"]) == 200
    assert _state_bytes(data.root) < 2 * 1024 * 1024
    # After a restart: the CLI's view of the state and a fresh sign-in both work.
    status = server_status(data)
    assert (status["web_access"]["registered_clients"], status["web_access"]["unused_clients"]) == (20, 19)
    reopened = OAuthStore(data.root, data.oauth)
    assert reopened.create_activation().code
    assert reopened.verify_access(tokens["access_token"]) is not None  # the grant survived
    app = make_app(data)
    async with inproc(app) as http:
        _, again = await full_flow(app, http)
        assert await mcp_status(http, again["access_token"]) == 200


async def test_clients_that_completed_a_grant_are_never_evicted_by_a_flood(tmp_path: Path) -> None:
    app = make_app(data_dir(tmp_path))
    app.oauth.max_unused_clients = 5
    async with inproc(app) as http:
        _, tokens = await full_flow(app, http)
        for i in range(20):
            assert (await http.post("/register", json=_padded_registration(i))).status_code == 201
        assert await mcp_status(http, tokens["access_token"]) == 200
    summary = app.oauth.summary()
    assert (summary["registered_clients"], summary["unused_clients"]) == (6, 5)
