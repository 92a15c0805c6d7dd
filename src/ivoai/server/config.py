"""The server's one configuration root: `DATA/config.toml`, read once per entry point and handed down.

    [server]    network position of the gateway (`GatewaySettings`, `gateway/settings.py`)
    [context]   embedder and index backends (`ContextSettings`, `context/settings.py`)

`load_config` reads and parses the file once and validates both tables (pydantic): the CLI entry
points (`server start|status|init`, the local commands) and `create_app` call it; nothing below
them reads the file. Errors name the file, the key and the rule (`DIR/config.toml: server.listen:
expected HOST:PORT ...`). Unknown `[server]` keys are ignored (as they always were); unknown
`[context]` keys are refused (a typo there silently changes a backend). No secret value is ever
stored here, only paths of 0600 files. `write_default_config` and `update_config` are the only
writers (`ivoai server init`, `--mode`); they keep every other table, key and comment.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import tomlkit
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from ivoai.common.errors import ValidationError
from ivoai.common.fsio import atomic_write, read_private_file_or_none
from ivoai.common.limits import (
    CONFIG_MAX_BYTES,
    GATEWAY_DEFAULT_LISTEN,
    REINGEST_INTERVAL_DEFAULT_SECONDS,
)
from ivoai.server.context.errors import SettingsError
from ivoai.server.context.settings import ContextSettings
from ivoai.server.datadir import ServerDataDir
from ivoai.server.gateway.settings import (
    GatewaySettings,
    normalize_public_url,
    parse_listen,
    parse_proxies,
)

_Model = TypeVar("_Model", bound=BaseModel)


class ServerTable(BaseModel):
    """The `[server]` table as written in the file (strings before the transport policy parses them)."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    listen: str = GATEWAY_DEFAULT_LISTEN
    public_url: str = ""
    trusted_proxies: list[str] = Field(default_factory=list)
    tls_cert: str = ""
    tls_key: str = ""
    allowed_origins: list[str] = Field(default_factory=list)
    reingest_interval_seconds: int = REINGEST_INTERVAL_DEFAULT_SECONDS

    def gateway(self, where: str) -> GatewaySettings:
        """The parsed settings; `where` (`FILE: server`) prefixes every error.

        Raises:
            ValidationError: a malformed address, origin or network.
        """
        host, port = parse_listen(self.listen, f"{where}.listen")
        return GatewaySettings(
            listen_host=host,
            listen_port=port,
            public_url=normalize_public_url(self.public_url, f"{where}.public_url")
            if self.public_url
            else "",
            trusted_proxies=parse_proxies(self.trusted_proxies, f"{where}.trusted_proxies"),
            tls_cert=Path(self.tls_cert) if self.tls_cert else None,
            tls_key=Path(self.tls_key) if self.tls_key else None,
            reingest_interval_seconds=self.reingest_interval_seconds,
            allowed_origins=tuple(
                normalize_public_url(o, f"{where}.allowed_origins") for o in self.allowed_origins
            ),
        )


@dataclass(frozen=True)
class ServerConfig:
    """Everything `config.toml` says, validated: the gateway's and the context service's settings."""

    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    context: ContextSettings = field(default_factory=ContextSettings)


def load_config(data_dir: ServerDataDir) -> ServerConfig:
    """Read and validate `config.toml` (defaults when the file, a table or a key is missing).

    Raises:
        ValidationError: the file is not TOML, or a `[server]` value has the wrong type or shape.
        SettingsError: a `[context]` value is invalid or unknown (a ValidationError too).
    """
    raw = read_private_file_or_none(data_dir.root, data_dir.config_file, CONFIG_MAX_BYTES)
    if raw is None:
        return ServerConfig()
    path = data_dir.config_file
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValidationError(f"{path}: not valid TOML ({exc})") from None
    server = _validated(ServerTable, _table(doc, "server", path), f"{path}: server", ValidationError)
    context = _validated(ContextSettings, _table(doc, "context", path), f"{path}: context", SettingsError)
    return ServerConfig(gateway=server.gateway(f"{path}: server"), context=context)


def _table(doc: dict[str, Any], name: str, path: Path) -> dict[str, Any]:
    table = doc.get(name, {})
    if not isinstance(table, dict):
        raise ValidationError(f"{path}: [{name}] must be a table")
    return table


def _validated(
    model: type[_Model], table: dict[str, Any], where: str, error: type[ValidationError]
) -> _Model:
    """`model` from `table`; the first problem becomes `error("FILE: table.key: what is wrong")`."""
    try:
        return model.model_validate(table)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise error(f"{where}.{key}: {first['msg']}" if key else f"{where}: {first['msg']}") from None


DEFAULT_CONFIG = f"""\
# ivoai server configuration (non-secret settings only; secrets live in secrets/).
[server]
listen = "{GATEWAY_DEFAULT_LISTEN}"
# Canonical public origin (https://ai.example.com). Empty: derived from `listen`.
public_url = ""
# CIDRs of TLS-terminating reverse proxies allowed to send X-Forwarded-Proto: https.
trusted_proxies = []
# Direct TLS (required for a non-loopback listener without a trusted proxy).
tls_cert = ""
tls_key = ""
# Extra browser origins allowed to call the MCP endpoints (the public origin always is).
allowed_origins = []
# Periodic re-ingestion of every connector while the server runs.
reingest_interval_seconds = {REINGEST_INTERVAL_DEFAULT_SECONDS}

# Context service (see docs/context.md). Embedded mode: the bundled e5 model in process and a Qdrant
# Edge shard in DIR/index. Services mode: Text Embeddings Inference and a Qdrant server on loopback.
[context]
embedder = "builtin"
index = "edge"
"""

MODES: dict[str, dict[str, str]] = {
    "embedded": {"embedder": "builtin", "index": "edge"},
    "services": {
        "embedder": "tei",
        "tei_url": "http://127.0.0.1:8080",
        "index": "qdrant",
        "qdrant_url": "http://127.0.0.1:6333",
    },
}


def write_default_config(data_dir: ServerDataDir) -> bool:
    """Write `config.toml` with defaults unless it exists; True when written."""
    if read_private_file_or_none(data_dir.root, data_dir.config_file, CONFIG_MAX_BYTES) is not None:
        return False
    atomic_write(data_dir.root, data_dir.config_file, DEFAULT_CONFIG.encode("utf-8"))
    return True


def update_config(data_dir: ServerDataDir, values: dict[str, Any], *, table_name: str = "server") -> None:
    """Set keys of one table (default `[server]`), preserving every other table, key and comment."""
    raw = read_private_file_or_none(data_dir.root, data_dir.config_file, CONFIG_MAX_BYTES)
    doc = tomlkit.parse(raw.decode("utf-8") if raw is not None else DEFAULT_CONFIG)
    table = doc.get(table_name)
    if table is None:
        table = tomlkit.table()
        doc[table_name] = table
    for key, value in values.items():
        table[key] = value
    atomic_write(data_dir.root, data_dir.config_file, tomlkit.dumps(doc).encode("utf-8"))
