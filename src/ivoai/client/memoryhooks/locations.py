"""Where the memory hooks keep their files (import-light: `os` only).

- `$XDG_STATE_HOME/ivoai/memoryhooks/` (0700): `state.json` (flusher bookkeeping), `flush.lock`,
  and `spool/` (0700: `active.ndjson`, sealed `seg-*.ndjson` segments, `evicted.json`, 0600 each);
- `$XDG_CONFIG_HOME/ivoai/memoryhooks.json`: the chosen hook destination when several memory sources
  are enrolled (no secret);
- `$XDG_DATA_HOME/ivoai/bin/ivoai-memory-hook`: the managed wrapper every hook definition runs. Its
  path never changes, so the hosts' hook definitions stay byte-identical when ivoai moves (Codex keys
  its hook trust to the definition); only the wrapper is rewritten.
"""

from __future__ import annotations

import os

from ivoai.client.agents.executors import managed_bin_dir
from ivoai.common.lightio import xdg_root

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

HOOKS_DIR = "memoryhooks"
SPOOL_DIR = "spool"
STATE_FILE = "state.json"
FLUSH_LOCK = "flush.lock"
CONFIG_FILE = "memoryhooks.json"
WRAPPER_NAME = "ivoai-memory-hook"
REGISTRY_FILE = "connections.json"  # ivoai.client.connections.files.REGISTRY_FILE, without its imports


def state_root(env: Mapping[str, str] | None = None) -> str:
    """`$XDG_STATE_HOME/ivoai`."""
    return xdg_root("XDG_STATE_HOME", ".local/state", env)


def config_root(env: Mapping[str, str] | None = None) -> str:
    """`$XDG_CONFIG_HOME/ivoai`."""
    return xdg_root("XDG_CONFIG_HOME", ".config", env)


def hooks_dir(env: Mapping[str, str] | None = None) -> str:
    return os.path.join(state_root(env), HOOKS_DIR)


def spool_dir(env: Mapping[str, str] | None = None) -> str:
    return os.path.join(hooks_dir(env), SPOOL_DIR)


def wrapper_path(env: Mapping[str, str] | None = None) -> str:
    """The managed hook wrapper's absolute path (stable: it is what host hook definitions name)."""
    return os.path.join(managed_bin_dir(env), WRAPPER_NAME)
