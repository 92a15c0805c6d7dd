"""The ordered, reversible migration registry for ivoai's own persisted schemas.

Each persisted store has a current schema version; each `Migration` moves one store's file from
version N-1 to N (`up`) and back (`down`). Both are pure `bytes -> bytes` functions of one file, so
they can be tested without I/O and applied under the update journal (which snapshots the files
first). `up` keeps every byte it does not need to change (TOML through tomlkit: comments, unknown
tables and keys stay as written). `down` is *semantically* exact: `down(up(x))` reads the same as
`x` to the older ivoai; byte-exact restoration is the job of the update snapshots.

| store      | file(s)                              | current |
|------------|--------------------------------------|---------|
| config     | config.toml                          | 2       |
| secrets    | secrets.json                         | 1       |
| ownership  | ownership.json                       | 2       |
| sessions   | sessions/ses_*.json (one per record) | 1       |
| components | components.json                      | 1       |
| quota      | quota.json (not written yet)         | 1       |

Adding a migration: append a `Migration(store, version, name, up, down)` to MIGRATIONS, raise the
store's `current`, and add a test with the old file's bytes. A file with a version above `current`
is left alone (the reader fails closed: "upgrade ivoai").
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ivoai.client.config.errors import ConfigError
from ivoai.common.errors import IvoaiError
from ivoai.common.jsonio import dumps_bytes
from ivoai.common.paths import XdgPaths
from ivoai.common.validate import is_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tomlkit import TOMLDocument


class MigrationStepError(IvoaiError):
    """One migration step could not transform a file (the update rolls everything back)."""

    code = "migration_failed"


@dataclass(frozen=True)
class Store:
    """One persisted schema: where its files are, how to read their version, its current version."""

    name: str
    root: str  # config | state (the ivoai root the files live in)
    current: int
    pattern: str  # a file name relative to the root, or a glob like "sessions/ses_*.json"
    format: str  # toml | json

    def files(self, paths: XdgPaths) -> list[Path]:
        base = paths.config if self.root == "config" else paths.state
        if "*" in self.pattern:
            return sorted(p for p in base.glob(self.pattern) if p.is_file() and not p.is_symlink())
        path = base / self.pattern
        return [path] if path.is_file() and not path.is_symlink() else []

    def version_of(self, raw: bytes) -> int:
        """The schema version a file declares (1 when it declares none: the first release's files)."""
        try:
            if self.format == "toml":
                doc: Any = tomllib.loads(raw.decode("utf-8"))
            else:
                doc = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as exc:
            raise MigrationStepError(
                f"{self.name}: cannot read the schema version ({type(exc).__name__})"
            ) from None
        value = doc.get("schema", 1) if isinstance(doc, dict) else 1
        if not is_int(value, 1):
            raise MigrationStepError(f"{self.name}: `schema` is not a positive integer")
        return value


@dataclass(frozen=True)
class Migration:
    """`up` moves a file of `store` from version-1 to version; `down` moves it back."""

    store: str
    version: int
    name: str
    up: Callable[[bytes], bytes]
    down: Callable[[bytes], bytes]


# --- config 1 -> 2: record who chose compression.provider (seed 003, "Configuração e migração") ---


def _toml(raw: bytes) -> TOMLDocument:
    import tomlkit

    try:
        return tomlkit.parse(raw.decode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - tomlkit raises several unrelated types
        raise MigrationStepError(f"config.toml does not parse ({type(exc).__name__})") from None


def _set_schema(doc: TOMLDocument, version: int) -> TOMLDocument:
    import tomlkit

    if "schema" in doc:
        doc["schema"] = version
        return doc
    return tomlkit.parse(f"schema = {version}\n" + tomlkit.dumps(doc))


def config_up_2(raw: bytes) -> bytes:
    """Normalize a legacy config: the implicit provider becomes `caveman` recorded as `migration`; a
    provider without a source (v0.6.0's `headroom`) is kept and recorded as `migration`; an explicit
    choice is never replaced. Everything else stays byte for byte."""
    import tomlkit
    from tomlkit.items import Table

    from ivoai.client.compression.settings import normalize

    doc = _toml(raw)
    try:
        changes = normalize(doc.unwrap(), legacy=True)
    except IvoaiError as exc:
        raise MigrationStepError(exc.message) from None
    if changes:
        table = doc.get("compression")
        if table is None:
            table = tomlkit.table()
            doc.add("compression", table)
        if not isinstance(table, Table):
            raise ConfigError("config.toml: `compression` must be a table")
        for key, value in changes.items():
            table[key.split(".", 1)[1]] = value
    return tomlkit.dumps(_set_schema(doc, 2)).encode("utf-8")


def config_down_2(raw: bytes) -> bytes:
    """Back to schema 1: drop the `compression.source = "migration"` that up recorded (a v1 reader
    resolves a provider without a source as `migration` anyway)."""
    import tomlkit
    from tomlkit.items import Table

    doc = _toml(raw)
    table = doc.get("compression")
    if isinstance(table, Table) and table.get("source") == "migration":
        del table["source"]
    return tomlkit.dumps(_set_schema(doc, 1)).encode("utf-8")


# --- ownership 1 -> 2: entry kinds and owners (other subsystems record config entries and files) ---


def _json(raw: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise MigrationStepError(f"{what} is not valid JSON") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
        raise MigrationStepError(f"{what}: expected {{schema, entries}}")
    return doc


def ownership_up_2(raw: bytes) -> bytes:
    """Every schema-1 entry is a component path recorded by the components subsystem."""
    doc = _json(raw, "ownership.json")
    entries = []
    for entry in doc["entries"]:
        if not isinstance(entry, dict):
            raise MigrationStepError("ownership.json: an entry is not an object")
        entries.append(
            {**entry, "kind": entry.get("kind", "executable"), "owner": entry.get("owner", "components")}
        )
    return dumps_bytes({**doc, "schema": 2, "entries": entries})


def ownership_down_2(raw: bytes) -> bytes:
    """Schema 1 can only hold executables; anything else would be forgotten, so it is refused."""
    doc = _json(raw, "ownership.json")
    entries = []
    for entry in doc["entries"]:
        if not isinstance(entry, dict) or entry.get("kind", "executable") != "executable":
            raise MigrationStepError(
                "ownership.json holds entries schema 1 cannot express (directories, files, config entries)"
            )
        entries.append({k: v for k, v in entry.items() if k not in ("kind", "owner")})
    return dumps_bytes({**doc, "schema": 1, "entries": entries})


STORES: tuple[Store, ...] = (
    Store("config", "config", 2, "config.toml", "toml"),
    Store("secrets", "config", 1, "secrets.json", "json"),
    Store("ownership", "state", 2, "ownership.json", "json"),
    Store("sessions", "state", 1, "sessions/ses_*.json", "json"),
    Store("components", "state", 1, "components.json", "json"),
    Store("quota", "state", 1, "quota.json", "json"),
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration("config", 2, "record-compression-source", config_up_2, config_down_2),
    Migration("ownership", 2, "ownership-entry-kinds", ownership_up_2, ownership_down_2),
)


@dataclass(frozen=True)
class Registry:
    """Stores and their migrations (tests build registries with extra, failing steps)."""

    stores: tuple[Store, ...] = STORES
    migrations: tuple[Migration, ...] = MIGRATIONS

    def store(self, name: str) -> Store:
        return next(s for s in self.stores if s.name == name)

    def chain(self, store: str, start: int, end: int) -> list[Migration]:
        """The steps from `start` to `end` (up when end > start, down otherwise), in order.

        Raises:
            MigrationStepError: a step in between is missing from the registry.
        """
        steps = {m.version: m for m in self.migrations if m.store == store}
        wanted = list(range(start + 1, end + 1)) if end >= start else list(range(start, end, -1))
        missing = [v for v in wanted if v not in steps]
        if missing:
            raise MigrationStepError(f"{store}: no migration to schema {missing[0]}")
        return [steps[v] for v in wanted]

    def migrate(self, store: str, raw: bytes, start: int, end: int) -> bytes:
        """Apply the chain to one file's bytes."""
        for step in self.chain(store, start, end):
            raw = step.up(raw) if end >= start else step.down(raw)
        return raw

    def pending(self, paths: XdgPaths) -> list[tuple[Store, Path, int]]:
        """(store, file, its version) for every file older than its store's current version."""
        out: list[tuple[Store, Path, int]] = []
        for store in self.stores:
            for path in store.files(paths):
                try:
                    raw = path.read_bytes()
                except OSError:
                    continue
                version = store.version_of(raw)
                if version < store.current:
                    out.append((store, path, version))
        return out


DEFAULT_REGISTRY = Registry()
