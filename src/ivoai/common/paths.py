"""XDG base directories for ivoai, honouring `XDG_*_HOME` (read once per call, never cached).

The rule itself is `lightio.xdg_root` (strings, for the import-light launch path); this module
gives the same roots as `Path`s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ivoai.common.lightio import APP, xdg_root

__all__ = ["APP", "XdgPaths", "xdg_paths"]


@dataclass(frozen=True)
class XdgPaths:
    """ivoai's own roots; each is a directory ivoai owns and keeps at mode 0700."""

    config: Path
    data: Path
    state: Path
    cache: Path

    @property
    def config_file(self) -> Path:
        return self.config / "config.toml"

    @property
    def secrets_file(self) -> Path:
        return self.config / "secrets.json"

    @property
    def ownership_manifest(self) -> Path:
        return self.state / "ownership.json"

    @property
    def sessions_dir(self) -> Path:
        return self.state / "sessions"

    @property
    def working_context_dir(self) -> Path:
        return self.cache / "working-context"

    @property
    def server_data_dir(self) -> Path:
        return self.data / "server"

    def roots(self) -> dict[str, Path]:
        return {"config": self.config, "data": self.data, "state": self.state, "cache": self.cache}


def xdg_paths() -> XdgPaths:
    """Resolve ivoai's roots from the environment now."""
    return XdgPaths(
        config=Path(xdg_root("XDG_CONFIG_HOME", ".config")),
        data=Path(xdg_root("XDG_DATA_HOME", ".local/share")),
        state=Path(xdg_root("XDG_STATE_HOME", ".local/state")),
        cache=Path(xdg_root("XDG_CACHE_HOME", ".cache")),
    )
