"""The YAML subset `SKILL.md` front matter may use: lines, `key: value` entries and their values.

What is accepted and what is refused, and why there is no YAML library, is `frontmatter`'s docstring.
Every refusal is a `FrontMatterError` naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from ivoai.client.skills.model import FrontMatterError
from ivoai.common.limits import (
    SKILL_FRONTMATTER_MAX_KEYS,
    SKILL_LIST_MAX_ITEMS,
)

_KEY = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]*):(?:[ ]+(.*))?$")
_LIST_SPLIT = re.compile(r"[,\s]+")
# Characters a YAML parser could read as structure or as a line break; refused anywhere.
_FORBIDDEN_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f\u0085\u2028\u2029\ufeff]")
_UNSUPPORTED_START = "{}&*!%@`?|>,]"


class Line(NamedTuple):
    number: int  # 1-based line number in SKILL.md
    indent: int
    text: str  # without the indentation


@dataclass(slots=True)
class Entry:
    key: str
    number: int
    inline: str
    block: list[Line]


# --- parsing -------------------------------------------------------------------------------------


def parse_lines(text: str) -> list[Line]:
    bad = _FORBIDDEN_CHARS.search(text.replace("\r\n", "\n"))
    if bad:
        number = text.count("\n", 0, bad.start()) + 2  # line 1 is the opening `---`
        raise FrontMatterError(f"line {number}: control or line-separator character U+{ord(bad.group()):04X}")
    out: list[Line] = []
    for number, raw in enumerate(text.split("\n"), start=2):
        line = raw[:-1] if raw.endswith("\r") else raw
        body = line.lstrip(" ")
        if body.startswith("\t"):
            raise FrontMatterError(f"line {number}: tab in indentation")
        out.append(Line(number, len(line) - len(body), body.rstrip(" \t")))
    return out


def parse_entries(lines: list[Line], indent: int, where: str) -> list[Entry]:
    """Split lines into `key: value` entries at exactly `indent`; deeper lines belong to the entry above."""
    entries: list[Entry] = []
    seen: set[str] = set()
    for line in lines:
        blank = not line.text or line.text.startswith("#")
        if entries and (blank or line.indent > indent or (line.indent == indent and is_item(line.text))):
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
        entries.append(Entry(key, line.number, (match.group(2) or "").strip(), []))
    return entries


def is_item(text: str) -> bool:
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


def _plain_continuation(line: Line) -> str:
    text = _strip_comment(line.text)
    if is_item(text) or ": " in text or text.endswith(":"):
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


def _block_scalar(header: str, block: list[Line], number: int) -> str:
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


def parse_value(entry: Entry, *, want: str) -> str | list[str]:
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
        return split_list(value) if want == "list" else value
    if not content:
        return [] if want == "list" else ""
    if not is_item(content[0].text):
        raise FrontMatterError(
            f"line {content[0].number}: nested mapping under `{entry.key}` is not supported"
        )
    items = []
    base = content[0].indent
    for ln in content:
        if ln.indent != base or not is_item(ln.text):
            raise FrontMatterError(
                f"line {ln.number}: nested structure in the `{entry.key}` list is not supported"
            )
        items.append(_scalar_token(ln.text[1:].strip(), ln.number))
        if len(items) > SKILL_LIST_MAX_ITEMS:
            raise FrontMatterError(
                f"line {ln.number}: more than {SKILL_LIST_MAX_ITEMS} items in `{entry.key}`"
            )
    return items if want == "list" else _only_scalar(entry, items)


def _only_scalar(entry: Entry, items: list[str]) -> str:
    raise FrontMatterError(f"line {entry.number}: `{entry.key}` must be a single value, not a list")


def split_list(value: str) -> list[str]:
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
