"""`SKILL.md` front matter: a bounded no-follow read and a strict parser for a small YAML subset.

Why not a YAML library: a front matter is a dozen `key: value` lines, but full YAML brings anchors
and aliases (expansion bombs), tags (object construction in unsafe loaders), implicit typing
(`no` -> False) and a grammar where two parsers can disagree about what a file says. ivoai decides
policy from these bytes while Claude and Codex read the same file with their own YAML parsers, so
the parser here accepts only what it can read unambiguously and refuses the rest with the line
number. No dependency is added, and the cost is bounded by `SKILL_FRONTMATTER_MAX_BYTES`.

Accepted (enough for every real skill front matter seen): top-level `key: value` lines; plain,
single- and double-quoted scalars on one line; plain scalars continued on more-indented lines;
block scalars (`|`, `>`, with `-`/`+` chomping); flow sequences of scalars (`[a, "b"]`); block
sequences of scalars (`- a`); one level of mapping under `metadata:`. Values stay strings: there is
no implicit typing. Keys ivoai does not model are recorded by name and their blocks are skipped
without being interpreted.

Refused (the skill is quarantined with the reason): a missing or ambiguous `---` delimiter, tabs in
indentation, control characters, byte-order marks and Unicode line separators, anchors, aliases,
tags, flow mappings, quoted or complex keys, duplicate keys, multi-line quoted strings, nesting in
a modelled key, and anything over the limits in `common/limits.py`.

This module reads and splits the file and holds the fast path; the grammar is `_yaml_subset`, the
modelled keys and their checks `_skill_fields`.
"""

from __future__ import annotations

import errno
import os
import re
import stat

from ivoai.client.skills._beneath import open_no_symlinks
from ivoai.client.skills._skill_fields import (
    ALIASES,
    FIELDS,
    check_depth,
    take_field,
    take_metadata,
    to_meta,
    valid_name,
)
from ivoai.client.skills._yaml_subset import normalize_key, parse_entries, parse_lines, split_list
from ivoai.client.skills.model import FrontMatterError, MissingSkillFile, SkillMeta
from ivoai.common.errors import UnsafePathError
from ivoai.common.limits import (
    SKILL_FRONTMATTER_MAX_BYTES,
    SKILL_FRONTMATTER_MAX_KEYS,
    SKILL_FRONTMATTER_READ_BLOCK_BYTES,
    SKILL_LIST_MAX_ITEMS,
)

SKILL_FILE = "SKILL.md"

__all__ = [
    "SKILL_FILE",
    "FrontMatterError",
    "MissingSkillFile",
    "normalize_key",
    "parse_front_matter",
    "parse_general",
    "read_front_matter",
    "split_front_matter",
    "valid_name",
]


# The fast path: every line is `key: value` with a plain scalar or a quote-free `[a, b]` list. It must
# give exactly what the general parser gives (a property test compares both); anything else,
# including every error, goes through the general parser.
_BAD = "\x00-\x08\x0a-\x1f\x7f\u0085\u2028\u2029\ufeff"  # the forbidden characters, and the newline
_FAST_PLAIN = (
    f"[^\\s\\-?:,\\[\\]{{}}#&*!|>'\"%@`{_BAD}][^:#{_BAD}]*+(?:(?::(?=\\S)|(?<=\\S)#)[^:#{_BAD}]*+)*+"
)
_FAST_FLOW = f"\\[[^\\[\\]{{}}'\"#&*!|>%@`:{_BAD}]*\\]"
_FAST_LINE = re.compile(
    r"^([A-Za-z0-9_][A-Za-z0-9_.-]*):[ ]+(" + _FAST_PLAIN + "|" + _FAST_FLOW + r")[ \t]*+\r?$", re.MULTILINE
)


def read_front_matter(dir_fd: int, path: str = SKILL_FILE) -> str:
    """The front matter text of `path` below the directory `dir_fd`, without its `---` lines.

    No component of `path` may be a symlink (refused, never followed; see `_beneath`), the file
    is opened with O_NONBLOCK (a FIFO cannot block), must be a regular file with a single link,
    and is read in blocks only until the closing `---` line: the body is never read beyond the
    block that holds that line, and never parsed.

    Raises:
        MissingSkillFile: there is no such file.
        FrontMatterError: a link or special file, no closing delimiter within the limit, not UTF-8.
    """
    try:
        fd = open_no_symlinks(dir_fd, path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise MissingSkillFile(f"{path} is missing") from None
    except UnsafePathError:
        raise FrontMatterError(f"{path} is a symlink or has one on its path (never followed)") from None
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            raise MissingSkillFile(f"{path} is missing") from None
        if exc.errno == errno.ELOOP:
            raise FrontMatterError(f"{path} is a symlink (never followed)") from None
        raise FrontMatterError(f"{path} cannot be opened ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FrontMatterError(f"{path} is not a regular file")
        if st.st_nlink > 1:
            raise FrontMatterError(f"{path} is hard-linked ({st.st_nlink} links)")
        data = _read_until_delimiter(fd)
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FrontMatterError(f"{path} front matter is not UTF-8 (byte {exc.start})") from None


def _read_until_delimiter(fd: int) -> bytes:
    """Bytes between the opening and the closing `---` lines, reading as little as possible."""
    first = os.read(fd, SKILL_FRONTMATTER_READ_BLOCK_BYTES)
    if first.startswith(b"---\n"):  # the usual shape, settled from the first block
        end = first.find(b"\n---", 3)
        if end >= 0 and first[end + 4 : end + 5] == b"\n" and b"---" not in first[4:end]:
            return first[4 : end + 1]
    return _read_general(fd, first)


def _read_general(fd: int, first: bytes) -> bytes:
    buf = b""
    pending = [first]
    scanned = 0  # offset of the first line not yet checked for the closing delimiter
    opened = False
    while True:
        block = pending.pop() if pending else os.read(fd, SKILL_FRONTMATTER_READ_BLOCK_BYTES)
        buf += block
        while True:
            end = buf.find(b"\n", scanned)
            if end < 0:
                break
            line = buf[scanned:end]
            if not opened:
                if line.rstrip(b" \r") != b"---":
                    raise FrontMatterError(_no_opening())
                opened = True
                start = end + 1
            elif line.strip(b" \t\r") == b"---":
                if line.rstrip(b" \r") != b"---":
                    raise FrontMatterError(
                        f"ambiguous front matter delimiter {line.decode('utf-8', 'replace')!r}"
                    )
                return buf[start:scanned]
            scanned = end + 1
            if scanned > SKILL_FRONTMATTER_MAX_BYTES:
                raise FrontMatterError(_too_long())
        if len(buf) > SKILL_FRONTMATTER_MAX_BYTES:
            raise FrontMatterError(_too_long() if opened else _no_opening())
        if not block:
            last = buf[scanned:]
            if opened and last.strip(b" \t\r") == b"---" and last.rstrip(b" \r") == b"---":
                return buf[start:scanned]
            if not opened:
                raise FrontMatterError(_no_opening())
            raise FrontMatterError("front matter has no closing `---` line")


def _no_opening() -> str:
    return "SKILL.md does not start with a `---` front matter line"


def _too_long() -> str:
    return f"front matter exceeds {SKILL_FRONTMATTER_MAX_BYTES} bytes (or has no closing `---` line)"


def split_front_matter(text: str) -> str:
    """The front matter of a whole SKILL.md text (for bytes already in memory, e.g. package data).

    Raises:
        FrontMatterError: as `read_front_matter`.
    """
    lines = text.split("\n")
    if not lines or lines[0].rstrip(" \r") != "---":
        raise FrontMatterError(_no_opening())
    size = len(lines[0]) + 1
    for i, line in enumerate(lines[1:], start=1):
        if line.strip(" \t\r") == "---":
            if line.rstrip(" \r") != "---":
                raise FrontMatterError(f"ambiguous front matter delimiter {line!r}")
            return "\n".join(lines[1:i]) + ("\n" if i > 1 else "")
        size += len(line.encode("utf-8")) + 1
        if size > SKILL_FRONTMATTER_MAX_BYTES:
            raise FrontMatterError(_too_long())
    raise FrontMatterError("front matter has no closing `---` line")


def parse_front_matter(text: str) -> SkillMeta:
    """Validate the front matter text (as `read_front_matter` returns it) into `SkillMeta`.

    Raises:
        FrontMatterError: the first problem found, naming the line or the field and the limit.
    """
    if len(text) > SKILL_FRONTMATTER_MAX_BYTES and len(text.encode("utf-8")) > SKILL_FRONTMATTER_MAX_BYTES:
        raise FrontMatterError(_too_long())
    fast = _fast_meta(text)
    return fast if fast is not None else parse_general(text)


def parse_general(text: str) -> SkillMeta:
    """The general parser behind `parse_front_matter` (which tries a fast path for simple lines first).

    Raises:
        FrontMatterError: as `parse_front_matter`.
    """
    if len(text.encode("utf-8")) > SKILL_FRONTMATTER_MAX_BYTES:
        raise FrontMatterError(_too_long())
    lines = parse_lines(text)
    values: dict[str, str | list[str]] = {}
    other: set[str] = set()
    for entry in parse_entries(lines, 0, ""):
        check_depth(entry)
        if entry.key == "metadata":
            take_metadata(entry, values, other)
            continue
        take_field(entry, values, other, "")
    return to_meta(values, other)


_FAST_BAIL = frozenset({"metadata", *ALIASES})
_FIELD_SET = frozenset(FIELDS)
_LIST_KEYS = tuple(k for k, kind in FIELDS.items() if kind == "list")


def _fast_list(value: str) -> list[str] | None:
    if value[0] != "[":
        return split_list(value)
    inner = value[1:-1].strip()
    if not inner:
        return [] if value == "[]" else None
    items = inner.split(",") if "," in inner else [inner]
    if len(items) > 1:
        items = [item.strip() for item in items]
    for item in items:
        if not item or item[0] in "-?" or len(items) > SKILL_LIST_MAX_ITEMS:
            return None
    return items


def _fast_meta(text: str) -> SkillMeta | None:
    """`SkillMeta` for a front matter made only of simple `key: value` lines, else None.

    The common case, kept cheap because indexing is per file: one regex pass finds every line, and
    the values go through the same `to_meta` checks. Anything else (blocks, quotes, comments,
    `metadata`, aliases, duplicates) goes through the general parser, which also words every error.
    """
    if not text.endswith("\n"):
        return None
    pairs = _FAST_LINE.findall(text)
    count = len(pairs)
    if count != text.count("\n") or count > SKILL_FRONTMATTER_MAX_KEYS:
        return None
    raw = dict(pairs)
    keys = raw.keys()
    if len(raw) != count or keys & _FAST_BAIL or "_" in "".join(keys):
        return None
    values: dict[str, str | list[str]] = {}
    for key in keys & _FIELD_SET:
        value = raw[key].rstrip(" \t\r")
        if FIELDS[key] == "list":
            items = _fast_list(value)
            if items is None:
                return None
            values[key] = items
        elif value[0] == "[":
            return None
        else:
            values[key] = value
    try:
        return to_meta(values, set(keys - _FIELD_SET))
    except FrontMatterError:
        return None
