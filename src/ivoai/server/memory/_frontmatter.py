"""Markdown with a frontmatter block: how pages are exported and how a page file is read back.

Values are written as JSON, which is also valid YAML flow syntax, so other tools read them too.
"""

from __future__ import annotations

import json
from typing import Any

from ivoai.server.memory.errors import MemoryValidationError
from ivoai.server.memory.models import Page

FENCE = "---"
# Written on export for the reader's benefit, ignored when a file is written back.
IDENTITY_KEYS = ("workspace", "project", "path", "version", "created_at", "updated_at", "label")


def render_page(page: Page) -> str:
    """The page as Markdown: a frontmatter block (metadata and identity) and the exact body."""
    fields: dict[str, Any] = {
        "title": page.title,
        "tags": page.tags,
        "entities": page.entities,
        "kind": page.kind,
        "pinned": page.pinned,
        "expires_at": page.expires_at.isoformat() if page.expires_at else None,
        "workspace": page.workspace,
        "project": page.project,
        "path": page.path,
        "version": page.version,
        "created_at": page.created_at.isoformat(),
        "updated_at": page.updated_at.isoformat(),
        "label": page.label,
    }
    lines = [FENCE, *(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in fields.items()), FENCE]
    return "\n".join(lines) + "\n" + page.body


def split_frontmatter(text: str) -> tuple[dict[str, Any] | None, str]:
    """Split a Markdown document into (frontmatter fields or None, body).

    Identity keys written by export are dropped. Values may be JSON or bare YAML-style scalars.

    Raises:
        MemoryValidationError: the frontmatter block is not closed or a line is not `key: value`.
    """
    if not (text.startswith(FENCE + "\n") or text.startswith(FENCE + "\r\n")):
        return None, text
    lines = text.splitlines(keepends=True)
    fields: dict[str, Any] = {}
    for index, raw in enumerate(lines[1:], start=1):
        line = raw.rstrip("\r\n")
        if line == FENCE:
            return fields, "".join(lines[index + 1 :])
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or not key:
            raise MemoryValidationError(f"frontmatter line {index + 1} is not 'key: value'")
        if key in IDENTITY_KEYS:
            continue
        fields[key] = _scalar(value.strip())
    raise MemoryValidationError("frontmatter block is not closed by a '---' line")


def _scalar(value: str) -> Any:
    if value in ("", "~", "null"):
        return None
    try:
        return json.loads(value)
    except ValueError:
        pass
    if value.startswith("[") and value.endswith("]"):
        return [item.strip().strip("'\"") for item in value[1:-1].split(",") if item.strip()]
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value
