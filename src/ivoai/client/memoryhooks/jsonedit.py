"""Edit a JSON document as text, changing only the bytes of what is inserted or removed.

The hosts' settings files are the user's: formatting, key order, and every unrelated setting must
survive ivoai's edit byte-for-byte. `parse` records the span of every value (and of every object
member), `insert_*` splice new text in with the file's own indentation, and `remove_insertion`
undoes an insertion: exactly (the recorded text is cut where it is) when the surrounding bytes are
unchanged, otherwise semantically (the inserted values are located by content and cut with their
separating comma), never touching anything else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


class JsonSyntaxError(ValueError):
    """The text is not one JSON value (the message names the offset)."""


@dataclass
class Node:
    """A JSON value's span `[start, end)`; objects keep `members` (key, key_start, value), arrays `items`."""

    kind: str  # object | array | string | number | literal
    start: int
    end: int
    members: list[tuple[str, int, Node]] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)

    def member(self, key: str) -> Node | None:
        for name, _at, value in self.members:
            if name == key:
                return value
        return None

    def at(self, pointer: str) -> Node | None:
        """The node at a JSON pointer made of object keys (`/hooks/SessionStart`), or None."""
        node: Node | None = self
        for part in [p for p in pointer.split("/") if p]:
            if node is None or node.kind != "object":
                return None
            node = node.member(part.replace("~1", "/").replace("~0", "~"))
        return node


_WS = " \t\r\n"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.decoder = json.JSONDecoder()

    def fail(self, what: str) -> JsonSyntaxError:
        line = self.text.count("\n", 0, self.i) + 1
        return JsonSyntaxError(f"invalid JSON at line {line} (offset {self.i}): {what}")

    def ws(self) -> None:
        while self.i < len(self.text) and self.text[self.i] in _WS:
            self.i += 1

    def _open(self, closer: str) -> bool:
        """Step over the opening bracket; True when the container is empty (its `closer` is consumed)."""
        self.i += 1
        self.ws()
        if self.text[self.i : self.i + 1] == closer:
            self.i += 1
            return True
        return False

    def _closed(self, closer: str) -> bool:
        """After an element: True at `closer`, False at ','; either is consumed, anything else fails."""
        self.ws()
        c = self.text[self.i : self.i + 1]
        if c == closer:
            self.i += 1
            return True
        if c != ",":
            raise self.fail(f"expected ',' or '{closer}'")
        self.i += 1
        return False

    def value(self, depth: int = 0) -> Node:
        if depth > 200:
            raise self.fail("nested too deeply")
        self.ws()
        if self.i >= len(self.text):
            raise self.fail("unexpected end")
        c = self.text[self.i]
        start = self.i
        if c == "{":
            node = Node("object", start, start)
            if not self._open("}"):
                while True:
                    self.ws()
                    if self.text[self.i : self.i + 1] != '"':
                        raise self.fail("expected a member name")
                    key_at = self.i
                    key = self.string()
                    self.ws()
                    if self.text[self.i : self.i + 1] != ":":
                        raise self.fail("expected ':'")
                    self.i += 1
                    node.members.append((key, key_at, self.value(depth + 1)))
                    if self._closed("}"):
                        break
            node.end = self.i
            return node
        if c == "[":
            node = Node("array", start, start)
            if not self._open("]"):
                while True:
                    node.items.append(self.value(depth + 1))
                    if self._closed("]"):
                        break
            node.end = self.i
            return node
        if c == '"':
            self.string()
            return Node("string", start, self.i)
        try:
            _value, end = self.decoder.raw_decode(self.text, self.i)
        except ValueError:
            raise self.fail("expected a value") from None
        self.i = end
        return Node("number" if c not in "tfn" else "literal", start, end)

    def string(self) -> str:
        try:
            value, end = self.decoder.raw_decode(self.text, self.i)
        except ValueError:
            raise self.fail("invalid string") from None
        self.i = end
        return str(value)


def parse(text: str) -> Node:
    """The span tree of one JSON document.

    Raises:
        JsonSyntaxError: not exactly one JSON value (trailing content included).
    """
    parser = _Parser(text)
    root = parser.value()
    parser.ws()
    if parser.i != len(text):
        raise parser.fail("unexpected content after the document")
    return root


def value_of(text: str, node: Node) -> Any:
    return json.loads(text[node.start : node.end])


def _line_indent(text: str, at: int) -> str:
    """The whitespace at the start of the line containing offset `at`."""
    line_start = text.rfind("\n", 0, at) + 1
    end = line_start
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[line_start:end]


def indent_unit(text: str) -> str:
    """The file's indentation step (the first indented line's leading whitespace; default 2 spaces)."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            return line[: len(line) - len(stripped)]
    return "  "


def newline(text: str) -> str:
    """The file's line ending (CRLF when it uses one, else LF)."""
    return "\r\n" if "\r\n" in text else "\n"


def render(value: Any, unit: str, base: str, nl: str = "\n") -> str:
    """`value` as JSON indented with `unit`, its continuation lines starting at `base`."""
    dumped = json.dumps(value, indent=unit, ensure_ascii=False)
    return dumped.replace("\n", nl + base)


def _child_layout(text: str, container: Node, first_child_at: int | None, unit: str) -> tuple[str, bool]:
    """(indent of the container's children, whether children sit on their own lines)."""
    if first_child_at is not None:
        between = text[container.start + 1 : first_child_at]
        if "\n" in between:
            return _line_indent(text, first_child_at), True
        return "", False
    return _line_indent(text, container.start) + unit, True


def insert_item(text: str, array: Node, value: Any, unit: str) -> tuple[str, int, str]:
    """Append `value` to `array`; (new text, offset of the insertion, inserted text)."""
    nl = newline(text)
    first = array.items[0].start if array.items else None
    child, multiline = _child_layout(text, array, first, unit)
    rendered = render(value, unit, child, nl) if multiline else json.dumps(value, ensure_ascii=False)
    if array.items:
        at = array.items[-1].end
        inserted = ("," + nl + child if multiline else ", ") + rendered
    else:
        at = array.start + 1
        closing = nl + _line_indent(text, array.start)
        inserted = (nl + child + rendered + closing) if multiline else rendered
    return text[:at] + inserted + text[at:], at, inserted


def insert_members(text: str, obj: Node, members: list[tuple[str, Any]], unit: str) -> tuple[str, int, str]:
    """Add `members` (new keys) at the end of `obj`; (new text, offset, inserted text)."""
    nl = newline(text)
    first = obj.members[0][1] if obj.members else None
    child, multiline = _child_layout(text, obj, first, unit)
    sep = "," + nl + child if multiline else ", "
    body = sep.join(
        json.dumps(key, ensure_ascii=False)
        + ": "
        + (render(value, unit, child, nl) if multiline else json.dumps(value, ensure_ascii=False))
        for key, value in members
    )
    if obj.members:
        at = obj.members[-1][2].end
        inserted = sep + body
    else:
        at = obj.start + 1
        closing = nl + _line_indent(text, obj.start)
        inserted = (nl + child + body + closing) if multiline else body
    return text[:at] + inserted + text[at:], at, inserted


def _cut(text: str, start: int, end: int) -> str:
    return text[:start] + text[end:]


def remove_child(text: str, container: Node, index: int) -> str:
    """Remove item/member `index` of `container` with one separating comma (and its whitespace)."""
    spans = (
        [(at, value.end) for _key, at, value in container.members]
        if container.kind == "object"
        else [(item.start, item.end) for item in container.items]
    )
    start, end = spans[index]
    if index > 0:
        return _cut(text, spans[index - 1][1], end)  # ", <child>" after the previous one
    if len(spans) > 1:
        return _cut(text, start, spans[1][0])  # "<child>, " before the next one
    inner_start, inner_end = container.start + 1, container.end - 1
    return _cut(text, inner_start, inner_end)  # the only child: leave `[]` / `{}`


def remove_insertion(text: str, pointer: str, inserted: str, values: list[Any]) -> tuple[str, str]:
    """Undo one insertion into the container at `pointer`; (new text, how: exact|semantic|absent).

    `inserted` is the exact text that was spliced in; `values` the JSON values it added (array items,
    or `[key, value]` pairs for members). Exact: `inserted` occurs once inside the container -> cut
    it. Semantic: every added value still present is removed on its own (a member whose array ends up
    empty is removed too).

    Raises:
        JsonSyntaxError: the file is no longer JSON (nothing is changed).
    """
    root = parse(text)
    container = root.at(pointer)
    if container is None:
        return text, "absent"
    inner = text[container.start : container.end]
    if inner.count(inserted) == 1:
        at = container.start + inner.index(inserted)
        candidate = _cut(text, at, at + len(inserted))
        try:
            parse(candidate)
        except JsonSyntaxError:
            pass
        else:
            return candidate, "exact"
    changed = False
    for value in values:
        if container.kind == "array":
            text, removed = _remove_item(text, pointer, value)
        elif isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
            text, removed = _remove_member(text, pointer, value[0], value[1])
        else:
            removed = False
        changed = changed or removed
        container = parse(text).at(pointer)
        if container is None:
            break
    return text, "semantic" if changed else "absent"


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _remove_item(text: str, pointer: str, value: Any) -> tuple[str, bool]:
    """Remove the first item of the array at `pointer` equal to `value`."""
    array = parse(text).at(pointer)
    if array is None or array.kind != "array":
        return text, False
    for index, item in enumerate(array.items):
        if value_of(text, item) == value:
            return remove_child(text, array, index), True
    return text, False


def _remove_member(text: str, pointer: str, key: str, added: Any) -> tuple[str, bool]:
    """Remove what inserting member `key: added` into the object at `pointer` put there.

    The member goes when it still equals `added`; otherwise (the user added to it) only ivoai's parts
    go, recursively, and the member too once nothing but emptiness is left of it.
    """
    obj = parse(text).at(pointer)
    if obj is None or obj.kind != "object":
        return text, False
    index = next((i for i, (name, _at, _v) in enumerate(obj.members) if name == key), None)
    if index is None:
        return text, False
    member = obj.members[index][2]
    current = value_of(text, member)
    if current == added:
        return remove_child(text, obj, index), True
    child = pointer + "/" + _escape(key)
    changed = False
    if isinstance(added, dict) and isinstance(current, dict):
        for sub_key, sub_value in added.items():
            text, removed = _remove_member(text, child, sub_key, sub_value)
            changed = changed or removed
    elif isinstance(added, list) and isinstance(current, list):
        for element in added:
            text, removed = _remove_item(text, child, element)
            changed = changed or removed
    if changed and value_of(text, parse(text).at(child) or member) in ({}, []):
        obj = parse(text).at(pointer)
        assert obj is not None
        index = next(i for i, (name, _at, _v) in enumerate(obj.members) if name == key)
        text = remove_child(text, obj, index)
    return text, changed
