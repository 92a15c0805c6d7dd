"""Modelled front matter keys: the parsed entries checked and mapped onto `SkillMeta`.

Every refusal is a `FrontMatterError` naming the field and the limit.
"""

from __future__ import annotations

import re

from ivoai.client.skills._yaml_subset import Entry, is_item, normalize_key, parse_entries, parse_value
from ivoai.client.skills.model import EXECUTORS, FrontMatterError, Risk, SkillMeta
from ivoai.common.limits import (
    SKILL_DESCRIPTION_MAX_CHARS,
    SKILL_FRONTMATTER_MAX_DEPTH,
    SKILL_NAME_MAX_CHARS,
    SKILL_VALUE_MAX_CHARS,
)

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_~-]*")
_ROLE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_TOKEN = re.compile(r"[a-z][a-z0-9._:-]*")


# Modelled keys: canonical name -> ("str" | "list"). Aliases map onto them.
FIELDS = {
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
ALIASES = {"role": "roles", "phase": "phases", "requires": "dependencies"}


def check_depth(entry: Entry) -> None:
    for ln in entry.block:
        if ln.text and ln.indent > 2 * SKILL_FRONTMATTER_MAX_DEPTH:
            raise FrontMatterError(
                f"line {ln.number}: nested deeper than {SKILL_FRONTMATTER_MAX_DEPTH} levels"
            )


def take_field(entry: Entry, values: dict[str, str | list[str]], other: set[str], where: str) -> None:
    key = normalize_key(entry.key)
    key = ALIASES.get(key, key)
    kind = FIELDS.get(key)
    if kind is None:
        other.add(entry.key if not where else f"metadata.{entry.key}")
        return
    if key in values:
        raise FrontMatterError(f"line {entry.number}: `{key}` is declared twice{where}")
    values[key] = parse_value(entry, want=kind)


def take_metadata(entry: Entry, values: dict[str, str | list[str]], other: set[str]) -> None:
    """`metadata:` (the Agent Skills extension point): ivoai's keys may live there as well."""
    content = [ln for ln in entry.block if ln.text and not ln.text.startswith("#")]
    if entry.inline and not entry.inline.startswith("#"):
        raise FrontMatterError(f"line {entry.number}: `metadata` must be a mapping")
    if not content:
        return
    base = content[0].indent
    if is_item(content[0].text):
        raise FrontMatterError(f"line {content[0].number}: `metadata` must be a mapping, not a list")
    for sub in parse_entries(entry.block, base, " under `metadata`"):
        take_field(sub, values, other, " (also under `metadata`)")


def _list(key: str, value: list[str], pattern: re.Pattern[str] | None, what: str) -> tuple[str, ...]:
    """A list field, de-duplicated in order; each item checked against `pattern` (`what` names it)."""
    if len(value) == 1 and pattern is not None:
        item = value[0]
        if len(item) <= SKILL_VALUE_MAX_CHARS and pattern.fullmatch(item):
            return (item,)
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


def to_meta(values: dict[str, str | list[str]], other: set[str]) -> SkillMeta:
    """Check the modelled values (scalars for "str" fields, lists for "list" fields, as `FIELDS`
    says; the parsers guarantee the kinds) and build the `SkillMeta`.

    Raises:
        FrontMatterError: the first problem: name, description, version, risk, exclusive role, then
            the list fields in name order.
    """
    scalars: dict[str, str] = {}
    raw_lists: dict[str, list[str]] = {}
    for key, value in values.items():
        if isinstance(value, str):
            scalars[key] = value
        elif value:
            raw_lists[key] = value
    name = _name(scalars.get("name", ""))
    description = " ".join(scalars.get("description", "").split())
    if not description:
        raise FrontMatterError("missing field `description`")
    if len(description) > SKILL_DESCRIPTION_MAX_CHARS:
        raise FrontMatterError(f"field `description` exceeds {SKILL_DESCRIPTION_MAX_CHARS} characters")
    version = scalars.get("version")
    if version is not None:
        version = version.strip()
        if len(version) > SKILL_VALUE_MAX_CHARS or not _VERSION.fullmatch(version):
            raise FrontMatterError(
                f"field `version`: {version[:40]!r} is not a version (letters, digits, . + _ ~ -)"
            )
    risk = scalars.get("risk")
    if risk is not None:
        label = _RISKS.get(risk.strip().upper())
        if label is None:
            raise FrontMatterError(f"field `risk`: {risk[:40]!r} is not one of low, moderate, high, critical")
        risk = label
    exclusive = scalars.get("exclusive-role")
    if exclusive is not None and not _ROLE.fullmatch(exclusive):
        raise FrontMatterError(f"field `exclusive-role`: {exclusive[:40]!r} is not a role name")
    lists: dict[str, tuple[str, ...]] = {}
    for key in sorted(raw_lists):
        pattern, what = _LIST_PATTERNS[key]
        lists[key] = _list(key, raw_lists[key], pattern, what)
    executors = lists.get("executors", ())
    if executors:
        executors = _tokens("executors", executors)
    capabilities = lists.get("capabilities", ())
    if capabilities:
        capabilities = _tokens("capabilities", capabilities)
    deps = lists.get("dependencies", ())
    optional = lists.get("optional-dependencies", ())
    conflicts = lists.get("conflicts", ())
    if deps or optional or conflicts:
        optional = _check_relations(name, deps, optional, conflicts)
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


def _name(name: str) -> str:
    if " " in name or "\n" in name or "\t" in name:
        name = " ".join(name.split())
    if not name:
        raise FrontMatterError("missing field `name`")
    if not valid_name(name):
        raise FrontMatterError(
            f"field `name`: {name[:80]!r} is not a skill name (lowercase letters, digits, single hyphens, "
            f"at most {SKILL_NAME_MAX_CHARS} characters)"
        )
    return name


def _tokens(key: str, items: tuple[str, ...]) -> tuple[str, ...]:
    """`executors` (known executors) and `capabilities` (capability names), lower-cased, de-duplicated."""
    lowered = tuple(dict.fromkeys(item.lower() for item in items))
    for item in lowered:
        if key == "executors" and item not in EXECUTORS:
            raise FrontMatterError(
                f"field `executors`: unknown executor {item[:40]!r} (known: {', '.join(EXECUTORS)})"
            )
        if key == "capabilities" and not _TOKEN.fullmatch(item):
            raise FrontMatterError(f"field `capabilities`: {item[:40]!r} is not a capability name")
    return lowered


def _check_relations(
    name: str, deps: tuple[str, ...], optional: tuple[str, ...], conflicts: tuple[str, ...]
) -> tuple[str, ...]:
    """Refuse self-references and over-long names; returns the optional dependencies not also required."""
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
    return tuple(o for o in optional if o not in deps) if optional else optional
