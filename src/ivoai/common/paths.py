"""XDG base directories for ivoai, honouring `XDG_*_HOME` (read once per call, never cached)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

APP = "ivoai"


def _base(var: str, default: str) -> Path:
    value = os.environ.get(var, "")
    # The XDG spec says relative values are invalid and must be ignored.
    if value and os.path.isabs(value):
        return Path(value)
    return Path.home() / default


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
        config=_base("XDG_CONFIG_HOME", ".config") / APP,
        data=_base("XDG_DATA_HOME", ".local/share") / APP,
        state=_base("XDG_STATE_HOME", ".local/state") / APP,
        cache=_base("XDG_CACHE_HOME", ".cache") / APP,
    )
