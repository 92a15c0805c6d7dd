"""Linux process identity: a PID plus the kernel start time from /proc (import-light).

A PID alone is not an identity: after a process exits the kernel reuses its number. The start
time (field 22 of /proc/PID/stat, clock ticks since boot) together with the PID is unique until
reboot, so a session record never makes ivoai signal an unrelated process that got the same PID.
"""

from __future__ import annotations


def start_marker(pid: int) -> str | None:
    """The kernel start time of `pid` as a string, or None when no such process exists."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read(4096)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    except OSError:
        return None
    # comm (field 2) is in parentheses and may itself contain spaces or ')': split after the last ')'.
    tail = raw[raw.rfind(b")") + 2 :].split()
    if len(tail) < 20:
        return None
    return tail[19].decode("ascii", "replace")  # field 22 overall = index 19 after the state field


def is_same_process(pid: int, marker: str | None) -> bool:
    """True only when `pid` is alive *and* still has the recorded start marker."""
    if pid <= 1 or not marker:
        return False
    current = start_marker(pid)
    return current is not None and current == marker


def is_zombie(pid: int) -> bool:
    """True when `pid` has exited but was not reaped yet (state Z)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read(4096)
    except OSError:
        return False
    tail = raw[raw.rfind(b")") + 2 :].split()
    return bool(tail) and tail[0] == b"Z"
