"""One-time import of the pre-SQLite OAuth state (`DATA/oauth/state.json`) into `oauth.sqlite3`.

A running install keeps its clients, activation codes, grants, authorization codes and tokens (all
still hashes). Registrations that never completed a grant are imported only when their metadata is
within today's bound (`OAUTH_REGISTRATION_MAX_BYTES`): a state file inflated by the registration
flood of issue 13 (over the old 16 MiB read limit, so every read failed) is repaired by the import,
which drops the flood and keeps the grants.

Every row is inserted with `INSERT OR IGNORE` in one write transaction, and the file is renamed to
`state.json.migrated` only after the commit: a crash in between imports the same rows again on the
next start, harmlessly, and two processes starting together import once. A file that cannot be read
as the old document (larger than `OAUTH_LEGACY_STATE_MAX_BYTES`, not JSON, another schema) is renamed
to `state.json.unreadable` with a warning, so sign-in works again instead of failing on every request.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError

from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import read_private_file_or_none
from ivoai.common.limits import OAUTH_LEGACY_STATE_MAX_BYTES, OAUTH_REGISTRATION_MAX_BYTES
from ivoai.server.auth._sqlite import Database
from ivoai.server.auth.oauth_records import ActivationRecord

log = logging.getLogger("ivoai.oauth")

LEGACY_NAME = "state.json"


class _Client(BaseModel):
    client_id: str
    secret_sha256: str | None = None
    metadata: dict[str, Any]
    created_at: float


class _Grant(BaseModel):
    grant_id: str
    client_id: str
    activation_id: str
    scopes: list[str]
    resource: str
    created_at: float
    revoked_at: float | None = None
    revoke_reason: str | None = None


class _Code(BaseModel):
    grant_id: str
    client_id: str
    scopes: list[str]
    expires_at: float
    code_challenge: str
    redirect_uri: str
    redirect_uri_provided_explicitly: bool
    resource: str
    consumed_at: float | None = None


class _Token(BaseModel):
    kind: Literal["access", "refresh"]
    grant_id: str
    client_id: str
    scopes: list[str]
    resource: str
    expires_at: float
    rotated_at: float | None = None


class _LegacyState(BaseModel):
    version: int = 1
    clients: dict[str, _Client] = Field(default_factory=dict)
    activations: list[ActivationRecord] = Field(default_factory=list)
    grants: dict[str, _Grant] = Field(default_factory=dict)
    codes: dict[str, _Code] = Field(default_factory=dict)
    tokens: dict[str, _Token] = Field(default_factory=dict)


def _scopes(items: list[str]) -> str:
    return " ".join(sorted(set(items)))


def import_legacy_state(root: Path, oauth_dir: Path, db: Database, *, now: float) -> bool:
    """Import `oauth_dir/state.json` when present (see module doc); True when something was imported."""
    path = oauth_dir / LEGACY_NAME
    if not path.exists():
        return False
    try:
        raw = read_private_file_or_none(root, path, OAUTH_LEGACY_STATE_MAX_BYTES)
        if raw is None:
            return False
        state = _LegacyState.model_validate(json.loads(raw))
    except (IvoaiError, ValueError, PydanticValidationError) as exc:
        reason = exc.message if isinstance(exc, IvoaiError) else type(exc).__name__
        _move_aside(path, "unreadable")
        log.warning("%s could not be imported (%s); moved to %s.unreadable", path, reason, path.name)
        return False
    with db.write() as conn:
        _insert(conn, state, now)
    _move_aside(path, "migrated")
    log.info("imported %s into the OAuth database; the old file is %s.migrated", path, path.name)
    return True


def _insert(conn: sqlite3.Connection, state: _LegacyState, now: float) -> None:
    """Every row of the old document worth keeping (see module doc), inside the caller's transaction."""
    used: dict[str, float] = {}
    for g in state.grants.values():  # a client's first grant makes it "used"
        used[g.client_id] = min(used.get(g.client_id, g.created_at), g.created_at)
    for client in state.clients.values():
        text = json.dumps(client.metadata, separators=(",", ":"), sort_keys=True)
        if client.client_id not in used and len(text.encode("utf-8")) > OAUTH_REGISTRATION_MAX_BYTES:
            continue  # an oversized registration that never obtained a grant: the flood
        conn.execute(
            "INSERT OR IGNORE INTO clients (client_id, secret_sha256, metadata, created_at, used_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (client.client_id, client.secret_sha256, text, client.created_at, used.get(client.client_id)),
        )
    conn.executemany(
        "INSERT OR IGNORE INTO activations (id, code_sha256, created_at, expires_at, scopes, "
        "consumed_at, "
        "revoked_at, client_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                a.id,
                a.code_sha256,
                a.created_at,
                a.expires_at,
                _scopes(a.scopes),
                a.consumed_at,
                a.revoked_at,
                a.client_id,
            )
            for a in state.activations
        ],
    )
    conn.executemany(
        "INSERT OR IGNORE INTO grants (grant_id, client_id, activation_id, scopes, resource, created_at, "
        "revoked_at, revoke_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                g.grant_id,
                g.client_id,
                g.activation_id,
                _scopes(g.scopes),
                g.resource,
                g.created_at,
                g.revoked_at,
                g.revoke_reason,
            )
            for g in state.grants.values()
        ],
    )
    conn.executemany(
        "INSERT OR IGNORE INTO codes (code_sha256, grant_id, client_id, scopes, expires_at, "
        "code_challenge, redirect_uri, redirect_uri_provided_explicitly, resource, consumed_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                digest,
                c.grant_id,
                c.client_id,
                _scopes(c.scopes),
                c.expires_at,
                c.code_challenge,
                c.redirect_uri,
                int(c.redirect_uri_provided_explicitly),
                c.resource,
                c.consumed_at,
            )
            for digest, c in state.codes.items()
        ],
    )
    conn.executemany(
        "INSERT OR IGNORE INTO tokens (token_sha256, kind, grant_id, client_id, scopes, resource, "
        "expires_at, "
        "rotated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                digest,
                t.kind,
                t.grant_id,
                t.client_id,
                _scopes(t.scopes),
                t.resource,
                t.expires_at,
                t.rotated_at,
            )
            for digest, t in state.tokens.items()
            if t.expires_at > now
        ],
    )


def _move_aside(path: Path, suffix: str) -> None:
    with contextlib.suppress(FileNotFoundError):  # another process got there first
        os.replace(path, path.with_name(f"{path.name}.{suffix}"))
