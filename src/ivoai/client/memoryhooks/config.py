"""`$XDG_CONFIG_HOME/ivoai/memoryhooks.json`: where hook events go when several memory sources exist.

Sessions route their hooks to the session's own memory source; this choice applies to events captured
outside ivoai sessions (the managed installation). No secret is stored here.
"""

from __future__ import annotations

from ivoai.client.memoryhooks.locations import CONFIG_FILE
from ivoai.common.errors import ValidationError
from ivoai.common.fsio import atomic_write
from ivoai.common.jsonio import dumps_bytes
from ivoai.common.paths import XdgPaths, xdg_paths


def get_destination(paths: XdgPaths | None = None) -> str | None:
    from ivoai.client.memoryhooks.flusher import configured_destination

    return configured_destination(paths or xdg_paths())


def set_destination(source: str | None, paths: XdgPaths | None = None) -> None:
    """Choose (or with None, forget) the hook destination.

    Raises:
        ValidationError: `source` is not an enabled memory source (the message lists them).
    """
    from ivoai.client.connections.registry import ConnectionRegistry
    from ivoai.client.knowledge.profiles import build_sources

    paths = paths or xdg_paths()
    if source is not None:
        sources = [s for s in build_sources(ConnectionRegistry(paths).load().servers) if "memory" in s.kinds]
        if not any(source in s.names() for s in sources):
            known = ", ".join(s.id for s in sources) or "none"
            raise ValidationError(f"{source!r} is not an enabled memory source (memory sources: {known})")
    atomic_write(paths.config, paths.config / CONFIG_FILE, dumps_bytes({"schema": 1, "destination": source}))
