"""A minimal JSON-RPC client for the real `codex app-server` (stdio, one JSON object per line).

Verified with codex 0.171.0 (AUTO.md): `initialize {clientInfo, capabilities}` answers `{userAgent,
codexHome, platformFamily, platformOs}` (the user agent carries the Codex version after the first
`/`), then the client sends the `initialized` notification. Notifications such as `configWarning`
arrive unasked, so answers are matched by `id`, never by order; `account/rateLimits/updated`
notifications seen on the way are collected. Without a login `account/rateLimits/read` answers
error -32600 and `account/read` `{"account": null, "requiresOpenaiAuth": true}`; `model/list`
works either way.

The server runs with the probe environment (an allowlist: no pay-as-you-go key ever reaches it),
stdin/stdout pipes, stderr discarded, and one deadline for the whole conversation; it is killed
(whole process group) when the conversation ends or the deadline passes.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ivoai.client.orchestration._errors import AppServerError
from ivoai.client.orchestration._pipes import spawn_piped
from ivoai.common.limits import QUOTA_PROBE_TIMEOUT_SECONDS

LINE_MAX_BYTES = 4 * 1024 * 1024  # one JSON-RPC message (the model catalogue is ~20 KiB)
AUTH_REQUIRED = -32600  # "codex account authentication required to read rate limits"
OVERLOADED = -32001  # server overloaded: retry with backoff


@dataclass
class RpcError(Exception):
    """A JSON-RPC error answer."""

    code: int
    message: str

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


@dataclass
class AppServerSession:
    """One running `codex app-server` and what it said so far."""

    proc: subprocess.Popen[bytes]
    deadline: float
    user_agent: str = ""
    notifications: list[dict[str, Any]] = field(default_factory=list)
    _next_id: int = 1
    _buffer: bytes = b""

    @property
    def version(self) -> str | None:
        """The Codex version from the user agent (`ivoai/0.171.0 (…)`), or None."""
        head = self.user_agent.split(" ", 1)[0]
        _, _, version = head.partition("/")
        return version or None

    def _send(self, doc: Mapping[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(doc) + "\n").encode("utf-8"))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise AppServerError(f"codex app-server closed its input ({type(exc).__name__})") from None

    def _read_message(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = self.deadline - time.monotonic()
                if remaining <= 0:
                    raise AppServerError("codex app-server did not answer in time")
                if not sel.select(timeout=remaining):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AppServerError(f"codex app-server exited (status {self.proc.poll()})")
                self._buffer += chunk
                if len(self._buffer) > LINE_MAX_BYTES:
                    raise AppServerError("codex app-server sent an oversized message")
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            doc = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise AppServerError("codex app-server sent a line that is not JSON") from None
        if not isinstance(doc, dict):
            raise AppServerError("codex app-server sent a JSON value that is not an object")
        return doc

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Send one request and return its result, collecting notifications on the way.

        Raises:
            RpcError: the server answered with an error.
            AppServerError: no answer before the deadline, a dead server, or garbage.
        """
        rid = self._next_id
        self._next_id += 1
        doc: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            doc["params"] = dict(params)
        self._send(doc)
        while True:
            msg = self._read_message()
            if msg.get("id") == rid and "method" not in msg:
                if isinstance(msg.get("error"), dict):
                    err = msg["error"]
                    code = err.get("code") if isinstance(err.get("code"), int) else 0
                    raise RpcError(code, str(err.get("message", ""))[:300])
                return msg.get("result")
            if "method" in msg and "id" not in msg:
                self.notifications.append(msg)
            # A server request (it has both id and method) is not answered: we announce no capability.

    def wait_notification(self, method: str, match: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The first notification `method` (already received, or the next ones) whose params hold `match`.

        Raises:
            AppServerError: none before the deadline, or the server died.
        """

        def fits(note: Mapping[str, Any]) -> bool:
            params = note.get("params")
            return (
                note.get("method") == method
                and isinstance(params, dict)
                and all(params.get(k) == v for k, v in (match or {}).items())
            )

        for note in self.notifications:
            if fits(note):
                return note
        while True:
            msg = self._read_message()
            if "method" in msg and "id" not in msg:
                self.notifications.append(msg)
                if fits(msg):
                    return msg

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification."""
        doc: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            doc["params"] = dict(params)
        self._send(doc)

    def close(self) -> None:
        """End the server: close stdin, then TERM and KILL its process group (bounded)."""
        proc = self.proc
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        for sig, wait in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 5.0)):
            if proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> AppServerSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_app_server(
    codex: str,
    env: Mapping[str, str],
    *,
    timeout: float = QUOTA_PROBE_TIMEOUT_SECONDS,
    client_version: str = "0",
    extra_args: Sequence[str] = (),
) -> AppServerSession:
    """Start `codex app-server`, run the handshake and return the session.

    Raises:
        AppServerError: it could not be started or did not complete the handshake.
    """
    try:
        proc = spawn_piped([codex, "app-server", *extra_args], env)
    except OSError as exc:
        raise AppServerError(f"could not start codex app-server ({exc.strerror or exc})") from None
    session = AppServerSession(proc, time.monotonic() + timeout)
    try:
        result = session.request(
            "initialize", {"clientInfo": {"name": "ivoai", "version": client_version}, "capabilities": {}}
        )
        if not isinstance(result, dict):
            raise AppServerError("codex app-server answered initialize without a result object")
        session.user_agent = str(result.get("userAgent", ""))[:512]
        session.notify("initialized")
    except RpcError as exc:
        session.close()
        raise AppServerError(f"codex app-server refused initialize ({exc})") from None
    except BaseException:
        session.close()
        raise
    return session
