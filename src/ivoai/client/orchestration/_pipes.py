"""A vendor CLI talked to over pipes: how it is started, read and ended (one way for every probe).

`codex app-server`, the `claude -p` initialize handshake and the `claude -p` quota turn all run
the real binary with the minimal probe environment, in a process group of its own (so a deadline
ends the whole tree), with no inherited descriptors and stderr discarded.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

from ivoai.client.agents.childenv import probe_env


def spawn_piped(argv: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start `argv` with piped stdin/stdout in its own process group.

    Raises:
        OSError: it could not be started.
    """
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=probe_env(env),
        process_group=0,
        close_fds=True,
    )


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the process group at once, reap the process and close its pipes."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()


def json_lines(
    stdout: IO[bytes],
    deadline: float,
    *,
    max_read: int | None = None,
    max_pending: int | None = None,
) -> Iterator[Any]:
    """The JSON documents of the lines of `stdout` as they arrive; lines that are not JSON are skipped.

    Ends at EOF, at `deadline` (`time.monotonic()`), once `max_read` bytes were read, or when an
    unfinished line grows past `max_pending` bytes.
    """
    fd = stdout.fileno()
    buffer = b""
    total = 0
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while time.monotonic() < deadline and (max_read is None or total < max_read):
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            total += len(chunk)
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                try:
                    yield json.loads(line)
                except (UnicodeDecodeError, json.JSONDecodeError):
                    continue
            if max_pending is not None and len(buffer) > max_pending:
                return
