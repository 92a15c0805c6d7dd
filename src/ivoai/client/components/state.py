"""`$XDG_STATE_HOME/ivoai/components.json`: which pinned component is installed and how it is launched.

Schema 1::

    {"schema": 1, "components": {"codex": {
        "version": "0.171.0", "digest": "<pin digest>", "generation": "0.171.0-<12 hex>",
        "kind": "npm", "installed_at": "2026-...Z", "node": "/usr/bin/node" | null,
        "launchers": {"codex": "<SHA-256 of the launcher file>"}}}}

Writers hold `state/.components.lock` (see `components_lock`), which also serializes setup, update,
rollback and uninstall against each other.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ivoai.client.components.errors import ComponentError
from ivoai.client.config.errors import ConfigSchemaError
from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import atomic_write, file_lock, read_private_file_or_none, remove_stale_staging
from ivoai.common.jsonio import dumps_bytes
from ivoai.common.limits import COMPONENT_STATE_MAX_BYTES
from ivoai.common.paths import XdgPaths

COMPONENTS_SCHEMA_VERSION = 1
COMPONENTS_LOCK_TIMEOUT_SECONDS = 30.0  # another setup/update may be finishing an install step


def components_file(paths: XdgPaths) -> Path:
    return paths.state / "components.json"


def components_dir(paths: XdgPaths) -> Path:
    return paths.data / "components"


def bin_dir(paths: XdgPaths) -> Path:
    return paths.data / "bin"


@contextmanager
def components_lock(paths: XdgPaths) -> Iterator[None]:
    """Serialize setup, update, rollback and uninstall (one at a time per user)."""
    with file_lock(paths.state, paths.state / ".components.lock", timeout=COMPONENTS_LOCK_TIMEOUT_SECONDS):
        yield


@dataclass
class Installed:
    """One installed component."""

    version: str
    digest: str
    generation: str
    kind: str
    installed_at: str
    node: str | None = None
    launchers: dict[str, str] = field(default_factory=dict)


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def json_object(raw: bytes, where: Path, error: type[IvoaiError], invalid: str) -> dict[str, Any]:
    """`raw` parsed as a JSON object; else `error` with the `invalid` message (not JSON) or naming `where`."""
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise error(invalid) from None
    if not isinstance(doc, dict):
        raise error(f"{where}: expected a JSON object")
    return doc


def read_state(paths: XdgPaths) -> dict[str, Installed]:
    """The installed components ({} when nothing was installed).

    Raises:
        ComponentError: the file is malformed. ConfigSchemaError: written by a newer ivoai.
    """
    path = components_file(paths)
    raw = read_private_file_or_none(paths.state, path, COMPONENT_STATE_MAX_BYTES)
    if raw is None:
        return {}
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ComponentError(
            f"{path} is not valid JSON; `ivoai setup` rewrites it after you remove it"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("components"), dict):
        raise ComponentError(f"{path}: expected {{schema, components}}")
    schema = doc.get("schema")
    if isinstance(schema, int) and schema > COMPONENTS_SCHEMA_VERSION:
        raise ConfigSchemaError(
            f"{path} has schema {schema}, newer than this ivoai understands ({COMPONENTS_SCHEMA_VERSION}); "
            "upgrade ivoai (the file was not changed)"
        )
    out: dict[str, Installed] = {}
    for name, entry in doc["components"].items():
        try:
            out[str(name)] = Installed(
                version=str(entry["version"]),
                digest=str(entry["digest"]),
                generation=str(entry["generation"]),
                kind=str(entry["kind"]),
                installed_at=str(entry.get("installed_at", "")),
                node=entry.get("node") if isinstance(entry.get("node"), str) else None,
                launchers={str(k): str(v) for k, v in dict(entry.get("launchers", {})).items()},
            )
        except (KeyError, TypeError, ValueError):
            raise ComponentError(f"{path}: entry {name!r} is malformed") from None
    return out


def write_state(paths: XdgPaths, components: dict[str, Installed]) -> None:
    """Publish the installed components atomically (caller holds `components_lock`)."""
    path = components_file(paths)
    if path.parent.exists():
        remove_stale_staging(paths.state, path)
    doc = {
        "schema": COMPONENTS_SCHEMA_VERSION,
        "components": {name: asdict(components[name]) for name in sorted(components)},
    }
    atomic_write(paths.state, path, dumps_bytes(doc))
