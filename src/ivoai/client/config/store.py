"""config.toml: a tomlkit document (every byte of unknown tables, keys and comments kept) plus a typed
pydantic projection of the keys ivoai knows.

Writers take an advisory lock, re-read and re-validate the file, apply their change to the
document, and publish it by atomic replacement: concurrent `ivoai config set` runs all land.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pydantic
import tomlkit
import tomlkit.exceptions
from tomlkit.items import Table
from tomlkit.toml_document import TOMLDocument

from ivoai.client.config.errors import ConfigError
from ivoai.client.config.fast import (
    check_schema,
    decode_config_bytes,
    known_value_error,
    parse_config_text,
    toml_error,
)
from ivoai.client.config.keys import (
    CONFIG_SCHEMA_VERSION,
    KNOWN_KEYS,
    LEGACY_CONFIG_SCHEMA_VERSION,
    key_spec,
    value_problems,
    without_keys,
)
from ivoai.common.fsio import atomic_write, file_lock, read_private_file_or_none, remove_stale_staging
from ivoai.common.limits import AUTO_RESUME_WINDOWS_MAX, AUTO_WORKERS_MAX, CONFIG_MAX_BYTES
from ivoai.common.paths import XdgPaths, xdg_paths


class _Section(pydantic.BaseModel):
    # Unknown keys inside a known table are ignored by the projection and kept by the document.
    model_config = pydantic.ConfigDict(extra="ignore", strict=True, frozen=True)


class CompressionConfig(_Section):
    """`[compression]`: the requested provider and who chose it (seed 003)."""

    provider: Literal["caveman", "headroom", "direct"] | None = None
    source: Literal["default", "migration", "explicit"] | None = None


class AutoConfig(_Section):
    """`[auto]`: AUTO worker concurrency; auto-resume, conservation and coordinator (issue 16)."""

    workers: int | None = pydantic.Field(default=None, ge=1, le=AUTO_WORKERS_MAX)
    resume_after_reset: bool | None = None
    resume_windows: int | None = pydantic.Field(default=None, ge=1, le=AUTO_RESUME_WINDOWS_MAX)
    conserve_threshold: int | None = pydantic.Field(default=None, ge=1, le=100)
    coordinator: Literal["native", "ruflo"] | None = None


class ClientConfig(pydantic.BaseModel):
    """The typed projection of config.toml (only the keys ivoai knows; None = not set in the file)."""

    model_config = pydantic.ConfigDict(extra="ignore", strict=True, frozen=True, populate_by_name=True)

    schema_version: int = pydantic.Field(default=CONFIG_SCHEMA_VERSION, alias="schema")
    compression: CompressionConfig = CompressionConfig()
    auto: AutoConfig = AutoConfig()

    def value(self, key: str) -> Any:
        """The file's value for a dotted known key, or None when unset."""
        section, name = key.split(".", 1)
        return getattr(getattr(self, section), name)

    def effective(self, key: str) -> tuple[Any, str]:
        """(value, origin) for a known key: origin is `file` or `default`."""
        value = self.value(key)
        if value is None:
            return KNOWN_KEYS[key].default, "default"
        return value, "file"


@dataclass(frozen=True)
class LoadedConfig:
    """The parsed document (for style-preserving edits) and its typed projection."""

    document: TOMLDocument
    config: ClientConfig
    exists: bool


def _project(path: Path, data: dict[str, Any]) -> ClientConfig:
    check_schema(path, data.get("schema"))
    try:
        return ClientConfig.model_validate(data)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        # pydantic's message describes the expectation, not the input, so nothing secret is echoed.
        raise ConfigError(f"{path}: {loc}: {err['msg']}") from None


def _parse(paths: XdgPaths, raw: bytes | None, *, check_values: bool = True) -> LoadedConfig:
    path = paths.config_file
    if raw is None:
        return LoadedConfig(tomlkit.document(), ClientConfig(), exists=False)
    text = decode_config_bytes(path, raw)
    # tomllib first: its messages are uniform and it is the reader the launch path uses.
    data = parse_config_text(path, text, check_values=check_values)
    try:
        doc = tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        raise toml_error(path, "unsupported TOML", exc.line, exc.col) from None
    # Without the value check (a writer repairing a bad value) the projection is not built: the
    # writer validates its result instead.
    return LoadedConfig(doc, _project(path, data) if check_values else ClientConfig(), exists=True)


def _read_raw(paths: XdgPaths) -> bytes | None:
    return read_private_file_or_none(paths.config, paths.config_file, CONFIG_MAX_BYTES)


def load(paths: XdgPaths | None = None) -> LoadedConfig:
    """Read config.toml into a document plus typed projection (an empty one when absent).

    Raises:
        ConfigError: invalid TOML (file and line named) or an invalid known value (file and key named).
        ConfigSchemaError: the file has a newer schema than this ivoai knows.
        UnsafePathError: the file or the config directory is unsafe.
    """
    paths = paths or xdg_paths()
    return _parse(paths, _read_raw(paths))


def load_config(paths: XdgPaths | None = None) -> ClientConfig:
    """The typed projection of config.toml."""
    return load(paths).config


def _table(doc: TOMLDocument, name: str) -> Table:
    existing = doc.get(name)
    if existing is None:
        table = tomlkit.table()
        doc.add(name, table)
        return table
    if not isinstance(existing, Table):
        raise ConfigError(f"`{name}` in config.toml is not a table; fix it by hand")
    return existing


def set_document_value(doc: TOMLDocument, key: str, value: Any) -> None:
    """Set dotted `section.name` in a tomlkit document, creating the table if needed."""
    section, name = key.split(".", 1)
    _table(doc, section)[name] = value


def update_config(mutate: Callable[[TOMLDocument], None], paths: XdgPaths | None = None) -> ClientConfig:
    """Read-modify-write config.toml under its lock; the result is validated before it replaces the file.

    `mutate` edits the tomlkit document in place. Untouched bytes (comments, unknown tables and
    keys) survive exactly. Returns the new typed projection.

    Raises:
        ConfigError, ConfigSchemaError, UnsafePathError, LockTimeoutError.
    """
    paths = paths or xdg_paths()
    with file_lock(paths.config, paths.config / ".config.toml.lock"):
        # A bad value of a known key must not stop `config set` from repairing it; the result is checked.
        loaded = _parse(paths, _read_raw(paths), check_values=False)
        doc = loaded.document
        if "schema" not in doc:
            # An existing file without `schema` is a first-release file: it is schema 1 until
            # `ivoai update` migrates it; a file created now starts at the current schema.
            version = LEGACY_CONFIG_SCHEMA_VERSION if loaded.exists else CONFIG_SCHEMA_VERSION
            doc = _with_schema_first(doc, version)
        before = value_problems(doc.unwrap())
        mutate(doc)
        text = tomlkit.dumps(doc)
        data = parse_config_text(paths.config_file, text, check_values=False)
        # A write may not add a bad value; one already in the file (being repaired key by key) may stay.
        after = value_problems(data)
        added = [p for p in after if p not in before]
        if added:
            raise known_value_error(paths.config_file, added)
        new = _project(paths.config_file, without_keys(data, {key for key, _ in after}))
        remove_stale_staging(paths.config, paths.config_file)
        atomic_write(paths.config, paths.config_file, text.encode("utf-8"))
        return new


def _with_schema_first(doc: TOMLDocument, version: int) -> TOMLDocument:
    """A copy of `doc` with `schema = N` prepended; the original text follows unchanged."""
    body = tomlkit.dumps(doc)
    return tomlkit.parse(f"schema = {version}\n" + body)


def set_key(key: str, value: str, paths: XdgPaths | None = None) -> ClientConfig:
    """Validate and persist one user-settable key (`config set`).

    Setting `compression.provider` also records `compression.source = "explicit"` (seed 003).

    Raises:
        UnknownConfigKeyError: unknown or internal key (the message lists valid keys).
        UsageError: the value is not allowed for the key.
        ConfigError and the errors of `update_config`.
    """
    spec = key_spec(key)
    parsed = spec.parse(value)

    def mutate(doc: TOMLDocument) -> None:
        set_document_value(doc, key, parsed)
        if key == "compression.provider":
            set_document_value(doc, "compression.source", "explicit")

    return update_config(mutate, paths)


def describe_config(paths: XdgPaths | None = None) -> dict[str, Any]:
    """The stable `config show --json` document: every known key with value, origin and allowed values.

    Values of unknown keys are never shown (they might hold something sensitive); only their names.
    """
    paths = paths or xdg_paths()
    loaded = load(paths)
    values: dict[str, dict[str, Any]] = {}
    for key in sorted(KNOWN_KEYS):
        value, origin = loaded.config.effective(key)
        values[key] = {
            "value": value,
            "origin": origin,
            "allowed": KNOWN_KEYS[key].allowed(),
            "description": KNOWN_KEYS[key].description,
        }
    source = loaded.config.compression.source
    values["compression.source"] = {
        "value": source,
        "origin": "file" if source is not None else "unset",
        "allowed": "recorded by ivoai (default|migration|explicit)",
        "description": "Who chose compression.provider.",
    }
    known_sections = {k.split(".", 1)[0] for k in values}
    other: list[str] = []
    for name, item in loaded.document.unwrap().items():
        if name == "schema":
            continue
        if name in known_sections and isinstance(item, dict):
            other.extend(f"{name}.{sub}" for sub in item if f"{name}.{sub}" not in values)
        else:
            other.append(name)
    return {
        "schema": loaded.config.schema_version,
        "path": str(paths.config_file),
        "exists": loaded.exists,
        "values": values,
        "other_keys": sorted(other),
    }
