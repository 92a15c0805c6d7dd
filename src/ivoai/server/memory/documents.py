"""Markdown documents in and out of the store: export to a directory, write from a file."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ivoai.common.fsio import atomic_write, ensure_private_dir
from ivoai.server.memory._frontmatter import render_page, split_frontmatter
from ivoai.server.memory.errors import MemoryNotFoundError, MemoryValidationError
from ivoai.server.memory.models import Frontmatter, WriteResult, parse_model
from ivoai.server.memory.service import MemoryService


class ExportResult(BaseModel):
    """What an export wrote."""

    directory: str
    pages: int
    bytes: int


def export_markdown(
    service: MemoryService,
    dest: Path,
    *,
    workspace: str | None = None,
    project: str | None = None,
    on_page: Callable[[str], None] | None = None,
) -> ExportResult:
    """Write every live page as `DEST/<workspace>/<project>/<path>` (Markdown with frontmatter).

    Directories are created 0700 and files 0600, each replaced atomically; other files in DEST
    are left alone.

    Raises:
        UnsafePathError: DEST (or a directory below it) is a symlink, foreign-owned or not private.
    """
    ensure_private_dir(dest)
    pages = written = 0
    for page in service.iter_pages(workspace, project):
        data = render_page(page).encode("utf-8")
        atomic_write(dest, dest / page.workspace / page.project / page.path, data)
        pages += 1
        written += len(data)
        if on_page is not None:
            on_page(f"{page.workspace}/{page.project}/{page.path}")
    return ExportResult(directory=str(dest), pages=pages, bytes=written)


def write_document(
    service: MemoryService,
    workspace: str,
    project: str,
    path: str,
    text: str,
    *,
    overrides: Mapping[str, Any] | None = None,
    expected_version: int | None = None,
) -> WriteResult:
    """Write a Markdown document (optionally with a frontmatter block) as a page version.

    Metadata is the current page's, updated by the document's frontmatter and then by `overrides`;
    with neither, the current metadata is kept as is.

    Raises:
        MemoryValidationError: the frontmatter block or a field is invalid.
        MemoryConflictError: `expected_version` is stale.
    """
    fields, body = split_frontmatter(text)
    if not body.strip():
        raise MemoryValidationError(f"{path}: the page body is empty; nothing was written")
    updates = {**(fields or {}), **(overrides or {})}
    frontmatter: Frontmatter | None = None
    if updates:
        try:
            base = service.memory_read_page(workspace, project, path).frontmatter().model_dump()
        except MemoryNotFoundError:
            base = {}
        frontmatter = parse_model(Frontmatter, {**base, **updates}, what="frontmatter")
    return service.memory_write_page(workspace, project, path, body, frontmatter, expected_version)
