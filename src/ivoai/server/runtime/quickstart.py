"""`ivoai quickstart [PATH]`: the main job on embedded defaults, end to end, in one command.

1. initialize a server data directory (`init_server`);
2. add PATH (default: the current git checkout) as a `git` connector (`filesystem` when PATH is not
   a checkout), reusing an existing connector for the same path;
3. ingest it, phase 1 only (lexical: every document searchable in seconds), with progress;
4. start the gateway on loopback (127.0.0.1:7744, or a free port when that one is taken); while it
   serves, it embeds the chunks in the background (phase 2, low priority) and search becomes hybrid
   chunk by chunk;
5. enroll a demonstration client through `POST /v1/enroll` (revoked again at the end);
6. run a real `context_search` through `/v1/mcp/context` with the MCP SDK client, at once;
7. return the results and the next steps; the caller decides whether to keep serving.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2

from ivoai.common.command import ivoai_command
from ivoai.common.errors import IvoaiError, UsageError
from ivoai.common.limits import GATEWAY_DEFAULT_PORT
from ivoai.server.config import load_config
from ivoai.server.context.embeddings import Embedder
from ivoai.server.context.ingest import IngestProgress
from ivoai.server.context.service import ContextService
from ivoai.server.datadir import ServerDataDir
from ivoai.server.gateway.services import ServiceHub
from ivoai.server.gateway.settings import GatewaySettings
from ivoai.server.runtime.lifecycle import init_server
from ivoai.server.runtime.runner import BindError, RunningServer, start_background

DEFAULT_QUERY = "what does this project do and how do I run it"
GIT_TIMEOUT_SECONDS = 15.0
SNIPPET_CHARS = 240
SEARCH_LIMIT = 5

Announce = Callable[[str], None]


@dataclass
class QuickstartResult:
    """What the quickstart did, for rendering (`--json` prints it)."""

    data_dir: str
    source: str
    connector: str
    connector_type: str
    ingest: dict[str, Any]
    url: str
    query: str
    results: list[dict[str, Any]] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    coverage: dict[str, Any] = field(default_factory=dict)


def git_toplevel(start: Path) -> Path | None:
    """The root of the git checkout containing `start`, or None (hooks and fsmonitor disabled)."""
    try:
        out = subprocess.run(
            [
                "git",
                "-c",
                "core.fsmonitor=false",
                "-c",
                "core.hooksPath=/dev/null",
                "rev-parse",
                "--show-toplevel",
            ],
            cwd=start,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None


def resolve_source(path: Path | None) -> tuple[Path, str]:
    """(absolute root, connector type) for PATH or the current checkout.

    Raises:
        UsageError: no PATH and the current directory is not in a git checkout, or PATH is missing.
    """
    if path is None:
        top = git_toplevel(Path.cwd())
        if top is None:
            raise UsageError(
                "not inside a git checkout: give the directory to index, e.g. ivoai quickstart ~/src/app"
            )
        return top, "git"
    root = path.expanduser().absolute()
    if not root.is_dir():
        raise UsageError(f"PATH {path} is not a directory")
    top = git_toplevel(root)
    return (root, "git") if top is not None and top.resolve() == root.resolve() else (root, "filesystem")


def connector_name(root: Path) -> str:
    """A valid connector name from the directory name (a-z, 0-9, '-', '_'; at most 40 characters)."""
    name = re.sub(r"[^a-z0-9_-]+", "-", root.name.lower()).strip("-_") or "source"
    return name[:40]


def ensure_connector(svc: ContextService, root: Path, type_: str) -> str:
    """The connector for `root`: an existing one with the same path, or a new one with a free name."""
    real = os.path.realpath(root)
    existing = svc.list_connectors()
    for c in existing:
        if c.path == real:
            return c.name
    taken = {c.name for c in existing}
    base = connector_name(root)
    name, n = base, 2
    while name in taken:
        name, n = f"{base[:36]}-{n}", n + 1
    svc.add_connector(name, type_, real)
    return name


def _start(data: ServerDataDir, hub: ServiceHub, port: int, announce: Announce, serve: bool) -> RunningServer:
    try:
        return start_background(data, GatewaySettings(listen_port=port), hub=hub, reingest=serve)
    except BindError:
        if port == 0:
            raise
        announce(f"port {port} is taken; using a free loopback port instead")
        return start_background(data, GatewaySettings(listen_port=0), hub=hub, reingest=serve)


async def _search(url: str, credential: str, query: str) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {credential}"}) as http,
        streamable_http_client(f"{url}/v1/mcp/context", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool("context_search", {"query": query, "limit": SEARCH_LIMIT})
    if result.is_error or result.structured_content is None:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        raise IvoaiError(f"context_search failed: {text}", code="search_failed")
    found: dict[str, Any] = result.structured_content
    return found


def run_quickstart(
    path: Path | None,
    data_root: Path,
    *,
    query: str = DEFAULT_QUERY,
    port: int = GATEWAY_DEFAULT_PORT,
    embedder: Embedder | None = None,
    progress: Callable[[IngestProgress], None] | None = None,
    announce: Announce,
    serve: bool = True,
) -> tuple[QuickstartResult, RunningServer]:
    """Steps 1-7 of the module doc; the returned server is running (the caller stops it).

    `serve=False` (the caller stops the server after the search): no background embedding is
    started; the next steps say how to embed.

    Raises:
        UsageError: bad PATH. IvoaiError: a step failed (the message names it).
    """
    root, type_ = resolve_source(path)
    init_server(data_root)
    data = ServerDataDir(data_root).ensure()
    svc = ContextService.open(data, load_config(data).context, embedder=embedder)
    try:
        name = ensure_connector(svc, root, type_)
        announce(f"indexing {root} as connector {name!r} ({type_}): searchable by words first, then embedded")
        report = svc.ingest(name, progress=progress, embed=False)
        hub = ServiceHub(data, context=svc, embedder=svc.embedder, close_given=True)
        server = _start(data, hub, port, announce, serve)
    except BaseException:
        svc.close()
        raise
    try:
        store = server.app.enrollment
        code = store.create_code(ttl_seconds=120, scopes=["context:read"])
        response = httpx2.post(f"{server.url}/v1/enroll", json={"code": code.code}, timeout=30)
        if response.status_code != 200:
            raise IvoaiError(
                f"enrollment through /v1/enroll failed: HTTP {response.status_code}", code="enroll_failed"
            )
        enrolled = response.json()
        try:
            found = anyio.run(_search, server.url, enrolled["credential"], query)
        finally:
            store.revoke_client(
                enrolled["client_id"]
            )  # the demonstration credential does not outlive the run
    except BaseException:
        server.stop()
        raise
    results = [
        {
            "path": r["path"],
            "connector": r["connector"],
            "score": round(float(r["score"]), 4),
            "snippet": " ".join(str(r["text"]).split())[:SNIPPET_CHARS],
            "document_id": r["document_id"],
        }
        for r in found.get("results", [])
    ]
    ivoai = ivoai_command()  # the program as it runs from a fresh shell (bare `ivoai` only when on PATH)
    dd = f"--data-dir {shlex.quote(str(data.root))}"
    coverage = svc.coverage()
    if coverage.pending_chunks == 0:
        embedding = []
    elif serve:
        embedding = [
            f"the server embeds the other {coverage.pending_chunks} chunks in the background as it serves; "
            f"searches match them by their words meanwhile (progress: {ivoai} server {dd} context status)"
        ]
    else:
        embedding = [
            f"embed the {coverage.pending_chunks} chunks matched by their words only so far: "
            f"{ivoai} server {dd} ingest   (or run the server: it embeds in the background)"
        ]
    result = QuickstartResult(
        data_dir=str(data.root),
        source=str(root),
        connector=name,
        connector_type=type_,
        ingest=report.model_dump(mode="json"),
        url=server.url,
        query=query,
        results=results,
        coverage=coverage.model_dump(mode="json"),
        next_steps=[
            *embedding,
            f"enroll a client: {ivoai} server {dd} enrollment create   (then on the client: "
            f"{ivoai} connect server add NAME --url {server.url} --code-stdin)",
            f"connect ChatGPT or Claude on the web: {ivoai} server {dd} web-access create, then add "
            f"{server.url}/mcp as a connector "
            f"(needs a public https:// URL: {ivoai} server start --public-url)",
            f"search again: {ivoai} server {dd} context search 'your question'",
            f"run the server later: {ivoai} server {dd} start",
        ],
    )
    return result, server


class EmbeddingWatch:
    """Lines for the serving quickstart about background embedding: progress now and then (only when
    it changed), and one line when every chunk is embedded. Progress counts the chunks that get a
    vector: lexical-only ones (lockfiles, generated, minified text) are never embedded."""

    def __init__(self, svc: ContextService) -> None:
        self.svc = svc
        self.finished = svc.coverage().pending_chunks == 0
        self.last: str | None = None

    def poll(self) -> str | None:
        """A line to print now, or None."""
        if self.finished:
            return None
        try:
            cov = self.svc.coverage()
        except IvoaiError:
            return None
        if cov.pending_chunks == 0:
            self.finished = True
            return f"all {cov.embedded_chunks} chunks are embedded: search is fully hybrid now"
        eta = cov.estimated_seconds_left
        left = f", about {int(eta // 60)}m{int(eta % 60):02d}s left" if eta is not None else ""
        to_embed = cov.total_chunks - cov.lexical_only_chunks
        progress = f"embedding in the background: {cov.embedded_chunks}/{to_embed} chunks"
        if progress == self.last:
            return None
        self.last = progress
        return progress + left
