"""`ivoai quickstart [PATH]`: index a checkout on embedded defaults and search it over MCP."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ivoai.cli._output import info, print_json

if TYPE_CHECKING:
    from ivoai.server.runtime.quickstart import EmbeddingWatch

WATCH_EVERY_SECONDS = 30.0  # background-embedding progress lines while serving


def quickstart_command(
    path: Path | None = typer.Argument(None, help="Directory to index (default: the current git checkout)."),
    data_dir: Path | None = typer.Option(
        None,
        "--data-dir",
        help="Server data directory (default $XDG_DATA_HOME/ivoai/server).",
        envvar="IVOAI_SERVER_DATA_DIR",
    ),
    query: str | None = typer.Option(None, "--query", "-q", help="What to search for once indexed."),
    port: int = typer.Option(7744, "--port", help="Loopback port (a free one is used if it is taken)."),
    serve: bool = typer.Option(
        True, "--serve/--no-serve", help="Keep serving after the search (Ctrl-C stops)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Index a checkout, start the server on loopback and search it over MCP."""
    from ivoai.cli._context import client_context
    from ivoai.cli.server.connector import progress_bar
    from ivoai.server.runtime.quickstart import DEFAULT_QUERY, EmbeddingWatch, run_quickstart
    from ivoai.server.runtime.runstate import clear_run_state, write_run_state

    root = data_dir if data_dir is not None else client_context().paths.server_data_dir
    with progress_bar(True) as bar:  # stderr: rich bars on a terminal, plain lines otherwise
        result, server = run_quickstart(
            path,
            root,
            query=query or DEFAULT_QUERY,
            port=port,
            progress=bar,
            announce=info,
            serve=serve,
        )
    try:
        if json_out:
            print_json(result.__dict__)
        else:
            _render(result)
        if serve:
            from ivoai.server.datadir import ServerDataDir
            from ivoai.server.runtime.runner import install_log_redaction

            install_log_redaction()
            data = ServerDataDir(Path(result.data_dir))
            write_run_state(data, listen=server.url.split("://", 1)[1], base_url=server.url)
            info(f"serving on {server.url} (Web MCP {server.url}/mcp); press Ctrl-C to stop")
            _wait_for_signal(EmbeddingWatch(server.app.hub.context()))
            clear_run_state(data)
    finally:
        server.stop()
    if serve:
        info("ivoai server stopped")


def _render(result: Any) -> None:
    out = sys.stdout
    out.write(f"\nindexed {result.source} as connector '{result.connector}' into {result.data_dir}\n")
    out.write(f"server: {result.url}\n\ncontext_search {result.query!r} over MCP:\n")
    if not result.results:
        out.write("  (no results: is the directory empty or all files filtered?)\n")
    for i, r in enumerate(result.results, 1):
        out.write(f"  {i}. {r['path']}  (score {r['score']})\n     {r['snippet']}\n")
    cov = result.coverage
    if cov.get("pending_chunks"):
        to_embed = cov["total_chunks"] - cov["lexical_only_chunks"]
        out.write(
            f"  ({cov['embedded_chunks']} of {to_embed} chunks embedded so far; the rest were matched by"
            " their words: results improve as they are embedded)\n"
        )
    out.write("\nnext steps:\n")
    for step in result.next_steps:
        out.write(f"  - {step}\n")
    out.flush()


def _wait_for_signal(watch: EmbeddingWatch) -> None:
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(WATCH_EVERY_SECONDS):
            line = watch.poll()
            if line:
                info(line)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
