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
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from typing import NamedTuple

from ivoai.client.skills._beneath import open_no_symlinks
from ivoai.client.skills.model import EXECUTORS, Risk, SkillError, SkillMeta
from ivoai.common.errors import UnsafePathError
from ivoai.common.limits import (
    SKILL_DESCRIPTION_MAX_CHARS,
    SKILL_FRONTMATTER_MAX_BYTES,
    SKILL_FRONTMATTER_MAX_DEPTH,
    SKILL_FRONTMATTER_MAX_KEYS,
    SKILL_FRONTMATTER_READ_BLOCK_BYTES,
    SKILL_LIST_MAX_ITEMS,
    SKILL_NAME_MAX_CHARS,
    SKILL_VALUE_MAX_CHARS,
)

SKILL_FILE = "SKILL.md"


class FrontMatterError(SkillError):
    """The front matter is missing, unreadable or outside the accepted subset; the message says where."""

    code = "skill_front_matter"


class MissingSkillFile(FrontMatterError):
    """The directory has no SKILL.md (it is not a skill directory)."""

    code = "skill_file_missing"


_KEY = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]*):(?:[ ]+(.*))?$")
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_~-]*")
_ROLE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_TOKEN = re.compile(r"[a-z][a-z0-9._:-]*")
_LIST_SPLIT = re.compile(r"[,\s]+")
# Characters a YAML parser could read as structure or as a line break; refused anywhere.
_FORBIDDEN_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f\u0085\u2028\u2029\ufeff]")
_UNSUPPORTED_START = "{}&*!%@`?|>,]"
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


class _Line(NamedTuple):
    number: int  # 1-based line number in SKILL.md
    indent: int
    text: str  # without the indentation


@dataclass(slots=True)
class _Entry:
    key: str
    number: int
    inline: str
    block: list[_Line]


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


# --- parsing -------------------------------------------------------------------------------------


def _lines(text: str) -> list[_Line]:
    bad = _FORBIDDEN_CHARS.search(text.replace("\r\n", "\n"))
    if bad:
        number = text.count("\n", 0, bad.start()) + 2  # line 1 is the opening `---`
        raise FrontMatterError(f"line {number}: control or line-separator character U+{ord(bad.group()):04X}")
    out: list[_Line] = []
    for number, raw in enumerate(text.split("\n"), start=2):
        line = raw[:-1] if raw.endswith("\r") else raw
        body = line.lstrip(" ")
        if body.startswith("\t"):
            raise FrontMatterError(f"line {number}: tab in indentation")
        out.append(_Line(number, len(line) - len(body), body.rstrip(" \t")))
    return out


def _entries(lines: list[_Line], indent: int, where: str) -> list[_Entry]:
    """Split lines into `key: value` entries at exactly `indent`; deeper lines belong to the entry above."""
    entries: list[_Entry] = []
    seen: set[str] = set()
    for line in lines:
        blank = not line.text or line.text.startswith("#")
        if entries and (blank or line.indent > indent or (line.indent == indent and _is_item(line.text))):
            entries[-1].block.append(line)
            continue
        if blank:
            continue
        if line.indent != indent:
            raise FrontMatterError(f"line {line.number}: unexpected indentation")
        match = _KEY.match(line.text)
        if not match:
            raise FrontMatterError(f"line {line.number}: expected `key: value`{where}")
        key = match.group(1)
        norm = normalize_key(key)
        if norm in seen:
            raise FrontMatterError(f"line {line.number}: key `{key}` is declared twice{where}")
        seen.add(norm)
        if len(seen) > SKILL_FRONTMATTER_MAX_KEYS:
            raise FrontMatterError(f"more than {SKILL_FRONTMATTER_MAX_KEYS} keys{where}")
        entries.append(_Entry(key, line.number, (match.group(2) or "").strip(), []))
    return entries


def _is_item(text: str) -> bool:
    return text == "-" or text.startswith("- ")


def normalize_key(key: str) -> str:
    """Key names compare case-sensitively in YAML; ivoai also treats `_` and `-` alike."""
    return key.replace("_", "-")


def _strip_comment(text: str) -> str:
    cut = text.find(" #")
    return text if cut < 0 else text[:cut].rstrip()


def _quoted(text: str, number: int) -> tuple[str, str]:
    """A quoted scalar at the start of `text`; returns (value, rest of the line)."""
    quote = text[0]
    i = 1
    out: list[str] = []
    while i < len(text):
        ch = text[i]
        if quote == "'" and ch == "'":
            if text[i + 1 : i + 2] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), text[i + 1 :]
        if quote == '"' and ch == '"':
            return "".join(out), text[i + 1 :]
        if quote == '"' and ch == "\\":
            i += 1
            esc = text[i : i + 1]
            simple = {'"': '"', "\\": "\\", "/": "/", "n": "\n", "t": "\t", " ": " "}
            if esc in simple:
                out.append(simple[esc])
                i += 1
                continue
            if esc == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", text[i + 1 : i + 5]):
                code = int(text[i + 1 : i + 5], 16)
                if _FORBIDDEN_CHARS.match(chr(code)) or 0xD800 <= code <= 0xDFFF:
                    raise FrontMatterError(f"line {number}: escaped control character \\u{code:04X}")
                out.append(chr(code))
                i += 5
                continue
            raise FrontMatterError(f"line {number}: unsupported escape in a double-quoted string")
        out.append(ch)
        i += 1
    raise FrontMatterError(
        f"line {number}: quoted string does not end on its line (multi-line quotes are not supported)"
    )


def _scalar_token(text: str, number: int) -> str:
    """One complete scalar written on a single line (list items, flow items, inline values)."""
    if not text:
        return ""
    if text[0] in "'\"":
        value, rest = _quoted(text, number)
        rest = rest.strip()
        if rest and not rest.startswith("#"):
            raise FrontMatterError(f"line {number}: text after a quoted string")
        return value
    if text[0] in _UNSUPPORTED_START or text.startswith(("- ", "[", ": ")) or text in ("-", ":"):
        raise FrontMatterError(
            f"line {number}: unsupported YAML syntax {text[:12]!r} "
            "(anchors, aliases, tags and flow mappings are refused)"
        )
    plain = _strip_comment(text)
    if ": " in plain or plain.endswith(":") or plain.startswith("#"):
        raise FrontMatterError(f"line {number}: `: ` inside a plain value; quote it")
    return plain


def _plain_continuation(line: _Line) -> str:
    text = _strip_comment(line.text)
    if _is_item(text) or ": " in text or text.endswith(":"):
        raise FrontMatterError(
            f"line {line.number}: `- ` or `: ` in a continued plain value; quote it or use `|`"
        )
    return text


def _flow_sequence(text: str, number: int) -> list[str]:
    """`[a, 'b', "c"]` on one line: scalars only."""
    items: list[str] = []
    i = 1
    while True:
        while i < len(text) and text[i] == " ":
            i += 1
        if i >= len(text):
            raise FrontMatterError(f"line {number}: `[` list does not end on its line")
        if text[i] == "]" and not items:
            rest = text[i + 1 :].strip()
            break
        if text[i] in "'\"":
            value, after = _quoted(text[i:], number)
            consumed = len(text[i:]) - len(after)
            j = i + consumed
        else:
            j = i
            while j < len(text) and text[j] not in ",]":
                j += 1
            value = text[i:j].strip()
            if (
                not value
                or value[0] in _UNSUPPORTED_START + "[]'\"-#"
                or ": " in value
                or value.endswith(":")
            ):
                raise FrontMatterError(f"line {number}: unsupported item {value[:12]!r} in a `[` list")
        items.append(value)
        if len(items) > SKILL_LIST_MAX_ITEMS:
            raise FrontMatterError(f"line {number}: more than {SKILL_LIST_MAX_ITEMS} items")
        while j < len(text) and text[j] == " ":
            j += 1
        if j >= len(text):
            raise FrontMatterError(f"line {number}: `[` list does not end on its line")
        if text[j] == "]":
            rest = text[j + 1 :].strip()
            break
        if text[j] != ",":
            raise FrontMatterError(f"line {number}: expected `,` or `]` in a `[` list")
        i = j + 1
    if rest and not rest.startswith("#"):
        raise FrontMatterError(f"line {number}: text after a `[` list")
    return items


def _block_scalar(header: str, block: list[_Line], number: int) -> str:
    indicator = _strip_comment(header)
    if indicator not in ("|", "|-", "|+", ">", ">-", ">+"):
        raise FrontMatterError(f"line {number}: unsupported block scalar header {indicator!r}")
    body = [ln for ln in block if ln.text]
    if not body:
        return ""
    base = body[0].indent
    # A comment less indented than the content ends the scalar (YAML); nothing follows it here.
    content = [ln for ln in block if not (ln.text.startswith("#") and ln.indent < base)]
    out: list[str] = []
    for ln in content:
        if not ln.text:
            out.append("")
            continue
        if ln.indent < base:
            raise FrontMatterError(
                f"line {ln.number}: block scalar line is less indented than its first line"
            )
        out.append(" " * (ln.indent - base) + ln.text)
    if indicator[0] == ">":
        folded: list[str] = []
        for piece in out:
            if piece and folded and folded[-1] and not piece.startswith(" "):
                folded[-1] += " " + piece
            else:
                folded.append(piece)
        out = folded
    text = "\n".join(out)
    if indicator.endswith("-"):
        return text.rstrip("\n")
    return text.rstrip("\n") + "\n"


def _value(entry: _Entry, *, want: str) -> str | list[str]:
    """Interpret a modelled key's value as a scalar (`want="str"`) or a list (`want="list"`)."""
    inline, block, number = entry.inline, entry.block, entry.number
    content = [ln for ln in block if ln.text and not ln.text.startswith("#")]
    if inline.startswith(("|", ">")):
        if want == "list":
            raise FrontMatterError(f"line {number}: `{entry.key}` must be a list")
        return _block_scalar(inline, block, number)
    if inline.startswith("["):
        if content:
            raise FrontMatterError(f"line {content[0].number}: unexpected lines after a `[` list")
        items = _flow_sequence(inline, number)
        return items if want == "list" else _only_scalar(entry, items)
    if inline and not inline.startswith("#"):
        if inline[0] in "'\"":
            if content:
                raise FrontMatterError(f"line {content[0].number}: unexpected lines after a quoted value")
            value = _scalar_token(inline, number)
        else:
            value = _scalar_token(inline, number)
            for ln in content:  # a plain scalar folded over more-indented lines
                value += " " + _plain_continuation(ln)
        return _split_list(value) if want == "list" else value
    if not content:
        return [] if want == "list" else ""
    if not _is_item(content[0].text):
        raise FrontMatterError(
            f"line {content[0].number}: nested mapping under `{entry.key}` is not supported"
        )
    items = []
    base = content[0].indent
    for ln in content:
        if ln.indent != base or not _is_item(ln.text):
            raise FrontMatterError(
                f"line {ln.number}: nested structure in the `{entry.key}` list is not supported"
            )
        items.append(_scalar_token(ln.text[1:].strip(), ln.number))
        if len(items) > SKILL_LIST_MAX_ITEMS:
            raise FrontMatterError(
                f"line {ln.number}: more than {SKILL_LIST_MAX_ITEMS} items in `{entry.key}`"
            )
    return items if want == "list" else _only_scalar(entry, items)


def _only_scalar(entry: _Entry, items: list[str]) -> str:
    raise FrontMatterError(f"line {entry.number}: `{entry.key}` must be a single value, not a list")


def _split_list(value: str) -> list[str]:
    """`a, b c` -> [a, b, c]; parentheses keep their content together (`Bash(git log:*)`)."""
    items: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in value:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        if depth == 0 and (ch == "," or ch.isspace()):
            if current:
                items.append("".join(current))
                current = []
            continue
        current.append(ch)
    if current:
        items.append("".join(current))
    if len(items) > SKILL_LIST_MAX_ITEMS:
        raise FrontMatterError(f"more than {SKILL_LIST_MAX_ITEMS} items in one list")
    return items


# Modelled keys: canonical name -> ("str" | "list"). Aliases map onto them.
_FIELDS = {
    "name": "str",
    "description": "str",
    "version": "str",
    "dependencies": "list",
    "optional-dependencies": "list",
    "conflicts": "list",
    "executors": "list",
    "capabilities": "list",
    "allowed-tools": "list",
    "risk": "str",
    "roles": "list",
    "phases": "list",
    "exclusive-role": "str",
}
_ALIASES = {"role": "roles", "phase": "phases", "requires": "dependencies"}


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
    lines = _lines(text)
    values: dict[str, str | list[str]] = {}
    other: set[str] = set()
    for entry in _entries(lines, 0, ""):
        _check_depth(entry)
        if entry.key == "metadata":
            _metadata(entry, values, other)
            continue
        _take(entry, values, other, "")
    return _to_meta(values, other)


_FAST_BAIL = frozenset({"metadata", *_ALIASES})
_FIELD_SET = frozenset(_FIELDS)
_LIST_KEYS = tuple(k for k, kind in _FIELDS.items() if kind == "list")


def _fast_list(value: str) -> list[str] | None:
    if value[0] != "[":
        return _split_list(value)
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
    the values go through the same `_to_meta` checks. Anything else (blocks, quotes, comments,
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
        if _FIELDS[key] == "list":
            items = _fast_list(value)
            if items is None:
                return None
            values[key] = items
        elif value[0] == "[":
            return None
        else:
            values[key] = value
    try:
        return _to_meta(values, set(keys - _FIELD_SET))
    except FrontMatterError:
        return None


def _check_depth(entry: _Entry) -> None:
    for ln in entry.block:
        if ln.text and ln.indent > 2 * SKILL_FRONTMATTER_MAX_DEPTH:
            raise FrontMatterError(
                f"line {ln.number}: nested deeper than {SKILL_FRONTMATTER_MAX_DEPTH} levels"
            )


def _take(entry: _Entry, values: dict[str, str | list[str]], other: set[str], where: str) -> None:
    key = normalize_key(entry.key)
    key = _ALIASES.get(key, key)
    kind = _FIELDS.get(key)
    if kind is None:
        other.add(entry.key if not where else f"metadata.{entry.key}")
        return
    if key in values:
        raise FrontMatterError(f"line {entry.number}: `{key}` is declared twice{where}")
    values[key] = _value(entry, want=kind)


def _metadata(entry: _Entry, values: dict[str, str | list[str]], other: set[str]) -> None:
    """`metadata:` (the Agent Skills extension point): ivoai's keys may live there as well."""
    content = [ln for ln in entry.block if ln.text and not ln.text.startswith("#")]
    if entry.inline and not entry.inline.startswith("#"):
        raise FrontMatterError(f"line {entry.number}: `metadata` must be a mapping")
    if not content:
        return
    base = content[0].indent
    if _is_item(content[0].text):
        raise FrontMatterError(f"line {content[0].number}: `metadata` must be a mapping, not a list")
    for sub in _entries(entry.block, base, " under `metadata`"):
        _take(sub, values, other, " (also under `metadata`)")


def _str(values: dict[str, str | list[str]], key: str) -> str | None:
    value = values.get(key)
    assert value is None or isinstance(value, str)
    return value


def _list(
    values: dict[str, str | list[str]], key: str, pattern: re.Pattern[str] | None, what: str
) -> tuple[str, ...]:
    """A list field, de-duplicated in order; each item checked against `pattern` (`what` names it)."""
    value = values.get(key)
    if not value:
        return ()
    assert isinstance(value, list)
    if (
        len(value) == 1
        and pattern is not None
        and len(value[0]) <= SKILL_VALUE_MAX_CHARS
        and pattern.fullmatch(value[0])
    ):
        return (value[0],)
    for item in value:
        if not item:
            raise FrontMatterError(f"field `{key}`: empty item")
        if len(item) > SKILL_VALUE_MAX_CHARS:
            raise FrontMatterError(f"field `{key}`: an item exceeds {SKILL_VALUE_MAX_CHARS} characters")
        if pattern is not None and pattern.fullmatch(item) is None:
            raise FrontMatterError(f"field `{key}`: {item[:80]!r} is not {what}")
        if pattern is None and not item.isprintable():
            raise FrontMatterError(f"field `{key}`: an item has control characters")
    return tuple(dict.fromkeys(value)) if len(value) > 1 else tuple(value)


def valid_name(name: str) -> bool:
    """A skill name: lowercase letters, digits and single inner hyphens, at most 64 characters."""
    return len(name) <= SKILL_NAME_MAX_CHARS and _NAME.fullmatch(name) is not None


_SKILL_NAME_WHAT = "a skill name (lowercase letters, digits, hyphens)"
_RISKS = {r.name: r.name for r in Risk}


_LIST_PATTERNS: dict[str, tuple[re.Pattern[str] | None, str]] = {
    "dependencies": (_NAME, _SKILL_NAME_WHAT),
    "optional-dependencies": (_NAME, _SKILL_NAME_WHAT),
    "conflicts": (_NAME, _SKILL_NAME_WHAT),
    "executors": (None, ""),
    "capabilities": (None, ""),
    "allowed-tools": (None, ""),
    "roles": (_ROLE, "a role name"),
    "phases": (_ROLE, "a role name"),
}


def _to_meta(values: dict[str, str | list[str]], other: set[str]) -> SkillMeta:
    name = _str(values, "name") or ""
    if " " in name or "\n" in name or "\t" in name:
        name = " ".join(name.split())
    if not name:
        raise FrontMatterError("missing field `name`")
    if not valid_name(name):
        raise FrontMatterError(
            f"field `name`: {name[:80]!r} is not a skill name (lowercase letters, digits, single hyphens, "
            f"at most {SKILL_NAME_MAX_CHARS} characters)"
        )
    description = " ".join((_str(values, "description") or "").split())
    if not description:
        raise FrontMatterError("missing field `description`")
    if len(description) > SKILL_DESCRIPTION_MAX_CHARS:
        raise FrontMatterError(f"field `description` exceeds {SKILL_DESCRIPTION_MAX_CHARS} characters")
    version = _str(values, "version")
    if version is not None:
        version = version.strip()
        if len(version) > SKILL_VALUE_MAX_CHARS or not _VERSION.fullmatch(version):
            raise FrontMatterError(
                f"field `version`: {version[:40]!r} is not a version (letters, digits, . + _ ~ -)"
            )
    risk = _str(values, "risk")
    if risk is not None:
        label = _RISKS.get(risk.strip().upper())
        if label is None:
            raise FrontMatterError(f"field `risk`: {risk[:40]!r} is not one of low, moderate, high, critical")
        risk = label
    exclusive = _str(values, "exclusive-role")
    if exclusive is not None and not _ROLE.fullmatch(exclusive):
        raise FrontMatterError(f"field `exclusive-role`: {exclusive[:40]!r} is not a role name")
    lists: dict[str, tuple[str, ...]] = {}
    for key in sorted(values.keys() & _LIST_PATTERNS.keys()):
        pattern, what = _LIST_PATTERNS[key]
        lists[key] = _list(values, key, pattern, what)
    executors = lists.get("executors", ())
    if executors:
        executors = tuple(dict.fromkeys(e.lower() for e in executors))
        for executor in executors:
            if executor not in EXECUTORS:
                raise FrontMatterError(
                    f"field `executors`: unknown executor {executor[:40]!r} (known: {', '.join(EXECUTORS)})"
                )
    capabilities = lists.get("capabilities", ())
    if capabilities:
        capabilities = tuple(dict.fromkeys(c.lower() for c in capabilities))
        for cap in capabilities:
            if not _TOKEN.fullmatch(cap):
                raise FrontMatterError(f"field `capabilities`: {cap[:40]!r} is not a capability name")
    deps = lists.get("dependencies", ())
    optional = lists.get("optional-dependencies", ())
    conflicts = lists.get("conflicts", ())
    if deps or optional or conflicts:
        if name in deps or name in optional or name in conflicts:
            raise FrontMatterError(
                "fields `dependencies`, `optional-dependencies`, `conflicts`: a skill cannot name itself"
            )
        for label, items in (
            ("dependencies", deps),
            ("optional-dependencies", optional),
            ("conflicts", conflicts),
        ):
            for item in items:
                if len(item) > SKILL_NAME_MAX_CHARS:
                    raise FrontMatterError(
                        f"field `{label}`: {item[:80]!r} is longer than {SKILL_NAME_MAX_CHARS} characters"
                    )
        if optional:
            optional = tuple(o for o in optional if o not in deps)
    return SkillMeta(
        name,
        description,
        version,
        deps,
        optional,
        conflicts,
        executors,
        capabilities,
        lists.get("allowed-tools", ()),
        risk,
        lists.get("roles", ()),
        lists.get("phases", ()),
        exclusive,
        tuple(sorted(other)) if other else (),
    )
