"""Rendering shared by one-time code commands (`enrollment`, `web-access`): a new code once, else metadata."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from ivoai.cli._output import info, print_json, print_table


class CodeRecord(Protocol):
    id: str
    created_at: float
    expires_at: float
    consumed_at: float | None
    revoked_at: float | None
    client_id: str | None
    scopes: list[str]


class NewCode(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def code(self) -> str: ...
    @property
    def expires_at(self) -> float: ...
    @property
    def scopes(self) -> Sequence[str]: ...


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


def show_created(created: NewCode, doc: dict[str, Any], *, label: str, hint: str, json_out: bool) -> None:
    """A new code: `doc` as JSON, or the code alone on stdout (printed once, unredacted) and metadata
    and `hint` on stderr."""
    if json_out:
        print_json(doc)
        return
    sys.stdout.write(created.code + "\n")
    info(f"{label} {created.id}: expires {iso(created.expires_at)}, scopes {' '.join(created.scopes)}")
    info(hint)
