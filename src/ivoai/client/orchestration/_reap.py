"""Reaping an interactive primary at failover, and giving the terminal back in a usable state.

The interactive client stays in ivoai's foreground process group (seed 002, "Agent launch": a
new group without `tcsetpgrp` would stop its terminal reads), so "the primary's process group" is
its process tree inside ivoai's group: the client and every descendant (its MCP servers, the
orchestrator and the orchestrator's workers, shells it started). `reap_tree` sends TERM to each of
them, waits up to a grace period for the client to end, then KILLs whatever is left. Every signal
goes to a PID only while it still has the start marker recorded when the tree was read, so a
recycled PID is never signalled. ivoai itself (the client's parent) is never part of the tree.

A TUI killed mid-frame can leave the terminal raw, in the alternate screen, with the cursor hidden
and mouse or keyboard-protocol reporting on. `TerminalState` saves the terminal attributes before
the first primary starts and restores them afterwards, and writes the resets for those modes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any

from ivoai.client.sessions.procinfo import is_same_process, is_zombie, start_marker
from ivoai.common.limits import AUTO_PRIMARY_TERM_GRACE_SECONDS

# Leave the alternate screen, show the cursor, end bracketed paste, mouse reporting (1000, 1002,
# 1003, 1006) and the kitty keyboard protocol; reset attributes. Unsupported ones are ignored.
TERMINAL_RESET = "\x1b[?1049l\x1b[?25h\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[<u\x1b[0m"


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                raw = fh.read(4096)
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            kids.setdefault(int(fields[1]), []).append(int(name))
    return kids


def process_tree(pid: int) -> list[tuple[int, str]]:
    """`pid` and its descendants as (pid, start marker), parents first; gone ones are left out."""
    kids = _children()
    out: list[tuple[int, str]] = []
    todo = [pid]
    seen: set[int] = set()
    while todo:
        current = todo.pop(0)
        if current in seen or current == os.getpid():
            continue
        seen.add(current)
        marker = start_marker(current)
        if marker is not None:
            out.append((current, marker))
        todo.extend(kids.get(current, []))
    return out


def _gone(pid: int, marker: str) -> bool:
    return not is_same_process(pid, marker) or is_zombie(pid)


def _signal(members: list[tuple[int, str]], signo: int) -> None:
    for pid, marker in members:
        if is_same_process(pid, marker):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signo)


@dataclass(frozen=True)
class Reaped:
    """What `reap_tree` did."""

    members: int
    killed: int  # members still alive after the grace period, sent SIGKILL
    seconds: float


def reap_tree(pid: int, *, grace: float = AUTO_PRIMARY_TERM_GRACE_SECONDS) -> Reaped:
    """Bounded TERM -> KILL of `pid`'s tree (the caller's supervise loop collects `pid` itself)."""
    started = time.monotonic()
    members = process_tree(pid)
    _signal(members, signal.SIGTERM)
    deadline = started + grace
    delay = 0.005
    while time.monotonic() < deadline:
        if all(_gone(p, m) for p, m in members):
            return Reaped(len(members), 0, time.monotonic() - started)
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    late = [(p, m) for p, m in members if not _gone(p, m)]
    late += [x for x in process_tree(pid) if x not in late]  # started during the grace period
    _signal(late, signal.SIGKILL)
    return Reaped(len(members), len(late), time.monotonic() - started)


class TerminalState:
    """The controlling terminal's attributes, saved before the primary starts (None: no terminal)."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.attrs: list[Any] | None = None
        try:
            import termios

            if os.isatty(0):
                self.fd = 0
                self.attrs = termios.tcgetattr(0)
        except (ImportError, OSError):
            self.fd, self.attrs = None, None

    def restore(self) -> bool:
        """Put the saved attributes back and reset the modes a killed TUI may have left on."""
        if self.fd is None or self.attrs is None:
            return False
        import termios

        try:
            termios.tcsetattr(self.fd, termios.TCSANOW, self.attrs)
        except (OSError, termios.error):
            return False
        out = sys.stderr if sys.stderr.isatty() else sys.stdout if sys.stdout.isatty() else None
        if out is not None:
            with contextlib.suppress(OSError, ValueError):
                out.write(TERMINAL_RESET + "\r\n")
                out.flush()
        return True
