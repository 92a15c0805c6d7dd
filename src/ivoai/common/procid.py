"""Linux process identity for records other processes read: a PID plus its kernel start time.

A PID alone is not an identity: after a process dies the kernel reuses its number. The start time
(field 22 of /proc/PID/stat, clock ticks since boot) together with the PID is unique until reboot,
so a record saying "process N is running this" is only believed while both still match.
(`ivoai.client.sessions.procinfo` does the same for the client; `common` may not import it.)
"""

from __future__ import annotations

import os


def start_marker(pid: int) -> str | None:
    """The kernel start time of `pid` as a string, or None when no such process exists."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read(4096)
    except OSError:
        return None
    tail = raw[raw.rfind(b")") + 2 :].split()  # comm may contain spaces or ')': split after the last ')'
    if len(tail) < 20 or tail[0] == b"Z":  # a zombie has exited; only its exit status remains
        return None
    return tail[19].decode("ascii", "replace")


def own_marker() -> tuple[int, str]:
    """(PID, start marker) of this process; the marker is empty where /proc is unavailable."""
    pid = os.getpid()
    return pid, start_marker(pid) or ""


def is_alive(pid: int, marker: str) -> bool:
    """True while `pid` runs and is still the process that recorded `marker`.

    Without a marker (no /proc when it was recorded) a live PID is believed.
    """
    if pid <= 0:
        return False
    if marker:
        return start_marker(pid) == marker
    return pid_exists(pid)


def pid_exists(pid: int) -> bool:
    """True while some process has the number `pid` (one of another user counts: signal 0 probe)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
