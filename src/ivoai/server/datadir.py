"""The server data directory: one root (0700) holding every server store.

Layout (an unprivileged `--data-dir`, mirroring the seed's /etc/ivoai + /var/lib/ivoai split):

    DIR/config.toml          non-secret server settings
    DIR/secrets/             0700; secret files (API key files, TLS copies)
    DIR/context/             catalog (SQLite), normalized corpus, ingestion state  (authoritative)
    DIR/index/               vector index (Qdrant Edge shard)                     (rebuildable cache)
    DIR/memory/              memory database                                      (authoritative)
    DIR/enrollment/          hashed enrollment codes and client credentials
    DIR/oauth/               hashed OAuth activation codes, codes and tokens
    DIR/run/                 locks and other ephemeral state
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ivoai.common.fsio import ensure_private_dir

SUBDIRS = ("secrets", "context", "index", "memory", "enrollment", "oauth", "run")


@dataclass(frozen=True)
class ServerDataDir:
    root: Path

    @property
    def config_file(self) -> Path:
        return self.root / "config.toml"

    @property
    def secrets(self) -> Path:
        return self.root / "secrets"

    @property
    def context(self) -> Path:
        return self.root / "context"

    @property
    def index(self) -> Path:
        return self.root / "index"

    @property
    def memory(self) -> Path:
        return self.root / "memory"

    @property
    def enrollment(self) -> Path:
        return self.root / "enrollment"

    @property
    def oauth(self) -> Path:
        return self.root / "oauth"

    @property
    def run(self) -> Path:
        return self.root / "run"

    def ensure(self) -> ServerDataDir:
        """Create the root and every sub-directory with mode 0700 (verifying existing ones)."""
        ensure_private_dir(self.root)
        for name in SUBDIRS:
            ensure_private_dir(self.root, self.root / name)
        return self
