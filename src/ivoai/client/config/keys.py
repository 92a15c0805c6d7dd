"""The config keys ivoai knows, their allowed values and defaults (import-light: no tomlkit/pydantic)."""

from __future__ import annotations

from dataclasses import dataclass

from ivoai.client.config.errors import UnknownConfigKeyError
from ivoai.common.errors import UsageError
from ivoai.common.limits import (
    AUTO_RESUME_WINDOWS_DEFAULT,
    AUTO_RESUME_WINDOWS_MAX,
    AUTO_WORKERS_DEFAULT,
    AUTO_WORKERS_MAX,
    CONFIG_VALUE_MAX_CHARS,
    QUOTA_CONSERVE_THRESHOLD_PERCENT,
)
from ivoai.common.validate import is_int

# 2: compression.provider/source normalized (seed 003); see ivoai.client.config.migrations.
CONFIG_SCHEMA_VERSION = 2
# A config.toml without `schema` predates the migrations: it is schema 1.
LEGACY_CONFIG_SCHEMA_VERSION = 1

COMPRESSION_PROVIDERS = ("caveman", "headroom", "direct")
# Who chose compression.provider (seed 003): a fresh default, a migrated legacy value, or the user.
COMPRESSION_SOURCES = ("default", "migration", "explicit")


@dataclass(frozen=True)
class KeySpec:
    """One user-settable key: dotted name, help, and a choice list, an integer range or a boolean."""

    key: str
    description: str
    default: str | int | bool
    choices: tuple[str, ...] = ()
    int_range: tuple[int, int] | None = None
    boolean: bool = False

    @property
    def section(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def name(self) -> str:
        return self.key.split(".", 1)[1]

    def allowed(self) -> str:
        """Human description of the allowed values."""
        if self.boolean:
            return "true|false"
        if self.choices:
            return "|".join(self.choices)
        if self.int_range is not None:
            return f"integer {self.int_range[0]}..{self.int_range[1]}"
        return "string"

    def parse(self, raw: str) -> str | int | bool:
        """Validate a command-line value; raise UsageError naming the key and the allowed values."""
        if len(raw) > CONFIG_VALUE_MAX_CHARS:
            raise UsageError(f"value for {self.key} exceeds {CONFIG_VALUE_MAX_CHARS} characters")
        if self.boolean:
            if raw not in ("true", "false"):
                raise UsageError(f"invalid value for {self.key}; expected true or false")
            return raw == "true"
        if self.choices:
            if raw not in self.choices:
                raise UsageError(f"invalid value for {self.key}; expected one of: {', '.join(self.choices)}")
            return raw
        if self.int_range is not None:
            lo, hi = self.int_range
            try:
                number = int(raw, 10)
            except ValueError:
                raise UsageError(f"invalid value for {self.key}; expected an integer {lo}..{hi}") from None
            if not lo <= number <= hi:
                raise UsageError(f"invalid value for {self.key}; expected an integer {lo}..{hi}")
            return number
        return raw

    def problem(self, value: object) -> str | None:
        """Why a value read from config.toml is not allowed (naming the allowed values), or None.

        The value itself is never echoed: config files may hold secrets in the wrong place.
        """
        if self.boolean:
            return None if isinstance(value, bool) else f"{self.key} must be true or false"
        if self.choices:
            if isinstance(value, str) and value in self.choices:
                return None
            return f"{self.key} must be one of: {', '.join(self.choices)}"
        if self.int_range is not None:
            lo, hi = self.int_range
            if is_int(value, lo, hi):
                return None
            return f"{self.key} must be an integer {lo}..{hi}"
        return None if isinstance(value, str) else f"{self.key} must be a string"


KNOWN_KEYS: dict[str, KeySpec] = {
    spec.key: spec
    for spec in (
        KeySpec(
            "compression.provider",
            "Requested compression provider for launched agents (seed 003).",
            default="caveman",
            choices=COMPRESSION_PROVIDERS,
        ),
        KeySpec(
            "auto.workers",
            "Concurrent AUTO workers (default 2, hard cap 3).",
            default=AUTO_WORKERS_DEFAULT,
            int_range=(1, AUTO_WORKERS_MAX),
        ),
        # issue 16 (AUTO part 2)
        KeySpec(
            "auto.resume_after_reset",
            "Continue workers stopped by a quota limit, once each, when the window resets (opt-in).",
            default=False,
            boolean=True,
        ),
        KeySpec(
            "auto.resume_windows",
            "How many quota windows per session auto-resume may wait for (default 3).",
            default=AUTO_RESUME_WINDOWS_DEFAULT,
            int_range=(1, AUTO_RESUME_WINDOWS_MAX),
        ),
        KeySpec(
            "auto.conserve_threshold",
            "Remaining % of a quota window at or below which AUTO asks before routing on (default 10).",
            default=QUOTA_CONSERVE_THRESHOLD_PERCENT,
            int_range=(1, 100),
        ),
        KeySpec(
            "auto.coordinator",
            "AUTO lifecycle coordinator: native, or ruflo behind its safe-profile gate (default native).",
            default="native",
            choices=("native", "ruflo"),
        ),
    )
}

# Keys ivoai records itself; shown by `config show`, refused by `config set`.
INTERNAL_KEYS: dict[str, str] = {
    "compression.source": "set compression.provider instead (ivoai records compression.source itself)",
}
INTERNAL_CHOICES: dict[str, tuple[str, ...]] = {"compression.source": COMPRESSION_SOURCES}


def value_problems(data: dict[str, object]) -> list[tuple[str, str]]:
    """(key, why) for every known or internal key of a parsed config.toml whose value is not allowed.

    A known section that is not a table gives (section, why).
    """
    problems: list[tuple[str, str]] = []
    specs: dict[str, tuple[str, ...] | KeySpec] = {**KNOWN_KEYS, **INTERNAL_CHOICES}
    for key, spec in sorted(specs.items()):
        section_name, name = key.split(".", 1)
        section = data.get(section_name)
        if section is None:
            continue
        if not isinstance(section, dict):
            problem = (section_name, f"`{section_name}` must be a table")
            if problem not in problems:
                problems.append(problem)
            continue
        if name not in section:
            continue
        if isinstance(spec, KeySpec):
            found = spec.problem(section[name])
        else:
            found = None if section[name] in spec else f"{key} must be one of: {', '.join(spec)}"
        if found:
            problems.append((key, found))
    return problems


def without_keys(data: dict[str, object], keys: set[str]) -> dict[str, object]:
    """A copy of a parsed document without the given dotted keys (or whole sections)."""
    out: dict[str, object] = {}
    for name, value in data.items():
        if name in keys:
            continue
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if f"{name}.{k}" not in keys}
        out[name] = value
    return out


def key_spec(key: str) -> KeySpec:
    """The spec of a user-settable key.

    Raises:
        UnknownConfigKeyError: the key is unknown or internal; the message lists the valid keys.
    """
    spec = KNOWN_KEYS.get(key)
    if spec is not None:
        return spec
    valid = ", ".join(sorted(KNOWN_KEYS))
    if key in INTERNAL_KEYS:
        raise UnknownConfigKeyError(f"{key} cannot be set: {INTERNAL_KEYS[key]}; valid keys: {valid}")
    raise UnknownConfigKeyError(f"unknown config key {key!r}; valid keys: {valid}")
