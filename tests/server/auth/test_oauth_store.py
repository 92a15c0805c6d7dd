"""The OAuth store on SQLite: import of the pre-SQLite state.json, unused-registration expiry, and
cross-process safety of code redemption and registration (real processes, one database file)."""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import multiprocessing.queues
import multiprocessing.synchronize
import os
import sqlite3
from pathlib import Path

import pytest

from ivoai.common.ids import sha256_hex
from ivoai.common.limits import OAUTH_UNUSED_CLIENT_TTL_SECONDS
from ivoai.server.auth._sqlite import StoreError
from ivoai.server.auth.oauth_schema import SCHEMA
from ivoai.server.auth.oauth_store import GrantReplayed, OAuthStore
from ivoai.server.datadir import ServerDataDir
from tests.server.auth.oauth_client import mcp_status
from tests.server.gateway.support import Clock, data_dir, inproc, make_app

RESOURCE = "http://127.0.0.1:7744/mcp"
NOW = 2_000_000_000.0


def _legacy_state(flood: int) -> tuple[dict[str, object], dict[str, str]]:
    """A `state.json` as the JSON store wrote it: one client with a live grant, one small unused
    registration and `flood` registrations of ~4 MB each (what issue 13's attack left behind)."""
    secrets = {"access": "ivo_at_" + "a" * 43, "refresh": "ivo_rt_" + "r" * 43, "client_secret": "s" * 64}
    token = {"grant_id": "grt_1", "client_id": "c-used", "scopes": ["context:read"], "resource": RESOURCE}
    clients: dict[str, object] = {
        "c-used": {
            "client_id": "c-used",
            "secret_sha256": sha256_hex(secrets["client_secret"]),
            "metadata": {"redirect_uris": ["https://client.example/callback"], "client_name": "Used"},
            "created_at": NOW - 100,
        },
        "c-small": {
            "client_id": "c-small",
            "metadata": {"redirect_uris": ["https://small.example/cb"]},
            "created_at": NOW - 50,
        },
    }
    for i in range(flood):
        clients[f"c-flood-{i}"] = {
            "client_id": f"c-flood-{i}",
            "metadata": {"redirect_uris": ["https://x.example/cb"], "client_name": "A" * 3_900_000},
            "created_at": NOW - 10,
        }
    state = {
        "version": 1,
        "clients": clients,
        "activations": [
            {
                "id": "web_1",
                "code_sha256": sha256_hex("activation"),
                "created_at": NOW - 100,
                "expires_at": NOW + 500,
                "scopes": ["context:read"],
                "consumed_at": NOW - 90,
                "client_id": "c-used",
            }
        ],
        "grants": {
            "grt_1": {
                "grant_id": "grt_1",
                "client_id": "c-used",
                "activation_id": "web_1",
                "scopes": ["context:read"],
                "resource": RESOURCE,
                "created_at": NOW - 90,
            }
        },
        "codes": {},
        "tokens": {
            sha256_hex(secrets["access"]): {**token, "kind": "access", "expires_at": NOW + 3000},
            sha256_hex(secrets["refresh"]): {**token, "kind": "refresh", "expires_at": NOW + 86400},
        },
    }
    return state, secrets


def _write_legacy(data: ServerDataDir, state: dict[str, object]) -> Path:
    path = data.oauth / "state.json"
    path.write_text(json.dumps(state))
    os.chmod(path, 0o600)
    return path


@pytest.mark.anyio
async def test_a_flooded_json_state_is_imported_keeping_grants_and_dropping_the_flood(tmp_path: Path) -> None:
    data = data_dir(tmp_path)
    state, secrets = _legacy_state(flood=5)
    legacy = _write_legacy(data, state)
    assert legacy.stat().st_size > 16 * 1024 * 1024  # past the old read limit: every request failed
    clock = Clock(NOW)
    app = make_app(data, clock=clock)
    async with inproc(app) as http:
        assert await mcp_status(http, secrets["access"]) == 200
    store = OAuthStore(data.root, data.oauth, clock=clock)
    assert store.get_client("c-small") is not None
    assert store.get_client("c-flood-0") is None
    assert [a.id for a in store.list_activations()] == ["web_1"]
    rotated = store.rotate_refresh(secrets["refresh"], "c-used", ["context:read"])
    assert rotated.access_token.startswith("ivo_at_")
    assert not legacy.exists() and legacy.with_name("state.json.migrated").exists()
    assert store.summary()["registered_clients"] == 2


def test_an_unreadable_json_state_is_moved_aside_and_sign_in_works(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = data_dir(tmp_path)
    legacy = _write_legacy(data, {"clients": "not a mapping"})
    store = OAuthStore(data.root, data.oauth)
    with caplog.at_level(logging.WARNING, logger="ivoai.oauth"):
        assert store.create_activation().code
    assert legacy.with_name("state.json.unreadable").exists() and not legacy.exists()
    assert "could not be imported" in caplog.text


def test_unused_registrations_expire_after_their_ttl_and_used_clients_stay(tmp_path: Path) -> None:
    data = data_dir(tmp_path)
    clock = Clock(NOW)
    store = OAuthStore(data.root, data.oauth, clock=clock)
    redirect = {"redirect_uris": ["https://client.example/callback"]}
    store.register_client("unused", redirect, None)
    store.register_client("used", redirect, None)
    activation = store.create_activation()
    store.approve(
        activation_code=activation.code,
        client_id="used",
        requested_scopes=None,
        code_challenge="c" * 43,
        redirect_uri="https://client.example/callback",
        redirect_uri_provided_explicitly=True,
        resource=RESOURCE,
    )
    clock.now += OAUTH_UNUSED_CLIENT_TTL_SECONDS + 1
    assert store.get_client("unused") is None
    assert store.get_client("used") is not None
    assert store.summary()["unused_clients"] == 0


def _redeem_in_child(
    root: str,
    code: str,
    barrier: multiprocessing.synchronize.Barrier,
    results: multiprocessing.queues.Queue[str],
) -> None:
    data = ServerDataDir(Path(root))
    store = OAuthStore(data.root, data.oauth)
    barrier.wait(timeout=30)
    try:
        results.put(json.dumps({"ok": store.redeem_code(code, "racer").access_token}))
    except GrantReplayed as exc:
        results.put(json.dumps({"rejected": exc.code}))


def test_twenty_processes_racing_one_authorization_code_get_at_most_one_token_set(tmp_path: Path) -> None:
    data = data_dir(tmp_path)
    store = OAuthStore(data.root, data.oauth)  # real clock, like the children
    store.register_client("racer", {"redirect_uris": ["https://client.example/callback"]}, None)
    code, _ = store.approve(
        activation_code=store.create_activation().code,
        client_id="racer",
        requested_scopes=None,
        code_challenge="c" * 43,
        redirect_uri="https://client.example/callback",
        redirect_uri_provided_explicitly=True,
        resource=RESOURCE,
    )
    store.close()
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(20)
    results: multiprocessing.queues.Queue[str] = ctx.Queue()
    args = (str(data.root), code, barrier, results)
    procs = [ctx.Process(target=_redeem_in_child, args=args) for _ in range(20)]
    for p in procs:
        p.start()
    outcomes = [json.loads(results.get(timeout=60)) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    winners = [o["ok"] for o in outcomes if "ok" in o]
    assert len(winners) == 1
    assert sum(1 for o in outcomes if o.get("rejected") == "grant_replayed") == 19
    # The losers presented a consumed code: the grant is revoked, so the one token set is dead too.
    assert OAuthStore(data.root, data.oauth).verify_access(winners[0]) is None


def _register_in_child(root: str, first: int, barrier: multiprocessing.synchronize.Barrier) -> None:
    data = ServerDataDir(Path(root))
    store = OAuthStore(data.root, data.oauth)
    store.max_unused_clients = 10
    barrier.wait(timeout=30)
    for i in range(first, first + 10):
        store.register_client(f"c{i}", {"redirect_uris": ["https://client.example/callback"]}, None)


def test_registrations_from_many_processes_stay_within_the_unused_cap(tmp_path: Path) -> None:
    data = data_dir(tmp_path)
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(8)
    procs = [ctx.Process(target=_register_in_child, args=(str(data.root), 10 * n, barrier)) for n in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    summary = OAuthStore(data.root, data.oauth).summary()
    assert summary["unused_clients"] == 10


def test_a_database_written_by_the_first_sqlite_release_opens_with_its_rows(tmp_path: Path) -> None:
    # That release ran SCHEMA with executescript and set user_version = 1 (no history table).
    data = data_dir(tmp_path)
    path = data.oauth / "oauth.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)
    conn.execute(
        "INSERT INTO clients (client_id, metadata, created_at, used_at) VALUES ('c-old', ?, ?, ?)",
        (json.dumps({"redirect_uris": ["https://old.example/cb"]}), NOW - 10, NOW - 5),
    )
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    os.chmod(path, 0o600)
    store = OAuthStore(data.root, data.oauth, clock=Clock(NOW))
    client = store.get_client("c-old")
    assert client is not None and client.metadata["redirect_uris"] == ["https://old.example/cb"]
    assert store.summary()["registered_clients"] == 1
    store.close()


def test_a_database_from_a_newer_ivoai_is_refused_by_name_and_left_untouched(tmp_path: Path) -> None:
    data = data_dir(tmp_path)
    store = OAuthStore(data.root, data.oauth)
    store.open()
    store.close()
    path = data.oauth / "oauth.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")  # so that even switching to WAL would show
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    newer = r"has schema version 2, newer than this ivoai understands \(1\); upgrade ivoai"
    with pytest.raises(StoreError, match=newer) as info:
        OAuthStore(data.root, data.oauth).open()
    assert info.value.code == "state_store_error"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert not Path(f"{path}-wal").exists()
