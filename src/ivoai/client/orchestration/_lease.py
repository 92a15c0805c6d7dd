"""The kernel-held lease of an AUTO chain: one ivoai process drives a chain's primary at a time.

`$XDG_STATE_HOME/ivoai/leases/<chain>.lock` (0600 in 0700) is opened and locked with
`flock(LOCK_EX | LOCK_NB)`; the descriptor stays open (close-on-exec, so no client inherits it)
for the life of the ivoai process that runs the primary: `ivoai auto` from its first session on,
and `ivoai session resume|handoff|recover`. The kernel drops the lock when that process exits,
however it exits, so a crash never leaves a stale lease. A second process asking for a held lease
is refused at once, with the holder's PID (written into the file by the holder).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass

from ivoai.client.orchestration._errors import OrchestrationError
from ivoai.client.sessions.records import check_session_id
from ivoai.common.fsio import ensure_private_dir
from ivoai.common.paths import XdgPaths, xdg_paths

LEASE_DIR = "leases"


class LeaseHeldError(OrchestrationError):
    """Another ivoai process holds the chain's lease (it is running or resuming that session)."""

    code = "session_lease_held"


@dataclass
class Lease:
    """A held lease (the open, locked descriptor)."""

    chain: str
    fd: int

    def release(self) -> None:
        """Unlock and close (also happens when the process exits)."""
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


def acquire_lease(chain: str, paths: XdgPaths | None = None) -> Lease:
    """Take the chain's lease for this process's lifetime.

    Raises:
        LeaseHeldError: another process holds it (the message names its PID when known).
    """
    paths = paths or xdg_paths()
    directory = ensure_private_dir(paths.state, paths.state / LEASE_DIR)
    path = directory / f"{check_session_id(chain)}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
        except OSError:
            holder = "unknown"
        os.close(fd)
        raise LeaseHeldError(
            f"session {chain} is already being driven by another ivoai process (pid {holder}); "
            "only one resume, handoff or recovery of a session can run at a time"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return Lease(chain, fd)
