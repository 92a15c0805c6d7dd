"""Export to Markdown with frontmatter, and writing a Markdown file back."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ivoai.common.errors import UnsafePathError, ValidationError
from ivoai.server.memory._frontmatter import render_page, split_frontmatter
from ivoai.server.memory.documents import export_markdown, write_document
from ivoai.server.memory.service import MemoryService


def _fill(service: MemoryService) -> None:
    service.memory_write_page(
        "default",
        "app",
        "decisions/2026-11-auth.md",
        "# Auth\n\nWe use PKCE.\n---\nnot frontmatter\n",
        {
            "tags": ["auth", "security"],
            "entities": ["oauth"],
            "pinned": True,
            "kind": "decision",
            "expires_at": "2031-01-01T00:00:00Z",
        },
    )
    service.memory_write_page("default", "_global", "conventions.md", "Run ruff.")
    service.memory_write_page("team", "web", "gone.md", "deleted later")
    service.memory_delete_page("team", "web", "gone.md", confirm="gone.md")


def test_export_writes_private_markdown_files_with_frontmatter(
    service: MemoryService, tmp_path: Path
) -> None:
    _fill(service)
    dest = tmp_path / "export"
    seen: list[str] = []
    result = export_markdown(service, dest, on_page=seen.append)
    assert result.pages == 2 and seen == [
        "default/_global/conventions.md",
        "default/app/decisions/2026-11-auth.md",
    ]
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == ["default/_global/conventions.md", "default/app/decisions/2026-11-auth.md"]
    text = (dest / "default/app/decisions/2026-11-auth.md").read_text()
    assert text.startswith('---\ntitle: "Auth"\ntags: ["auth", "security"]\n')
    assert 'pinned: true\nexpires_at: "2031-01-01T00:00:00+00:00"\n' in text
    assert text.endswith("---\n# Auth\n\nWe use PKCE.\n---\nnot frontmatter\n")
    for path in dest.rglob("*"):
        mode = stat.S_IMODE(os.stat(path).st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), path


def test_export_can_be_limited_to_one_project(service: MemoryService, tmp_path: Path) -> None:
    _fill(service)
    result = export_markdown(service, tmp_path / "out", workspace="default", project="_global")
    assert result.pages == 1


def test_an_exported_page_written_back_restores_body_and_metadata(
    service: MemoryService, tmp_path: Path
) -> None:
    _fill(service)
    export_markdown(service, tmp_path / "out")
    text = (tmp_path / "out/default/app/decisions/2026-11-auth.md").read_text()
    original = service.memory_read_page("default", "app", "decisions/2026-11-auth.md")
    write_document(service, "default", "copy", "decisions/2026-11-auth.md", text)
    copy = service.memory_read_page("default", "copy", "decisions/2026-11-auth.md")
    assert copy.body == original.body
    assert copy.frontmatter() == original.frontmatter()


def test_export_refuses_a_directory_others_can_read(service: MemoryService, tmp_path: Path) -> None:
    dest = tmp_path / "shared"
    dest.mkdir(mode=0o755)
    dest.chmod(0o755)
    with pytest.raises(UnsafePathError, match="0700"):
        export_markdown(service, dest)


def test_a_document_with_an_unclosed_frontmatter_block_is_refused(service: MemoryService) -> None:
    with pytest.raises(ValidationError, match="not closed"):
        write_document(service, "w", "p", "a.md", "---\ntitle: x\nkind: note\n")
    assert service.memory_status().pages == 0


def test_document_frontmatter_updates_only_the_fields_it_names(service: MemoryService) -> None:
    service.memory_write_page("w", "p", "a.md", "one", {"title": "T", "tags": ["keep"], "pinned": True})
    write_document(service, "w", "p", "a.md", "---\npinned: false\n---\ntwo")
    page = service.memory_read_page("w", "p", "a.md")
    assert (page.title, page.tags, page.pinned, page.body) == ("T", ["keep"], False, "two")


def test_frontmatter_accepts_bare_yaml_scalars() -> None:
    fields, body = split_frontmatter("---\ntitle: Plain title\ntags: [a, 'b']\npinned: true\n---\nbody")
    assert fields == {"title": "Plain title", "tags": ["a", "b"], "pinned": True} and body == "body"
    assert split_frontmatter("no block") == (None, "no block")


def test_rendering_keeps_the_body_byte_for_byte(service: MemoryService) -> None:
    body = "line1\r\n\ttabbed\n\n---\n"
    service.memory_write_page("w", "p", "a.md", body)
    rendered = render_page(service.memory_read_page("w", "p", "a.md"))
    assert split_frontmatter(rendered)[1] == body
