"""Validation of the three parts of a page's identity: workspace, project and path."""

from __future__ import annotations

import re
import unicodedata

from ivoai.common.limits import (
    MEMORY_NAME_MAX_CHARS,
    MEMORY_PATH_COMPONENT_MAX_BYTES,
    MEMORY_PATH_MAX_BYTES,
    MEMORY_PATH_MAX_DEPTH,
)
from ivoai.server.memory.errors import MemoryNameError, MemoryPathError

DEFAULT_WORKSPACE = "default"
DEFAULT_PROJECT = "default"
# The reserved project whose pages every project of the same workspace sees (`include_global`).
GLOBAL_PROJECT = "_global"
PAGE_SUFFIX = ".md"

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_DRIVE_RE = re.compile(r"^[A-Za-z]:")


def validate_workspace(name: str) -> str:
    """Return `name` if it is a valid workspace name.

    Raises:
        MemoryNameError: it does not match the pattern or exceeds the length limit.
    """
    return _validate_name("workspace", name, allow_global=False)


def validate_project(name: str) -> str:
    """Return `name` if it is a valid project name (or the reserved `_global`).

    Raises:
        MemoryNameError: it does not match the pattern or exceeds the length limit.
    """
    return _validate_name("project", name, allow_global=True)


def _validate_name(field: str, name: str, *, allow_global: bool) -> str:
    if not isinstance(name, str):
        raise MemoryNameError(f"{field} must be a string")
    if allow_global and name == GLOBAL_PROJECT:
        return name
    if len(name) > MEMORY_NAME_MAX_CHARS:
        raise MemoryNameError(f"{field} is {len(name)} characters; the limit is {MEMORY_NAME_MAX_CHARS}")
    if not _NAME_RE.match(name):
        reserved = f" (or the reserved {GLOBAL_PROJECT!r})" if allow_global else ""
        raise MemoryNameError(f"{field} {name!r} must match ^[a-z0-9][a-z0-9._-]*${reserved}")
    return name


def normalize_path(path: str, *, field: str = "path") -> str:
    """Return the normalized page path: NFC, `./` and repeated slashes removed, `.md` appended.

    Raises:
        MemoryPathError: the path is empty, absolute, has `..`, a backslash, a control character,
            or exceeds the length/depth limits.
    """
    if not isinstance(path, str):
        raise MemoryPathError(f"{field} must be a string")
    if len(path) > MEMORY_PATH_MAX_BYTES * 4:  # cheap bound before normalizing
        raise MemoryPathError(f"{field} is longer than {MEMORY_PATH_MAX_BYTES} bytes")
    text = unicodedata.normalize("NFC", path)
    for ch in text:
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            raise MemoryPathError(f"{field} contains the control character U+{ord(ch):04X}")
    if "\\" in text:
        raise MemoryPathError(f"{field} must use '/' separators (a backslash is not allowed)")
    if text.startswith("/") or text.startswith("~") or _DRIVE_RE.match(text):
        raise MemoryPathError(f"{field} must be relative, got {_show(text)}")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts:
        raise MemoryPathError(f"{field} is empty")
    if any(p == ".." for p in parts):
        raise MemoryPathError(f"{field} must not contain '..' components")
    if len(parts) > MEMORY_PATH_MAX_DEPTH:
        raise MemoryPathError(f"{field} has {len(parts)} components; the limit is {MEMORY_PATH_MAX_DEPTH}")
    if not parts[-1].endswith(PAGE_SUFFIX) or parts[-1] == PAGE_SUFFIX:
        parts[-1] = parts[-1] + PAGE_SUFFIX
    for p in parts[:-1]:
        if p.endswith(PAGE_SUFFIX):
            # Every page file ends in .md, so no page can also be a directory of the export tree.
            raise MemoryPathError(f"{field} directory component {_show(p)} must not end in {PAGE_SUFFIX}")
    for p in parts:
        if p != p.strip():
            raise MemoryPathError(f"{field} component {_show(p)} has leading or trailing spaces")
        if len(p.encode("utf-8")) > MEMORY_PATH_COMPONENT_MAX_BYTES:
            raise MemoryPathError(
                f"{field} component is longer than {MEMORY_PATH_COMPONENT_MAX_BYTES} bytes "
                f"(with {PAGE_SUFFIX})"
            )
    normalized = "/".join(parts)
    if len(normalized.encode("utf-8")) > MEMORY_PATH_MAX_BYTES:
        raise MemoryPathError(f"{field} is longer than {MEMORY_PATH_MAX_BYTES} bytes")
    return normalized


def _show(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")
