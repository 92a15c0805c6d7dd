"""Authorization requests waiting on the consent page, shared by every gateway process.

A request is kept `OAUTH_PENDING_TTL_SECONDS`; beyond `OAUTH_PENDING_MAX` live requests the oldest is
dropped to make room, so a flood of `/authorize` calls never refuses a new one (it can only displace
requests older than itself). The request ID (192 random bits, in the consent page URL) is stored as
its SHA-256. A decision takes the request out in one transaction, so it is used once.
"""

from __future__ import annotations

import sqlite3

from ivoai.common.ids import sha256_hex
from ivoai.common.limits import OAUTH_PENDING_TTL_SECONDS
from ivoai.server.auth._sqlite import Database, make_room
from ivoai.server.auth.oauth_records import Clock, PendingAuthorization


def _split(scopes: str) -> list[str]:
    return scopes.split()


def _join(scopes: list[str]) -> str:
    return " ".join(sorted(set(scopes)))


class PendingRequests:
    """The `pending` table of the OAuth database (see module doc)."""

    clock: Clock
    max_pending: int

    def _database(self) -> Database:
        raise NotImplementedError

    _PENDING_COLUMNS = (
        "client_id, client_name, redirect_uri, redirect_uri_provided_explicitly, scopes, state, "
        "code_challenge, resource, created_at, attempts, activation_id"
    )

    def park_pending(self, pending: PendingAuthorization) -> None:
        """Keep an authorization request for the consent page (bounded: see the module doc)."""
        now = self.clock()
        with self._database().write() as conn:
            conn.execute("DELETE FROM pending WHERE created_at <= ?", (now - OAUTH_PENDING_TTL_SECONDS,))
            make_room(conn, "pending", "request_sha256", self.max_pending)
            conn.execute(
                f"INSERT INTO pending (request_sha256, {self._PENDING_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sha256_hex(pending.request_id),
                    pending.client_id,
                    pending.client_name,
                    pending.redirect_uri,
                    int(pending.redirect_uri_provided_explicitly),
                    _join(pending.scopes),
                    pending.state,
                    pending.code_challenge,
                    pending.resource,
                    pending.created_at,
                    pending.attempts,
                    pending.activation_id,
                ),
            )

    def _pending_row(self, conn: sqlite3.Connection, request_id: str) -> PendingAuthorization | None:
        row = conn.execute(
            f"SELECT {self._PENDING_COLUMNS} FROM pending WHERE request_sha256 = ? AND created_at > ?",
            (sha256_hex(request_id), self.clock() - OAUTH_PENDING_TTL_SECONDS),
        ).fetchone()
        if row is None:
            return None
        return PendingAuthorization(
            request_id,
            row[0],
            row[1],
            row[2],
            bool(row[3]),
            _split(row[4]),
            row[5],
            row[6],
            row[7],
            row[8],
            row[9],
            row[10],
        )

    def pending(self, request_id: str) -> PendingAuthorization | None:
        """A live pending request by ID."""
        if not request_id:
            return None
        return self._pending_row(self._database().connection(), request_id)

    def take_pending(self, request_id: str) -> PendingAuthorization | None:
        """Remove and return a live pending request (a decision uses it up; only one caller gets it)."""
        with self._database().write() as conn:
            found = self._pending_row(conn, request_id)
            conn.execute("DELETE FROM pending WHERE request_sha256 = ?", (sha256_hex(request_id),))
        return found

    def _take_pending_in(self, conn: sqlite3.Connection, request_id: str) -> bool:
        """Inside a write transaction: remove a live pending request; False when there was none."""
        found = self._pending_row(conn, request_id) is not None
        conn.execute("DELETE FROM pending WHERE request_sha256 = ?", (sha256_hex(request_id),))
        return found

    def pending_attempt_failed(self, request_id: str) -> int:
        """Count one wrong activation code against a pending request; the attempts so far."""
        with self._database().write() as conn:
            conn.execute(
                "UPDATE pending SET attempts = attempts + 1 WHERE request_sha256 = ?",
                (sha256_hex(request_id),),
            )
            row = conn.execute(
                "SELECT attempts FROM pending WHERE request_sha256 = ?", (sha256_hex(request_id),)
            ).fetchone()
        return int(row[0]) if row is not None else 0

    def narrow_pending(self, request_id: str, *, scopes: list[str], activation_id: str) -> None:
        """Bind a verified activation code to a pending request whose grant it narrows to `scopes`."""
        with self._database().write() as conn:
            conn.execute(
                "UPDATE pending SET scopes = ?, activation_id = ? WHERE request_sha256 = ?",
                (_join(scopes), activation_id, sha256_hex(request_id)),
            )
