"""The tables of `DATA/oauth/oauth.sqlite3` (one row per client, code, token, grant, pending request).

Every secret column holds a SHA-256 hex digest, never the secret. Scopes are stored space-separated.
"""

from __future__ import annotations

import sqlite3

from ivoai.common.sqlite import Migration, run_script

SCHEMA = """
CREATE TABLE IF NOT EXISTS clients (
    client_id TEXT PRIMARY KEY,
    secret_sha256 TEXT,
    metadata TEXT NOT NULL,
    created_at REAL NOT NULL,
    used_at REAL
);
CREATE INDEX IF NOT EXISTS clients_unused ON clients (created_at) WHERE used_at IS NULL;
CREATE TABLE IF NOT EXISTS activations (
    id TEXT PRIMARY KEY,
    code_sha256 TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    scopes TEXT NOT NULL,
    consumed_at REAL,
    revoked_at REAL,
    client_id TEXT
);
CREATE TABLE IF NOT EXISTS grants (
    grant_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    activation_id TEXT NOT NULL,
    scopes TEXT NOT NULL,
    resource TEXT NOT NULL,
    created_at REAL NOT NULL,
    revoked_at REAL,
    revoke_reason TEXT
);
CREATE INDEX IF NOT EXISTS grants_by_activation ON grants (activation_id);
CREATE INDEX IF NOT EXISTS grants_by_client ON grants (client_id);
CREATE TABLE IF NOT EXISTS codes (
    code_sha256 TEXT PRIMARY KEY,
    grant_id TEXT NOT NULL,
    client_id TEXT NOT NULL,
    scopes TEXT NOT NULL,
    expires_at REAL NOT NULL,
    code_challenge TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    redirect_uri_provided_explicitly INTEGER NOT NULL,
    resource TEXT NOT NULL,
    consumed_at REAL
);
CREATE TABLE IF NOT EXISTS tokens (
    token_sha256 TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    grant_id TEXT NOT NULL,
    client_id TEXT NOT NULL,
    scopes TEXT NOT NULL,
    resource TEXT NOT NULL,
    expires_at REAL NOT NULL,
    rotated_at REAL
);
CREATE INDEX IF NOT EXISTS tokens_by_grant ON tokens (grant_id);
CREATE INDEX IF NOT EXISTS tokens_by_expiry ON tokens (expires_at);
CREATE TABLE IF NOT EXISTS pending (
    request_sha256 TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    client_name TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    redirect_uri_provided_explicitly INTEGER NOT NULL,
    scopes TEXT NOT NULL,
    state TEXT,
    code_challenge TEXT NOT NULL,
    resource TEXT NOT NULL,
    created_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    activation_id TEXT
);
CREATE INDEX IF NOT EXISTS pending_by_age ON pending (created_at);
"""


def _tables(conn: sqlite3.Connection) -> None:
    run_script(conn, SCHEMA)


# `user_version` 1 is what the first SQLite release recorded after creating SCHEMA; append, never edit.
STEPS = (Migration(1, "oauth_tables", _tables),)
SCHEMA_VERSION = STEPS[-1].version
