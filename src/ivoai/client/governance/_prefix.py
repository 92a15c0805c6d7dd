"""A byte-stable context prefix with its SHA-256 fingerprint (seed 001, `buildStableContextPrefix`).

Five sections in a fixed order: core rules, project instructions, tools, facts, skills. Equal
inputs always give the same bytes, so a provider's prompt cache keeps hitting and traces can
name the prefix by fingerprint. Normalisation: CRLF/CR become LF, trailing whitespace is dropped
from each line, tools and skills (sets) are sorted by name, facts keep their order (later facts
may refine earlier ones) with exact duplicates removed. An empty section still has its header.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ivoai.common.errors import TooLargeError, ValidationError
from ivoai.common.limits import STABLE_PREFIX_MAX_BYTES

SECTION_ORDER = ("core_rules", "project_instructions", "tools", "facts", "skills")
_TITLES = {
    "core_rules": "Core rules",
    "project_instructions": "Project instructions",
    "tools": "Tools",
    "facts": "Facts",
    "skills": "Skills",
}


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: its name and one description."""

    name: str
    description: str


@dataclass(frozen=True)
class StablePrefix:
    """The prefix text, its SHA-256 and the SHA-256 of each section (for traces and metrics)."""

    text: str
    sha256: str
    byte_length: int
    section_sha256: dict[str, str]


def _norm(text: str, field: str) -> str:
    if "\x00" in text:
        raise ValidationError(f"{field} contains a NUL character")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip("\n")


def _unique(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        if item and item not in seen:
            seen.add(item)
            out.append(item)
    return out


def build_stable_prefix(
    *,
    core_rules: str,
    project_instructions: str = "",
    tools: Sequence[ToolSpec] = (),
    facts: Sequence[str] = (),
    skills: Sequence[str] = (),
) -> StablePrefix:
    """Render the five sections in their fixed order and fingerprint the UTF-8 bytes.

    Raises:
        ValidationError: a NUL character, or two tools with one name.
        TooLargeError: the prefix exceeds STABLE_PREFIX_MAX_BYTES.
    """
    names = [t.name for t in tools]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"tools: duplicate tool name(s) {dupes[:5]}")
    bodies = {
        "core_rules": _norm(core_rules, "core_rules"),
        "project_instructions": _norm(project_instructions, "project_instructions"),
        "tools": "\n".join(
            f"- {_norm(t.name, 'tools.name')}: {_norm(t.description, 'tools.description')}"
            for t in sorted(tools, key=lambda t: t.name)
        ),
        "facts": "\n".join(f"- {f}" for f in _unique(_norm(x, "facts") for x in facts)),
        "skills": "\n".join(f"- {s}" for s in sorted(_unique(_norm(x, "skills") for x in skills))),
    }
    parts = []
    section_sha: dict[str, str] = {}
    for key in SECTION_ORDER:
        body = bodies[key] or "(none)"
        block = f"## {_TITLES[key]}\n{body}\n"
        section_sha[key] = hashlib.sha256(block.encode("utf-8")).hexdigest()
        parts.append(block)
    text = "\n".join(parts)
    data = text.encode("utf-8")
    if len(data) > STABLE_PREFIX_MAX_BYTES:
        raise TooLargeError(
            f"stable prefix is {len(data)} bytes; the limit is {STABLE_PREFIX_MAX_BYTES} bytes"
        )
    return StablePrefix(text, hashlib.sha256(data).hexdigest(), len(data), section_sha)
