"""Enrollment codes and client credentials: hashing, single use, uniform errors, cross-process locking."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from ivoai.common.errors import NotFoundError, ValidationError
from ivoai.common.protocol import DEFAULT_CLIENT_SCOPES
from ivoai.server.auth.enrollment import (
    UNIFORM_REJECTION,
    EnrollmentRejected,
    EnrollmentStore,
    parse_ttl,
)
from ivoai.server.datadir import ServerDataDir


class Clock:
    """A settable clock for expiry tests."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def data(tmp_path: Path) -> ServerDataDir:
    return ServerDataDir(tmp_path / "srv").ensure()


def store_for(data: ServerDataDir, clock: Clock | None = None) -> EnrollmentStore:
    return EnrollmentStore(data.root, data.enrollment, clock=clock or Clock())


def test_code_is_256_bit_base64url_and_only_its_hash_is_stored(data: ServerDataDir) -> None:
    created = store_for(data).create_code()
    assert len(created.code) == 43 and set(created.code) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    )
    raw = (data.enrollment / "state.json").read_text()
    assert created.code not in raw
    assert oct(os.stat(data.enrollment / "state.json").st_mode & 0o777) == "0o600"
    assert sorted(created.scopes) == sorted(DEFAULT_CLIENT_SCOPES)


def test_exchange_returns_credential_once_and_stores_only_its_hash(data: ServerDataDir) -> None:
    store = store_for(data)
    created = store.create_code()
    response = store.exchange(created.code)
    assert response.credential.startswith("ivc_")
    assert response.credential not in (data.enrollment / "state.json").read_text()
    principal = store.verify(response.credential)
    assert principal is not None and principal.client_id == response.client_id
    assert "memory:delete" not in principal.scopes


@pytest.mark.parametrize("state", ["unknown", "expired", "consumed", "revoked"])
def test_every_unusable_code_gets_the_same_error(data: ServerDataDir, state: str) -> None:
    clock = Clock()
    store = store_for(data, clock)
    created = store.create_code(ttl_seconds=60)
    code = created.code
    if state == "unknown":
        code = "x" * 43
    elif state == "expired":
        clock.now += 61
    elif state == "consumed":
        store.exchange(code)
    elif state == "revoked":
        store.revoke_code(created.id)
    with pytest.raises(EnrollmentRejected) as info:
        store.exchange(code)
    assert info.value.message == UNIFORM_REJECTION
    assert info.value.code == "enrollment_rejected"


def test_revoked_client_is_refused_immediately(data: ServerDataDir) -> None:
    store = store_for(data)
    response = store.exchange(store.create_code().code)
    assert store.verify(response.credential) is not None
    # A second store instance stands for the CLI process revoking while the gateway keeps its cache.
    store_for(data).revoke_client(response.client_id)
    assert store.verify(response.credential) is None


def test_revoking_an_unknown_id_names_the_list_command(data: ServerDataDir) -> None:
    with pytest.raises(NotFoundError, match="enrollment list"):
        store_for(data).revoke_code("enr_nope")
    with pytest.raises(NotFoundError, match="clients list"):
        store_for(data).revoke_client("cli_nope")


@pytest.mark.parametrize(
    ("text", "seconds"), [("10m", 600), ("90s", 90), ("2h", 7200), ("1d", 86400), ("45", 45)]
)
def test_ttl_accepts_units(text: str, seconds: int) -> None:
    assert parse_ttl(text, default=1, maximum=86400) == seconds


@pytest.mark.parametrize("text", ["0", "2d", "ten minutes", "-5m"])
def test_ttl_rejects_bad_or_too_long_values_naming_the_limit(text: str) -> None:
    with pytest.raises(ValidationError, match="--ttl"):
        parse_ttl(text, default=1, maximum=86400)


def test_unknown_scope_is_rejected_listing_known_ones(data: ServerDataDir) -> None:
    with pytest.raises(ValidationError, match=r"unknown scope\(s\) admin:write.*known: context:read"):
        store_for(data).create_code(scopes=["admin:write"])


def _exchange_in_child(
    root: str,
    code: str,
    barrier: multiprocessing.synchronize.Barrier,
    results: multiprocessing.queues.Queue[str],
) -> None:
    data = ServerDataDir(Path(root))
    store = EnrollmentStore(data.root, data.enrollment)
    barrier.wait(timeout=30)
    try:
        response = store.exchange(code)
        results.put(json.dumps({"ok": response.client_id}))
    except EnrollmentRejected as exc:
        results.put(json.dumps({"rejected": exc.code}))


def test_fifty_processes_racing_one_code_yield_exactly_one_credential(data: ServerDataDir) -> None:
    code = EnrollmentStore(data.root, data.enrollment).create_code().code  # real clock, like the children
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(50)
    results: multiprocessing.queues.Queue[str] = ctx.Queue()
    procs = [
        ctx.Process(target=_exchange_in_child, args=(str(data.root), code, barrier, results))
        for _ in range(50)
    ]
    for p in procs:
        p.start()
    outcomes = [json.loads(results.get(timeout=60)) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert sum(1 for o in outcomes if "ok" in o) == 1
    assert sum(1 for o in outcomes if o.get("rejected") == "enrollment_rejected") == 49
    clients = EnrollmentStore(data.root, data.enrollment).list_clients()
    assert len(clients) == 1
