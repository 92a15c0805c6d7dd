"""`ivoai doctor`: stray Ruflo daemons (read-only: nothing is signalled).

ivoai runs Ruflo with its daemon disabled (`_ruflo`), so a Ruflo worker daemon is never ivoai's
to keep: one running inside an ivoai session's runtime directory leaked from a session (stray),
one elsewhere belongs to the user's own Ruflo use and is only listed. A Ruflo daemon is a process
of this user whose command line runs `daemon start` from the `ruflo` or `@claude-flow/cli`
package (Ruflo's own `daemon status --all` looks for the same thing); its workspace is the
`--workspace DIR` Ruflo stamps on background daemons, else the process's working directory.
Found by reading `/proc`, bounded to DOCTOR_PROCESS_SCAN_MAX entries; no `ps`, no Ruflo needed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ivoai.common.paths import XdgPaths
from ivoai.core import ComponentStatus
from ivoai.core.health import Health, HealthState
from ivoai.core.support import Fact

DOCTOR_PROCESS_SCAN_MAX = 65536


@dataclass(frozen=True)
class RufloDaemon:
    """One running Ruflo daemon."""

    pid: int
    workspace: str | None
    in_ivoai_runtime: bool


def _cmdline(pid: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read(65536)
    except OSError:
        return []
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def find_ruflo_daemons(paths: XdgPaths) -> list[RufloDaemon]:
    """Ruflo daemons of this user, each with its workspace and whether it sits in an ivoai runtime."""
    run_root = os.path.realpath(paths.state / "run")
    found = []
    uid = os.geteuid()
    try:
        names = os.listdir("/proc")[:DOCTOR_PROCESS_SCAN_MAX]
    except OSError:
        return []
    for name in names:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
        except OSError:
            continue
        argv = _cmdline(name)
        joined = " ".join(argv)
        if "daemon" not in argv or "start" not in argv:
            continue
        if not any(("ruflo" in a or "claude-flow" in a) for a in argv):
            continue
        workspace = None
        if "--workspace" in argv and argv.index("--workspace") + 1 < len(argv):
            workspace = argv[argv.index("--workspace") + 1]
        else:
            try:
                workspace = os.readlink(f"/proc/{name}/cwd")
            except OSError:
                workspace = None
        inside = workspace is not None and os.path.realpath(workspace).startswith(run_root + os.sep)
        if joined:
            found.append(RufloDaemon(int(name), workspace, inside))
    return sorted(found, key=lambda d: d.pid)


def component_statuses(paths: XdgPaths) -> list[ComponentStatus]:
    """The `ruflo` coordinator row: healthy without stray daemons, degraded when one leaked."""
    daemons = find_ruflo_daemons(paths)
    stray = [d for d in daemons if d.in_ivoai_runtime]
    others = [d for d in daemons if not d.in_ivoai_runtime]
    parts = []
    if stray:
        listed = ", ".join(f"pid {d.pid} in {d.workspace}" for d in stray[:5])
        parts.append(
            f"{len(stray)} stray Ruflo daemon(s) inside ivoai session runtimes ({listed}); stop them"
        )
    if others:
        listed = ", ".join(f"pid {d.pid} in {d.workspace or '?'}" for d in others[:5])
        parts.append(f"{len(others)} Ruflo daemon(s) outside ivoai, not ivoai's ({listed})")
    reason = "; ".join(parts) or "no Ruflo daemon running (ivoai runs Ruflo with its daemon disabled)"
    state = HealthState.DEGRADED if stray else HealthState.HEALTHY
    return [
        ComponentStatus(
            component="ruflo-daemons",
            kind="coordinator",
            implementation="RufloSafeProfile",
            available=Fact.of(not stray),
            health=Health(state, reason),
            reason=reason,
        )
    ]
