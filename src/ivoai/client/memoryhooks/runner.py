"""`ivoai memory hook EVENT [--client codex|claude]`: one host hook event, fail-safe and bounded.

Reached from `ivoai.cli.main` before Typer is imported (like `ivoai codex`); keep the import chain
light: `os`, `sys`, `json`, `time`, `signal`, `fcntl` and ivoai's import-light modules, plus `re`
for the redactor (the console script has loaded it already).

What one hook process does, in order, within MEMORY_HOOK_BUDGET_SECONDS of wall time (2.5 s for
SessionEnd, which the hosts give 3 s; a SIGALRM ends it with status 0 whatever it was doing; a torn
spool line is harmless, see `spool`):

1. reads at most MEMORY_HOOK_STDIN_MAX_BYTES of the host's JSON payload; a larger payload is not
   parsed: the event keeps the fields readable from its start and a truncation marker;
2. returns at once when no memory destination can exist (no session source, no enrolled memory server);
3. builds the event (`capture`), redacts it, appends it to the private spool;
   (an event not spooled, because the budget ended first or the spool failed, is counted in
   `memoryhooks/lost` and reported by `ivoai memory hooks status`: a loss is never silent);
4. drains the rest of stdin (so the host never gets EPIPE) and starts a background flusher if none
   runs and no backoff is pending (`flusher`, detached in its own session with stdio on /dev/null,
   so the host never waits for it);
5. exits 0 and prints nothing: both hosts read an empty answer as "allow / continue" (a SessionStart
   or UserPromptSubmit hook's stdout would otherwise be injected into the model's context).

Server down, a refused credential, a full disk, a malformed payload or an unsafe spool directory all
end the same way: exit status 0. Failures of the flusher are recorded in its state for `status`.
"""

from __future__ import annotations

import os
import sys

from ivoai.common.limits import (
    MEMORY_HOOK_BUDGET_SECONDS,
    MEMORY_HOOK_SESSION_END_BUDGET_SECONDS,
    MEMORY_HOOK_STDIN_MAX_BYTES,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

USAGE = "usage: ivoai memory hook EVENT [--client codex|claude]   (run by Codex and Claude Code hooks)\n"
PROBE_ANSWER = "ivoai memory hook runner ok\n"
OFF_VALUES = frozenset({"0", "off", "false", "no"})
READ_CHUNK = 1 << 20
FLUSHER_CODE = "from ivoai.client.memoryhooks.flusher import detached_main; detached_main()"
# Fields an oversized payload may still yield from its first MEMORY_HOOK_STDIN_MAX_BYTES.
SALVAGE_KEYS = ("session_id", "cwd", "hook_event_name", "tool_name", "prompt", "source", "reason")


LOST_FILE = "lost"  # one byte per event not spooled (budget over, spool error), in the hooks state dir
_lost_path = ""  # set by `arm_budget`; cleared once the event is spooled (or deliberately skipped)


def count_lost() -> None:
    """Count the current event as lost (so `status` can say so), unless it was settled."""
    if _lost_path:
        try:
            fd = os.open(
                _lost_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
            )
            os.write(fd, b".")
            os.close(fd)
        except OSError:
            pass


def _budget_expired(signum: int, frame: object) -> None:
    count_lost()
    os._exit(0)


def arm_budget(seconds: float = MEMORY_HOOK_BUDGET_SECONDS, env: Mapping[str, str] | None = None) -> None:
    """End this process with status 0 after `seconds` of wall time, whatever it is doing.

    An event that was not spooled by then is counted in `memoryhooks/lost` (reported by `status`).
    """
    import signal

    from ivoai.client.memoryhooks.locations import hooks_dir

    global _lost_path
    _lost_path = os.path.join(hooks_dir(os.environ if env is None else env), LOST_FILE)
    signal.signal(signal.SIGALRM, _budget_expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _settled() -> None:
    """The event is spooled, or deliberately not recorded: the budget no longer counts it as lost."""
    global _lost_path
    _lost_path = ""


def parse_args(args: list[str]) -> tuple[str | None, str, bool]:
    """(event name, client, probe) from the command line; unknown options are ignored (fail-safe)."""
    event: str | None = None
    client = "unknown"
    probe = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--client" and i + 1 < len(args):
            client = args[i + 1]
            i += 1
        elif arg.startswith("--client="):
            client = arg.partition("=")[2]
        elif arg == "--probe":
            probe = True
        elif not arg.startswith("-") and event is None:
            event = arg
        i += 1
    return event, client if client in ("codex", "claude") else "unknown", probe


def read_stdin(fd: int, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of the payload, and whether more followed (left unread for `drain`)."""
    chunks: list[bytes] = []
    kept = 0
    while kept <= limit:
        try:
            chunk = os.read(fd, min(READ_CHUNK, limit + 1 - kept))
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
        kept += len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        return data[:limit], True
    return data, False


def drain(fd: int) -> int:
    """Read and discard the rest of stdin (bounded by the process budget); bytes discarded."""
    total = 0
    while True:
        try:
            chunk = os.read(fd, READ_CHUNK)
        except OSError:
            return total
        if not chunk:
            return total
        total += len(chunk)


def parse_payload(data: bytes, truncated: bool) -> tuple[dict[str, Any], str | None]:
    """The payload object and a note for the event (truncation, not JSON, not an object)."""
    import json

    if truncated:
        from ivoai.client.memoryhooks.capture import salvage

        found = salvage(data.decode("utf-8", "replace"), SALVAGE_KEYS)
        return dict(found), (
            f"[hook payload over the {MEMORY_HOOK_STDIN_MAX_BYTES}-byte limit was truncated; "
            "only fields at its start were read]"
        )
    if not data.strip():
        return {}, None
    try:
        doc = json.loads(data)
    except ValueError:  # invalid UTF-8 or raw control characters inside strings
        try:
            doc = json.loads(data.decode("utf-8", "replace"), strict=False)
        except ValueError:
            return {}, "[hook payload was not valid JSON]"
    if not isinstance(doc, dict):
        return {}, "[hook payload was not a JSON object]"
    return doc, None


def memory_enrolled(env: Mapping[str, str]) -> bool:
    """Is any enabled ivoai server with memory enrolled? (a few hundred bytes of JSON, no pydantic)"""
    import json

    from ivoai.client.memoryhooks.locations import REGISTRY_FILE, config_root

    try:
        fd = os.open(os.path.join(config_root(env), REGISTRY_FILE), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        chunks = []
        while chunk := os.read(fd, READ_CHUNK):
            chunks.append(chunk)
    finally:
        os.close(fd)
    try:
        doc = json.loads(b"".join(chunks))
    except ValueError:
        return True  # unreadable here: let the flusher report it rather than drop events silently
    servers = doc.get("servers") if isinstance(doc, dict) else None
    return isinstance(servers, list) and any(
        isinstance(s, dict)
        and s.get("enabled", True) is not False
        and isinstance(s.get("features"), dict)
        and s["features"].get("memory")
        for s in servers
    )


def spawn_flusher(state_root: str, env: Mapping[str, str]) -> bool:
    """Start a detached flusher unless one runs or a backoff is pending; True if one was started.

    The flush lock is taken here and handed to the child (the fd is inherited), so between this
    check and the child's start no second hook process can start another flusher.
    """
    import fcntl

    from ivoai.client.memoryhooks.locations import FLUSH_LOCK, HOOKS_DIR
    from ivoai.client.memoryhooks.state import flush_due
    from ivoai.common.lightio import open_private_dirs

    dir_fd = open_private_dirs(state_root, HOOKS_DIR)
    try:
        lock = os.open(
            FLUSH_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
        )
    finally:
        os.close(dir_fd)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a flusher runs; it re-checks the spool before it exits
        if not flush_due(state_root):
            return False
        os.set_inheritable(lock, True)
        devnull = os.devnull
        os.posix_spawn(
            sys.executable,
            [sys.executable, "-c", FLUSHER_CODE, str(lock)],
            dict(env),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_DUP2, 1, 2),
            ],
            setsid=True,
        )
        return True
    finally:
        os.close(lock)


def capture(event_name: str, client: str, env: Mapping[str, str], stdin_fd: int = 0) -> str:
    """Capture one event into the spool; returns what happened (for tests and `--verbose` callers)."""
    from ivoai.client.memoryhooks.capture import build_event, encode_record, kind_of, redact_event
    from ivoai.client.memoryhooks.locations import state_root
    from ivoai.client.memoryhooks.spool import append

    kind = kind_of(event_name)
    if kind is None:
        _settled()
        return "unknown_event"
    if env.get("IVOAI_MEMORY_HOOKS", "").lower() in OFF_VALUES:
        _settled()
        return "disabled"
    data, truncated = read_stdin(stdin_fd, MEMORY_HOOK_STDIN_MAX_BYTES)
    dest = env.get("IVOAI_MEMORY_HOOK_SOURCE") or None
    if dest is None and not memory_enrolled(env):
        _settled()
        drain(stdin_fd)
        return "no_destination"
    payload, note = parse_payload(data, truncated)
    event = redact_event(build_event(kind, client, payload, env=env, note=note))
    root = state_root(env)
    append(root, encode_record(event, dest))
    _settled()
    drain(stdin_fd)
    spawn_flusher(root, env)
    return "spooled"


def run_hook(args: list[str], env: Mapping[str, str] | None = None, stdin_fd: int = 0) -> int:
    """Run one hook; always returns 0 (the host's allow / continue answer)."""
    env = os.environ if env is None else env
    try:
        event, client, probe = parse_args(args)
        if probe or event is None:
            _settled()
            if probe:
                sys.stdout.write(PROBE_ANSWER)
            else:
                sys.stderr.write(USAGE)
            return 0
        capture(event, client, env, stdin_fd)
    except BaseException:  # noqa: BLE001 - a hook never fails its host: server down, full disk, anything
        count_lost()
    return 0


def main(args: list[str], *, real_process: bool) -> int:
    """Entry from `ivoai.cli.main`: a real hook process gets the budget alarm and skips teardown."""
    if real_process:
        end = any(a in ("SessionEnd", "session_end") for a in args[:1])
        try:  # noqa: SIM105 - contextlib is not loaded on the hook path
            arm_budget(MEMORY_HOOK_SESSION_END_BUDGET_SECONDS if end else MEMORY_HOOK_BUDGET_SECONDS)
        except (OSError, ValueError):
            pass
    code = run_hook(args)
    if real_process:
        try:  # noqa: SIM105
            sys.stdout.flush()
        except BaseException:  # noqa: BLE001 - the host closed our stdout: still exit 0
            pass
        os._exit(code)
    return code
