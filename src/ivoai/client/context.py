"""The client context of one CLI invocation: ivoai's roots, plus its config and secrets on first use.

Built once per invocation (`ivoai.cli._context.client_context`) and handed to the client functions a
command calls, instead of each command resolving `xdg_paths()` again. The roots are read from the
environment when the context is built; the config (a snapshot of config.toml, validated) and the
secrets store are opened only when a command asks for them, so a command that needs neither pays
for neither (pydantic and tomlkit stay unloaded).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from ivoai.common.paths import XdgPaths, xdg_paths

if TYPE_CHECKING:
    from ivoai.client.config.secrets import SecretsStore
    from ivoai.client.config.store import ClientConfig


@dataclass(frozen=True)
class ClientContext:
    """What one invocation works on; immutable apart from the two values read on first use."""

    paths: XdgPaths

    @classmethod
    def from_environment(cls) -> ClientContext:
        """The context for the current `XDG_*_HOME` / `HOME` values."""
        return cls(paths=xdg_paths())

    @cached_property
    def config(self) -> ClientConfig:
        """config.toml's typed projection, read once (defaults when the file does not exist).

        Raises:
            ConfigError, ConfigSchemaError, UnsafePathError: see `config.store.load`.
        """
        from ivoai.client.config.store import load_config

        return load_config(self.paths)

    @cached_property
    def secrets(self) -> SecretsStore:
        """The private secrets store below the config root (opened lazily, never listed here)."""
        from ivoai.client.config.secrets import SecretsStore

        return SecretsStore(self.paths)
