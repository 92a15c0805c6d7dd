"""Rendering shared by one-time code commands (`enrollment`, `web-access`): metadata only, never codes."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Protocol

from ivoai.cli._output import print_json, print_table


class CodeRecord(Protocol):
    id: str
    created_at: float
    expires_at: float
    consumed_at: float | None
    revoked_at: float | None
    client_id: str | None
    scopes: list[str]


def iso(ts: float | None) -> str | None:
    """A Unix time as ISO 8601 UTC (seconds), or None."""
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def code_row(record: CodeRecord, status: str) -> dict[str, Any]:
    """The stable `--json` row for one code record."""
    return {
        "id": record.id,
        "status": status,
        "created_at": iso(record.created_at),
        "expires_at": iso(record.expires_at),
        "consumed_at": iso(record.consumed_at),
        "revoked_at": iso(record.revoked_at),
        "client_id": record.client_id,
        "scopes": list(record.scopes),
    }


def render_code_rows(title: str, rows: Iterable[dict[str, Any]], *, json_out: bool) -> None:
    """Print code rows as JSON or as a table."""
    rows = list(rows)
    if json_out:
        print_json(rows)
        return
    print_table(
        title,
        ["ID", "STATUS", "EXPIRES", "CLIENT", "SCOPES"],
        [[r["id"], r["status"], r["expires_at"], r["client_id"] or "", " ".join(r["scopes"])] for r in rows],
    )
