"""OAuth 2.1 persistence for the Web MCP endpoint: `DATA/oauth/oauth.sqlite3` (one row per record).

Only SHA-256 hashes of activation codes, authorization codes, access tokens, refresh tokens, client
secrets and consent request IDs are stored. Every mutation is one `BEGIN IMMEDIATE` transaction, so
any number of processes (gateway workers, the CLI) can share the file (see `_sqlite.py` and
`common/sqlite.py`).

What an unauthenticated caller can make the server store is bounded by constants, not by what it
sends: a registration is at most `OAUTH_REGISTRATION_MAX_BYTES` of metadata; registrations that
never completed a grant ("unused") are forgotten after `OAUTH_UNUSED_CLIENT_TTL_SECONDS` and, beyond
`OAUTH_MAX_UNUSED_CLIENTS`, the oldest is evicted to make room (a flood displaces other unused
registrations, never a client with a grant, and never refuses a new registration); pending consent
requests likewise (`OAUTH_PENDING_TTL_SECONDS`, `OAUTH_PENDING_MAX`). Clients with a grant are
created only by approvals, which need an administrator's activation code (`OAUTH_MAX_CLIENTS`).

A *grant* is one approved authorization (one consent with one activation code). Its authorization
code, access tokens and rotating refresh tokens all point at it, so revoking the grant revokes
everything it issued. That is what happens when:

- an authorization code is presented a second time (replay, or the loser of two concurrent
  redemptions);
- a refresh token that was already rotated is presented again (RFC 9700 §4.14.2: the whole family);
- the client calls the revocation endpoint with any of its tokens;
- the administrator revokes the activation code the grant was approved with.

A `state.json` from before this store is imported once on first use (`oauth_legacy.py`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Literal

from ivoai.common.errors import NotFoundError, ValidationError
from ivoai.common.ids import constant_time_equal, random_id, random_token, sha256_hex
from ivoai.common.limits import (
    OAUTH_ACCESS_TTL_SECONDS,
    OAUTH_CODE_TTL_SECONDS,
    OAUTH_MAX_CLIENTS,
    OAUTH_MAX_UNUSED_CLIENTS,
    OAUTH_PENDING_MAX,
    OAUTH_PENDING_TTL_SECONDS,
    OAUTH_REFRESH_TTL_SECONDS,
    OAUTH_REGISTRATION_MAX_BYTES,
    OAUTH_UNUSED_CLIENT_TTL_SECONDS,
    WEB_ACCESS_TTL_DEFAULT_SECONDS,
    WEB_ACCESS_TTL_MAX_SECONDS,
)
from ivoai.common.sqlite import prepare_file
from ivoai.server.auth._sqlite import Database, make_room
from ivoai.server.auth.enrollment import parse_ttl
from ivoai.server.auth.oauth_pending import PendingRequests
from ivoai.server.auth.oauth_records import (
    ACTIVATION_REJECTED,
    ActivationRecord,
    ActivationRejected,
    AuthCodeRecord,
    ClientLimitReached,
    Clock,
    CreatedActivation,
    GrantRecord,
    GrantReplayed,
    IssuedTokens,
    PendingAuthorization,
    PendingExpired,
    RegisteredClient,
    TokenRecord,
)
from ivoai.server.auth.oauth_schema import STEPS
from ivoai.server.auth.scopes import WEB_DEFAULT_SCOPES, WEB_SCOPES, parse_scopes

__all__ = [
    "ACCESS_PREFIX",
    "CODE_PREFIX",
    "REFRESH_PREFIX",
    "ActivationRecord",
    "ActivationRejected",
    "AuthCodeRecord",
    "ClientLimitReached",
    "Clock",
    "CreatedActivation",
    "GrantRecord",
    "GrantReplayed",
    "IssuedTokens",
    "OAuthStore",
    "PendingAuthorization",
    "PendingExpired",
    "RegisteredClient",
    "TokenRecord",
]

ACCESS_PREFIX = "ivo_at_"
REFRESH_PREFIX = "ivo_rt_"
CODE_PREFIX = "ivo_ac_"
DB_NAME = "oauth.sqlite3"
PRUNE_HORIZON_SECONDS = 86400  # used or revoked activation records are kept this long for `web-access list`


def _split(scopes: str) -> list[str]:
    return scopes.split()


def _join(scopes: list[str] | set[str] | tuple[str, ...]) -> str:
    return " ".join(sorted(set(scopes)))


def registered_scopes(metadata: dict[str, Any]) -> list[str]:
    """The scopes a client may ask for: its registered `scope`, or every Web scope when it gave none."""
    scope = metadata.get("scope")
    return _split(scope) if isinstance(scope, str) and scope.strip() else list(WEB_SCOPES)


class OAuthStore(PendingRequests):
    """The OAuth state database and every transition on it (synchronous; call from a worker thread)."""

    def __init__(self, data_root: Path, oauth_dir: Path, *, clock: Clock = time.time) -> None:
        self.root = data_root
        self.oauth_dir = oauth_dir
        self.path = oauth_dir / DB_NAME
        self.clock = clock
        self.max_unused_clients = OAUTH_MAX_UNUSED_CLIENTS
        self.max_clients = OAUTH_MAX_CLIENTS
        self.max_pending = OAUTH_PENDING_MAX
        self._db: Database | None = None
        self._open_lock = threading.Lock()

    def _database(self) -> Database:
        db = self._db
        if db is not None:
            return db
        with self._open_lock:
            if self._db is None:
                from ivoai.server.auth.oauth_legacy import import_legacy_state

                prepare_file(self.root, self.path)
                db = Database(self.root, self.path, STEPS)
                with db.init_lock():
                    db.initialize()
                    import_legacy_state(self.root, self.oauth_dir, db, now=self.clock())
                self._db = db
            return self._db

    def open(self) -> None:
        """Create or check the database now (and import a `state.json`) instead of on first use.

        Raises:
            StoreError, UnsafePathError, LockTimeoutError: the database cannot be opened.
        """
        self._database()

    def close(self) -> None:
        """Close this store's connections (it reopens on the next use)."""
        if self._db is not None:
            self._db.close()

    # -- clients ----------------------------------------------------------------------------------
    def register_client(self, client_id: str, metadata: dict[str, Any], secret: str | None) -> None:
        """Store a dynamically registered client as unused (its secret only as a hash).

        Makes room first: unused registrations past their TTL are dropped and, at the cap, the
        oldest unused one is evicted. Never refuses for lack of room (see module doc).

        Raises:
            ValidationError: the metadata is larger than `OAUTH_REGISTRATION_MAX_BYTES`.
        """
        text = json.dumps(metadata, separators=(",", ":"), sort_keys=True)
        if len(text.encode("utf-8")) > OAUTH_REGISTRATION_MAX_BYTES:
            raise ValidationError(
                f"client metadata is {len(text.encode('utf-8'))} bytes; "
                f"the limit is {OAUTH_REGISTRATION_MAX_BYTES}"
            )
        now = self.clock()
        with self._database().write() as conn:
            conn.execute(
                "DELETE FROM clients WHERE used_at IS NULL AND created_at <= ?",
                (now - OAUTH_UNUSED_CLIENT_TTL_SECONDS,),
            )
            make_room(conn, "clients", "client_id", self.max_unused_clients, "used_at IS NULL")
            conn.execute(
                "INSERT INTO clients (client_id, secret_sha256, metadata, created_at) VALUES (?, ?, ?, ?)",
                (client_id, sha256_hex(secret) if secret else None, text, now),
            )

    def get_client(self, client_id: str) -> RegisteredClient | None:
        """A registered client by ID (an unused registration past its TTL is gone)."""
        row = (
            self._database()
            .connection()
            .execute(
                "SELECT client_id, secret_sha256, metadata, created_at, used_at FROM clients "
                "WHERE client_id = ? AND (used_at IS NOT NULL OR created_at > ?)",
                (client_id, self.clock() - OAUTH_UNUSED_CLIENT_TTL_SECONDS),
            )
            .fetchone()
        )
        if row is None:
            return None
        return RegisteredClient(row[0], row[1], json.loads(row[2]), row[3], row[4])

    # -- activation codes -------------------------------------------------------------------------
    def create_activation(
        self, *, ttl: str | int | None = None, scopes: list[str] | str | None = None
    ) -> CreatedActivation:
        """A one-time activation code for the consent page; shown once, stored as a hash.

        Raises:
            ValidationError: bad TTL or scopes.
        """
        seconds = parse_ttl(ttl, default=WEB_ACCESS_TTL_DEFAULT_SECONDS, maximum=WEB_ACCESS_TTL_MAX_SECONDS)
        granted = parse_scopes(scopes, default=WEB_DEFAULT_SCOPES)
        code = random_token(32)
        now = self.clock()
        activation_id = random_id("web", 8)
        with self._database().write() as conn:
            conn.execute(
                "INSERT INTO activations (id, code_sha256, created_at, expires_at, scopes) "
                "VALUES (?, ?, ?, ?, ?)",
                (activation_id, sha256_hex(code), now, now + seconds, _join(granted)),
            )
        return CreatedActivation(id=activation_id, code=code, expires_at=now + seconds, scopes=granted)

    _ACTIVATION_COLUMNS = (
        "id, code_sha256, created_at, expires_at, scopes, consumed_at, revoked_at, client_id"
    )

    @staticmethod
    def _activation(row: tuple[Any, ...]) -> ActivationRecord:
        return ActivationRecord(
            id=row[0],
            code_sha256=row[1],
            created_at=row[2],
            expires_at=row[3],
            scopes=_split(row[4]),
            consumed_at=row[5],
            revoked_at=row[6],
            client_id=row[7],
        )

    def list_activations(self) -> list[ActivationRecord]:
        """Every activation code record (metadata), oldest first."""
        with self._database().read() as conn:
            rows = conn.execute(
                f"SELECT {self._ACTIVATION_COLUMNS} FROM activations ORDER BY created_at"
            ).fetchall()
        return [self._activation(r) for r in rows]

    def activation_status(self, record: ActivationRecord) -> str:
        """`open`, `consumed`, `revoked` or `expired`."""
        if record.revoked_at is not None:
            return "revoked"
        if record.consumed_at is not None:
            return "consumed"
        return "expired" if record.expires_at <= self.clock() else "open"

    def revoke_activation(self, activation_id: str) -> ActivationRecord:
        """Revoke an activation code and every grant approved with it.

        Raises:
            NotFoundError: unknown ID.
        """
        now = self.clock()
        with self._database().write() as conn:
            conn.execute(
                "UPDATE activations SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (now, activation_id),
            )
            row = conn.execute(
                f"SELECT {self._ACTIVATION_COLUMNS} FROM activations WHERE id = ?", (activation_id,)
            ).fetchone()
            if row is None:
                raise NotFoundError(
                    f"no web-access code with ID {activation_id!r} (see `ivoai server web-access list`)"
                )
            conn.execute(
                "UPDATE grants SET revoked_at = ?, revoke_reason = 'activation revoked' "
                "WHERE activation_id = ? AND revoked_at IS NULL",
                (now, activation_id),
            )
        return self._activation(row)

    def _find_activation(
        self, conn: sqlite3.Connection, *, code: str | None, activation_id: str | None
    ) -> ActivationRecord | None:
        if code is not None:
            digest = sha256_hex(code)
            row = conn.execute(
                f"SELECT {self._ACTIVATION_COLUMNS} FROM activations WHERE code_sha256 = ?", (digest,)
            ).fetchone()
            # The index probe is on a hash of a 256-bit secret; the comparison is constant-time all the same.
            if row is None or not constant_time_equal(row[1], digest):
                return None
        else:
            row = conn.execute(
                f"SELECT {self._ACTIVATION_COLUMNS} FROM activations WHERE id = ?", (activation_id,)
            ).fetchone()
        return None if row is None else self._activation(row)

    def check_activation(self, code: str) -> ActivationRecord:
        """The open activation record for `code` (nothing is consumed).

        Raises:
            ActivationRejected: uniform error for any unusable code.
        """
        with self._database().read() as conn:
            match = self._find_activation(conn, code=code, activation_id=None)
        if match is None or self.activation_status(match) != "open":
            raise ActivationRejected(ACTIVATION_REJECTED)
        return match

    # -- authorization codes ----------------------------------------------------------------------
    def approve(
        self,
        *,
        client_id: str,
        requested_scopes: list[str] | None,
        code_challenge: str,
        redirect_uri: str,
        redirect_uri_provided_explicitly: bool,
        resource: str,
        activation_code: str | None = None,
        activation_id: str | None = None,
        pending_request_id: str | None = None,
    ) -> tuple[str, list[str]]:
        """Consume the activation code (given as the code, or by ID once verified), create a grant and
        its authorization code; return (code, granted scopes).

        The grant never exceeds the activation code's scopes: requested scopes (or, without an
        explicit request, the client's registered ones) are narrowed to them (RFC 6749 §3.3). The
        consent page asks before approving a narrower grant than it showed (`oauth_consent.py`).
        With `pending_request_id`, that consent request is taken out in the same transaction, so
        one request yields at most one authorization code.

        Raises:
            ActivationRejected: the activation code is unusable (nothing is consumed).
            ValidationError: code `invalid_scope`: nothing requested was activated.
            ClientLimitReached: every slot for clients with a grant holds a live one.
            PendingExpired: the consent request is gone (expired, displaced or already decided).
        """
        if (activation_code is None) == (activation_id is None):
            raise ValueError("give exactly one of activation_code and activation_id")
        code = CODE_PREFIX + random_token(32)
        with self._database().write() as conn:
            now = self.clock()
            match = self._find_activation(conn, code=activation_code, activation_id=activation_id)
            if match is None or self.activation_status(match) != "open":
                raise ActivationRejected(ACTIVATION_REJECTED)
            if pending_request_id is not None and not self._take_pending_in(conn, pending_request_id):
                raise PendingExpired("the authorization request expired or was already decided")
            client = conn.execute(
                "SELECT metadata, used_at FROM clients WHERE client_id = ?", (client_id,)
            ).fetchone()
            if client is None:
                raise ActivationRejected(ACTIVATION_REJECTED)
            wanted = (
                set(requested_scopes)
                if requested_scopes is not None
                else set(registered_scopes(json.loads(client[0])))
            )
            allowed = set(match.scopes)
            scopes = sorted(wanted & allowed)
            if not scopes:
                raise ValidationError(
                    f"none of the requested scopes ({_join(wanted)}) is allowed by the activation code "
                    f"({_join(allowed)})",
                    code="invalid_scope",
                )
            if client[1] is None:
                self._make_room_for_a_used_client(conn, now)
                conn.execute("UPDATE clients SET used_at = ? WHERE client_id = ?", (now, client_id))
            conn.execute(
                "UPDATE activations SET consumed_at = ?, client_id = ? WHERE id = ?",
                (now, client_id, match.id),
            )
            grant_id = random_id("grt", 8)
            conn.execute(
                "INSERT INTO grants (grant_id, client_id, activation_id, scopes, resource, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (grant_id, client_id, match.id, _join(scopes), resource, now),
            )
            conn.execute(
                "INSERT INTO codes (code_sha256, grant_id, client_id, scopes, expires_at, code_challenge, "
                "redirect_uri, redirect_uri_provided_explicitly, resource) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sha256_hex(code),
                    grant_id,
                    client_id,
                    _join(scopes),
                    now + OAUTH_CODE_TTL_SECONDS,
                    code_challenge,
                    redirect_uri,
                    int(redirect_uri_provided_explicitly),
                    resource,
                ),
            )
            self._prune(conn, now)
        return code, scopes

    def _make_room_for_a_used_client(self, conn: sqlite3.Connection, now: float) -> None:
        (used,) = conn.execute("SELECT count(*) FROM clients WHERE used_at IS NOT NULL").fetchone()
        if used < self.max_clients:
            return
        # Forget clients with a grant whose every grant is revoked or has nothing live left.
        conn.execute(
            "DELETE FROM clients WHERE used_at IS NOT NULL AND client_id NOT IN ("
            " SELECT g.client_id FROM grants g WHERE g.revoked_at IS NULL AND ("
            "  EXISTS (SELECT 1 FROM tokens t WHERE t.grant_id = g.grant_id AND t.expires_at > ?)"
            "  OR EXISTS (SELECT 1 FROM codes c WHERE c.grant_id = g.grant_id AND c.expires_at > ?)))",
            (now, now),
        )
        (used,) = conn.execute("SELECT count(*) FROM clients WHERE used_at IS NOT NULL").fetchone()
        if used >= self.max_clients:
            raise ClientLimitReached(
                f"this server already has {used} connected Web clients (limit {self.max_clients}); "
                "revoke some with `ivoai server web-access revoke ID`"
            )

    @staticmethod
    def _revoke_grant(conn: sqlite3.Connection, grant_id: str, reason: str, now: float) -> None:
        conn.execute(
            "UPDATE grants SET revoked_at = ?, revoke_reason = ? WHERE grant_id = ? AND revoked_at IS NULL",
            (now, reason, grant_id),
        )

    _CODE_WITH_GRANT = (
        "SELECT c.grant_id, c.client_id, c.scopes, c.expires_at, c.code_challenge, c.redirect_uri, "
        "c.redirect_uri_provided_explicitly, c.resource, c.consumed_at, g.revoked_at "
        "FROM codes c JOIN grants g ON g.grant_id = c.grant_id WHERE c.code_sha256 = ?"
    )

    @staticmethod
    def _code(row: tuple[Any, ...]) -> AuthCodeRecord:
        return AuthCodeRecord(
            row[0], row[1], _split(row[2]), row[3], row[4], row[5], bool(row[6]), row[7], row[8]
        )

    def peek_code(self, code: str) -> AuthCodeRecord | None:
        """The unconsumed record for a code; a consumed one is a replay (its grant is revoked)."""
        if not code.startswith(CODE_PREFIX):
            return None
        digest = sha256_hex(code)
        db = self._database()
        with db.read() as conn:
            row = conn.execute(self._CODE_WITH_GRANT, (digest,)).fetchone()
        if row is None:
            return None
        record = self._code(row[:9])
        if record.consumed_at is not None:
            with db.write() as conn:
                self._revoke_grant(conn, record.grant_id, "authorization code replayed", self.clock())
            return None
        return None if row[9] is not None else record

    def redeem_code(self, code: str, client_id: str) -> IssuedTokens:
        """Consume an authorization code and issue the grant's first access and refresh tokens.

        Raises:
            GrantReplayed: the code was already consumed (concurrently or before): the grant is revoked.
        """
        digest = sha256_hex(code)
        issued: IssuedTokens | None = None
        with self._database().write() as conn:
            now = self.clock()
            row = conn.execute(self._CODE_WITH_GRANT, (digest,)).fetchone()
            if row is not None and row[1] == client_id:
                record = self._code(row[:9])
                if record.consumed_at is not None or row[9] is not None:
                    self._revoke_grant(conn, record.grant_id, "authorization code replayed", now)
                elif record.expires_at > now:
                    conn.execute("UPDATE codes SET consumed_at = ? WHERE code_sha256 = ?", (now, digest))
                    issued = self._issue(
                        conn, record.grant_id, client_id, record.scopes, record.resource, now
                    )
        if issued is None:
            raise GrantReplayed("authorization code is invalid, expired or already used")
        return issued

    @staticmethod
    def _issue(
        conn: sqlite3.Connection, grant_id: str, client_id: str, scopes: list[str], resource: str, now: float
    ) -> IssuedTokens:
        access = ACCESS_PREFIX + random_token(32)
        refresh = REFRESH_PREFIX + random_token(32)
        conn.executemany(
            "INSERT INTO tokens (token_sha256, kind, grant_id, client_id, scopes, resource, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    sha256_hex(access),
                    "access",
                    grant_id,
                    client_id,
                    _join(scopes),
                    resource,
                    now + OAUTH_ACCESS_TTL_SECONDS,
                ),
                (
                    sha256_hex(refresh),
                    "refresh",
                    grant_id,
                    client_id,
                    _join(scopes),
                    resource,
                    now + OAUTH_REFRESH_TTL_SECONDS,
                ),
            ],
        )
        return IssuedTokens(access, refresh, OAUTH_ACCESS_TTL_SECONDS, sorted(set(scopes)))

    # -- tokens -----------------------------------------------------------------------------------
    _LIVE_TOKEN = (
        "SELECT t.kind, t.grant_id, t.client_id, t.scopes, t.resource, t.expires_at, t.rotated_at "
        "FROM tokens t JOIN grants g ON g.grant_id = t.grant_id JOIN clients c ON c.client_id = t.client_id "
        "WHERE t.token_sha256 = ? AND t.kind = ? AND t.expires_at > ? AND g.revoked_at IS NULL"
    )

    @staticmethod
    def _token(row: tuple[Any, ...]) -> TokenRecord:
        kind: Literal["access", "refresh"] = "access" if row[0] == "access" else "refresh"
        return TokenRecord(kind, row[1], row[2], _split(row[3]), row[4], row[5], row[6])

    def verify_access(self, token: str) -> TokenRecord | None:
        """The live record for an access token (unexpired, grant not revoked, client registered), else None.

        One indexed read, no lock: this runs on every `/mcp` request.
        """
        if not token.startswith(ACCESS_PREFIX):
            return None
        conn = self._database().connection()
        row = conn.execute(self._LIVE_TOKEN, (sha256_hex(token), "access", self.clock())).fetchone()
        return None if row is None else self._token(row)

    def find_token(self, token: str) -> TokenRecord | None:
        """The record for an access or refresh token, live or not (revocation looks tokens up by this)."""
        if not token.startswith((ACCESS_PREFIX, REFRESH_PREFIX)):
            return None
        row = (
            self._database()
            .connection()
            .execute(
                "SELECT kind, grant_id, client_id, scopes, resource, expires_at, rotated_at FROM tokens "
                "WHERE token_sha256 = ?",
                (sha256_hex(token),),
            )
            .fetchone()
        )
        return None if row is None else self._token(row)

    def peek_refresh(self, token: str) -> TokenRecord | None:
        """The live record for a refresh token; a rotated one is a replay (its grant is revoked)."""
        if not token.startswith(REFRESH_PREFIX):
            return None
        found = self.find_token(token)
        if found is not None and found.kind == "refresh" and found.rotated_at is not None:
            with self._database().write() as conn:
                self._revoke_grant(conn, found.grant_id, "rotated refresh token replayed", self.clock())
            return None
        conn = self._database().connection()
        row = conn.execute(self._LIVE_TOKEN, (sha256_hex(token), "refresh", self.clock())).fetchone()
        return None if row is None else self._token(row)

    def rotate_refresh(self, token: str, client_id: str, scopes: list[str]) -> IssuedTokens:
        """Rotate a refresh token: mark it used, issue a new access and refresh token in the same grant.

        Raises:
            GrantReplayed: it was already rotated (the grant is now revoked) or is no longer valid.
        """
        digest = sha256_hex(token)
        issued: IssuedTokens | None = None
        with self._database().write() as conn:
            now = self.clock()
            row = conn.execute(
                "SELECT kind, grant_id, client_id, scopes, resource, expires_at, rotated_at FROM tokens "
                "WHERE token_sha256 = ?",
                (digest,),
            ).fetchone()
            record = None if row is None else self._token(row)
            if record is not None and record.kind == "refresh" and record.client_id == client_id:
                if record.rotated_at is not None:
                    self._revoke_grant(conn, record.grant_id, "rotated refresh token replayed", now)
                elif conn.execute(self._LIVE_TOKEN, (digest, "refresh", now)).fetchone() is not None and set(
                    scopes
                ) <= set(record.scopes):
                    conn.execute("UPDATE tokens SET rotated_at = ? WHERE token_sha256 = ?", (now, digest))
                    issued = self._issue(conn, record.grant_id, client_id, scopes, record.resource, now)
                    self._prune(conn, now)
        if issued is None:
            raise GrantReplayed("refresh token is invalid, expired or already used")
        return issued

    def revoke_token(self, token: str, *, client_id: str | None = None) -> bool:
        """Revoke the grant behind an access or refresh token; True when one was revoked.

        With `client_id`, only a token issued to that client counts (RFC 7009 §2.1); unknown
        tokens are no error.
        """
        digest = sha256_hex(token)
        with self._database().write() as conn:
            row = conn.execute(
                "SELECT grant_id, client_id FROM tokens WHERE token_sha256 = ?", (digest,)
            ).fetchone()
            if row is None or (client_id is not None and row[1] != client_id):
                return False
            self._revoke_grant(conn, row[0], "revoked by client", self.clock())
        return True

    def grant(self, grant_id: str) -> GrantRecord | None:
        """A grant by ID (for tests and status)."""
        row = (
            self._database()
            .connection()
            .execute(
                "SELECT grant_id, client_id, activation_id, scopes, resource, created_at, revoked_at, "
                "revoke_reason "
                "FROM grants WHERE grant_id = ?",
                (grant_id,),
            )
            .fetchone()
        )
        if row is None:
            return None
        return GrantRecord(row[0], row[1], row[2], _split(row[3]), row[4], row[5], row[6], row[7])

    @staticmethod
    def _prune(conn: sqlite3.Connection, now: float) -> None:
        """Drop expired codes and tokens, dead grants with nothing left pointing at them, old activations."""
        conn.execute("DELETE FROM codes WHERE expires_at <= ?", (now - OAUTH_CODE_TTL_SECONDS,))
        conn.execute("DELETE FROM tokens WHERE expires_at <= ?", (now,))
        conn.execute(
            "DELETE FROM grants WHERE revoked_at IS NOT NULL "
            "AND grant_id NOT IN (SELECT grant_id FROM tokens) "
            "AND grant_id NOT IN (SELECT grant_id FROM codes)"
        )
        conn.execute(
            "DELETE FROM activations WHERE consumed_at IS NULL AND coalesce(revoked_at, expires_at) <= ?",
            (now - PRUNE_HORIZON_SECONDS,),
        )

    # -- status -----------------------------------------------------------------------------------
    def summary(self) -> dict[str, int]:
        """Counts for status output (all zero, and nothing created, before the store exists)."""
        now = self.clock()
        if self._db is None and not self.path.exists() and not (self.oauth_dir / "state.json").exists():
            keys = ("registered_clients", "unused_clients", "open_activation_codes", "active_grants")
            return dict.fromkeys((*keys, "live_access_tokens", "pending_authorizations"), 0)
        with self._database().read() as conn:
            (clients, unused) = conn.execute(
                "SELECT count(*), coalesce(sum(used_at IS NULL), 0) FROM clients "
                "WHERE used_at IS NOT NULL OR created_at > ?",
                (now - OAUTH_UNUSED_CLIENT_TTL_SECONDS,),
            ).fetchone()
            (open_codes,) = conn.execute(
                "SELECT count(*) FROM activations "
                "WHERE consumed_at IS NULL AND revoked_at IS NULL AND expires_at > ?",
                (now,),
            ).fetchone()
            (grants,) = conn.execute("SELECT count(*) FROM grants WHERE revoked_at IS NULL").fetchone()
            (access,) = conn.execute(
                "SELECT count(*) FROM tokens WHERE kind = 'access' AND expires_at > ?", (now,)
            ).fetchone()
            (pending,) = conn.execute(
                "SELECT count(*) FROM pending WHERE created_at > ?", (now - OAUTH_PENDING_TTL_SECONDS,)
            ).fetchone()
        return {
            "registered_clients": clients,
            "unused_clients": unused,
            "open_activation_codes": open_codes,
            "active_grants": grants,
            "live_access_tokens": access,
            "pending_authorizations": pending,
        }
