"""Page identity validation: paths, workspaces and projects."""

from __future__ import annotations

import pytest

from ivoai.common.errors import ValidationError
from ivoai.common.limits import MEMORY_NAME_MAX_CHARS, MEMORY_PATH_MAX_BYTES, MEMORY_PATH_MAX_DEPTH
from ivoai.server.memory._names import normalize_path, validate_project, validate_workspace
from ivoai.server.memory.errors import MemoryNameError, MemoryPathError
from ivoai.server.memory.service import MemoryService


@pytest.mark.parametrize("path", ["..", "../x.md", "a/../../b.md", "a/..", "./../a"])
def test_paths_with_dot_dot_are_refused(path: str) -> None:
    with pytest.raises(MemoryPathError, match=r"'\.\.'"):
        normalize_path(path)


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "//server/share.md", "C:/Users/x.md", "c:x.md", "~/notes.md"]
)
def test_absolute_paths_are_refused(path: str) -> None:
    with pytest.raises(MemoryPathError, match="relative"):
        normalize_path(path)


@pytest.mark.parametrize(
    "path", ["a\x00b.md", "a\nb.md", "a\rb.md", "esc\x1b[31m.md", "line\u2028sep.md", "del\x7f.md"]
)
def test_paths_with_nul_or_control_characters_are_refused(path: str) -> None:
    with pytest.raises(MemoryPathError, match="control character"):
        normalize_path(path)


def test_a_backslash_is_refused_rather_than_guessed() -> None:
    with pytest.raises(MemoryPathError, match="backslash"):
        normalize_path("decisions\\auth.md")


def test_over_long_paths_are_refused_naming_the_limit() -> None:
    long = "/".join(["d" * 100] * 6) + ".md"
    with pytest.raises(MemoryPathError, match=str(MEMORY_PATH_MAX_BYTES)):
        normalize_path(long)
    with pytest.raises(MemoryPathError, match="255"):
        normalize_path("x" * 300 + ".md")
    with pytest.raises(MemoryPathError, match=str(MEMORY_PATH_MAX_DEPTH)):
        normalize_path("/".join(["d"] * (MEMORY_PATH_MAX_DEPTH + 1)))


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("decisions/2026-11-auth.md", "decisions/2026-11-auth.md"),
        ("decisions/2026-11-auth", "decisions/2026-11-auth.md"),
        ("./a//b/./c.md", "a/b/c.md"),
        ("notes/", "notes.md"),
        ("Cafe\u0301.md", "Caf\u00e9.md"),
    ],
)
def test_paths_are_normalized(raw: str, normalized: str) -> None:
    assert normalize_path(raw) == normalized


@pytest.mark.parametrize("path", ["", ".", "./", "/"])
def test_empty_paths_are_refused(path: str) -> None:
    with pytest.raises(MemoryPathError):
        normalize_path(path)


def test_a_directory_component_cannot_look_like_a_page() -> None:
    with pytest.raises(MemoryPathError, match="must not end in .md"):
        normalize_path("a.md/b.md")


@pytest.mark.parametrize(
    "name",
    ["", "Upper", "-lead", ".lead", "_lead", "a b", "a/b", "a:b", "ü", "x" * (MEMORY_NAME_MAX_CHARS + 1)],
)
def test_names_that_break_the_pattern_are_refused(name: str) -> None:
    with pytest.raises(MemoryNameError):
        validate_workspace(name)
    with pytest.raises(MemoryNameError):
        validate_project(name)


def test_global_is_a_reserved_project_but_not_a_workspace() -> None:
    assert validate_project("_global") == "_global"
    with pytest.raises(MemoryNameError, match="workspace"):
        validate_workspace("_global")


@pytest.mark.parametrize(
    ("workspace", "project", "path"),
    [("Bad", "p", "a.md"), ("w", "Bad Name", "a.md"), ("w", "p", "../a.md"), ("w", "p", "/abs.md")],
)
def test_the_service_refuses_bad_identities_and_stores_nothing(
    service: MemoryService, workspace: str, project: str, path: str
) -> None:
    with pytest.raises(ValidationError) as info:
        service.memory_write_page(workspace, project, path, "body")
    assert info.value.code in ("memory_invalid_name", "memory_invalid_path")
    assert service.memory_status().pages == 0
