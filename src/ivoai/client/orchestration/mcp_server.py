"""`python -m ivoai.client.orchestration.mcp_server --runtime FILE`: the orchestrator's composition root.

The primary client starts this as a stdio MCP server (`ivoai-orchestrator`) for its own lifetime
only; it is never registered anywhere else. FILE is the session's private runtime file (0600 in the
session's 0700 runtime directory, written by `ivoai auto`): session ID, planner, work tree,
`--yes`, worker concurrency, the knowledge router's URL and capability (the file, not argv or the
environment, carries the capability), the allowlisted environment for workers and ivoai's XDG
roots (the client may start MCP servers with a reduced environment). When the client closes
stdin, or sends SIGTERM/SIGHUP, every worker is cancelled and its process group reaped, and the
final metadata is written (a SIGKILL leaves orphans that the launch fuse reaps on the next start).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ivoai.common.errors import IvoaiError
from ivoai.common.limits import JSON_STATE_MAX_BYTES

XDG_VARS = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")


def load_runtime(path: Path) -> dict[str, Any]:
    """The runtime file (must be a private regular file of ours).

    Raises:
        IvoaiError: unreadable, not private, or not the expected JSON object.
    """
    from ivoai.common.fsio import read_private_file

    try:
        doc = json.loads(read_private_file(path.parent, path, JSON_STATE_MAX_BYTES))
    except (OSError, ValueError) as exc:
        raise IvoaiError(
            f"orchestrator runtime file unusable ({type(exc).__name__})", code="runtime_invalid"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("session_id"), str):
        raise IvoaiError("orchestrator runtime file is not a session description", code="runtime_invalid")
    return doc


def build_session(doc: dict[str, Any]) -> Any:
    """The OrchestratorSession described by a runtime document (XDG roots applied first)."""
    for var in XDG_VARS:
        value = (doc.get("xdg") or {}).get(var)
        if isinstance(value, str) and os.path.isabs(value):
            os.environ[var] = value
    from ivoai.client.orchestration._session import OrchestratorSession, SessionConfig
    from ivoai.client.orchestration._settings import load_settings
    from ivoai.client.orchestration._worker_spec import KnowledgeAccess
    from ivoai.client.sessions.records import check_session_id
    from ivoai.common.paths import xdg_paths

    paths = xdg_paths()
    knowledge = None
    k = doc.get("knowledge")
    if isinstance(k, dict) and isinstance(k.get("url"), str) and isinstance(k.get("token"), str):
        knowledge = KnowledgeAccess(k["url"], k["token"], tuple(str(x) for x in k.get("read_tools") or ()))
    env = {str(a): str(b) for a, b in (doc.get("env") or {}).items()}
    env.update({v: os.environ[v] for v in XDG_VARS if v in os.environ})
    config = SessionConfig(
        session_id=check_session_id(doc["session_id"]),
        planner=str(doc.get("planner", "codex")),
        workdir=str(doc.get("workdir") or os.getcwd()),
        approve=doc.get("approve") is True,
        workers=int(doc.get("workers", 2)),
        knowledge=knowledge,
        env=env,
        chain=tuple(check_session_id(str(x)) for x in (doc.get("chain") or [])[:8]),
        coordinator="ruflo" if doc.get("coordinator") == "ruflo" else "native",
    )
    from ivoai.common.fsio import ensure_private_dir

    spool = ensure_private_dir(paths.state, paths.state / "run" / config.session_id / "workers")
    from ivoai.client.orchestration._ruflo import RufloLifecycle

    lifecycle = RufloLifecycle.from_runtime(doc, env)
    settings = load_settings(paths)
    return OrchestratorSession(config, settings, paths=paths, spool_root=spool, lifecycle=lifecycle)


def main(argv: list[str] | None = None) -> int:
    """Entry point (stdio MCP server)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "--runtime":
        sys.stderr.write("usage: python -m ivoai.client.orchestration.mcp_server --runtime FILE\n")
        return 2
    try:
        session = build_session(load_runtime(Path(args[1])))
    except IvoaiError as exc:
        sys.stderr.write(f"ivoai-orchestrator: error: {exc.message}\n")
        return 1
    import signal

    def stop(signo: int, frame: object) -> None:
        raise SystemExit(128 + signo)  # unwinds the event loop, so `run` still closes the session

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    from ivoai.client.orchestration._tools import run

    run(session)
    return 0


if __name__ == "__main__":
    sys.exit(main())
