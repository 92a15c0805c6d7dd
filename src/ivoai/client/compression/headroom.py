"""HeadroomCompressionProvider (legacy, kept during the Caveman observation window).

Preflight with the real `headroom-ai` CLI: installed (ivoai's managed `bin/headroom`, else PATH),
`headroom --version`, and wrap support for the executor (`headroom wrap --help` lists it and the
proxy extras are importable, because `wrap` exits 1 without them). Then ivoai runs
`headroom wrap codex|claude --port P --no-mcp --code-memory none -- ARGS` as the client.

Isolation, verified with headroom-ai 0.42.0: by default `wrap codex` registers MCP servers in
`$CODEX_HOME/config.toml` and `wrap claude` registers a code-memory MCP; `--no-mcp` and
`--code-memory none` leave the official clients' configuration files untouched (the test compares
`~/.codex` and `~/.claude` byte for byte). `wrap codex` still creates an *empty* `~/.codex` when it
does not exist; ivoai removes it again when it is still empty after the session. Headroom's own
state stays under `~/.headroom`; its anonymous usage beacon is switched off (`HEADROOM_BEACON=off`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ivoai.client.agents.executors import discover
from ivoai.client.compression._probe import run_probe
from ivoai.client.compression.errors import PreflightError
from ivoai.common.limits import HEADROOM_PROBE_TIMEOUT_SECONDS, TERM_GRACE_SECONDS

_VERSION = re.compile(r"headroom, version (\d+\.\d+\.\d+\S*)")
MIN_VERSION = (0, 36, 0)  # the seed's reviewed pin; `wrap codex|claude` exist since then
ENV = {"HEADROOM_BEACON": "off", "HEADROOM_WRAP_QUIET": "1"}
_PROXY_CHECK = (
    "import importlib.util as u,sys; sys.exit(0 if all(u.find_spec(m) for m in ('fastapi','uvicorn')) else 3)"
)


@dataclass(frozen=True)
class HeadroomBinary:
    """A preflighted headroom CLI."""

    path: str
    version: str


def _interpreter(script: str) -> str | None:
    """The Python a console-script `headroom` runs on (its `#!` line), to check its proxy extras."""
    try:
        with open(script, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode("utf-8", "replace").split()
    return parts[0] if parts and os.path.isabs(parts[0]) else None


def parse_version(text: str) -> tuple[int, int, int] | None:
    """`headroom, version 0.42.0` -> (0, 42, 0)."""
    match = _VERSION.search(text)
    if not match:
        return None
    nums = re.findall(r"\d+", match.group(1))[:3]
    return (int(nums[0]), int(nums[1]), int(nums[2])) if len(nums) == 3 else None


def preflight(executor: str, env: Mapping[str, str]) -> HeadroomBinary:
    """Installed, version, and wrap support for `executor`.

    Raises:
        PreflightError: `headroom_not_installed`, `headroom_version_failed`, `headroom_incompatible`,
            `headroom_wrap_unsupported` or `headroom_proxy_missing`.
    """
    found = discover("headroom", env)
    if found is None:
        raise PreflightError("headroom is not installed", code="headroom_not_installed")
    path = found[0]
    probe = run_probe([path, "--version"], timeout=HEADROOM_PROBE_TIMEOUT_SECONDS, env=env, extra_env=ENV)
    version = parse_version(probe.stdout) if probe.ok else None
    if version is None:
        raise PreflightError("`headroom --version` failed", code="headroom_version_failed")
    if version < MIN_VERSION:
        raise PreflightError(
            f"headroom {'.'.join(map(str, version))} is older than 0.36.0", code="headroom_incompatible"
        )
    helptext = run_probe(
        [path, "wrap", "--help"], timeout=HEADROOM_PROBE_TIMEOUT_SECONDS, env=env, extra_env=ENV
    )
    if not helptext.ok or f"wrap {executor}" not in helptext.stdout:
        raise PreflightError(f"headroom cannot wrap {executor}", code="headroom_wrap_unsupported")
    python = _interpreter(path)
    if python is not None:
        extras = run_probe([python, "-c", _PROXY_CHECK], timeout=HEADROOM_PROBE_TIMEOUT_SECONDS, env=env)
        if not extras.ok:
            raise PreflightError(
                "headroom's proxy extras are missing (headroom-ai[proxy])", code="headroom_proxy_missing"
            )
    return HeadroomBinary(path, ".".join(map(str, version)))


def wrap_argv(binary: HeadroomBinary, executor: str, port: int, client_args: list[str]) -> list[str]:
    """`headroom wrap EXECUTOR` on a private port, without touching the clients' config files."""
    return [
        binary.path,
        "wrap",
        executor,
        "--port",
        str(port),
        "--no-mcp",
        "--code-memory",
        "none",
        "--",
        *client_args,
    ]


# `headroom wrap` starts its proxy detached (its own session) and, on a normal exit, leaves it to the
# proxy's orphan watchdog, which stops it only after 15 minutes without clients (60 s at the least).
# ivoai gives each session a private port, so no other client can ever share that proxy: the
# launcher stops it when the client exits (seed 003: the executor's exit ends the proxy).
WRAP_PROXY_ENV = {"HEADROOM_WRAP_ORPHAN_GRACE_SECONDS": "60"}  # backstop for an ivoai that was killed


def _wrap_proxy_pids(port: int, session_id: str) -> list[int]:
    """PIDs of this user's headroom proxies on `port` that carry this session's ID in their environment."""
    wanted_env = f"IVOAI_SESSION_ID={session_id}".encode()
    port_arg = str(port).encode()
    uid, me, found = os.getuid(), os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                argv = fh.read(8192).split(b"\0")
            if b"proxy" not in argv or b"--port" not in argv or not any(b"headroom" in a for a in argv):
                continue
            i = argv.index(b"--port")
            if i + 1 >= len(argv) or argv[i + 1] != port_arg:
                continue
            with open(f"/proc/{name}/environ", "rb") as fh:
                environ = fh.read(1 << 20).split(b"\0")
        except OSError:  # gone, or not ours to read
            continue
        if wanted_env in environ:
            found.append(int(name))
    return found


def stop_wrap_proxy(port: int, session_id: str, *, grace_seconds: float = TERM_GRACE_SECONDS) -> int:
    """Stop the proxy `headroom wrap` left on `port` for this session (bounded TERM -> KILL); how many.

    Only a process of this user whose argv is a headroom proxy on exactly this port *and* whose
    environment carries this session's `IVOAI_SESSION_ID` is signalled, and each signal re-checks
    its start marker, so a recycled PID is never hit.
    """
    import signal
    import time

    from ivoai.client.sessions.procinfo import is_same_process, start_marker

    targets = [(pid, start_marker(pid)) for pid in _wrap_proxy_pids(port, session_id)]
    for pid, marker in targets:
        if is_same_process(pid, marker):
            _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while any(is_same_process(p, m) for p, m in targets) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid, marker in targets:
        if is_same_process(pid, marker):
            _signal(pid, signal.SIGKILL)
    return len(targets)


def _signal(pid: int, signo: int) -> None:
    import contextlib

    with contextlib.suppress(ProcessLookupError):  # it exited between the check and the signal
        os.kill(pid, signo)
