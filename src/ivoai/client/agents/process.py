"""Run the official client as a supervised child: structured argv, signal forwarding, exit status.

Import-light (`os`, `time` and the interpreter's already-loaded `_signal`): this is the launch path.

How signals reach the client (seed 002, "Agent launch and failure isolation"):

* The client stays in ivoai's foreground process group. Terminal-generated interrupt, quit,
  suspend, continue and resize signals therefore reach ivoai *and* the client directly; ivoai does
  not forward a terminal-generated SIGINT/SIGQUIT (``si_code == SI_KERNEL``) a second time. A new
  process group without ``tcsetpgrp`` would stop the client's terminal reads with SIGTTIN.
* Signals *sent* to ivoai with kill(2) (SIGINT, SIGQUIT, SIGTERM, SIGHUP) are forwarded to the
  client. SIGTERM and SIGHUP mean "end the session": if the client is still running
  `TERM_GRACE_SECONDS` later, it gets SIGKILL (bounded TERM -> KILL).
* Cancellation from inside ivoai (the compression proxy died) uses the same TERM -> KILL sequence.

ivoai blocks those signals before it starts any helper thread (the knowledge router) and waits
for them synchronously with ``sigtimedwait``, together with SIGCHLD, so no Python signal handler
runs at an arbitrary point. The child starts with the original signal mask.
"""

from __future__ import annotations

import os
import sys
import time

from ivoai.common.limits import SUPERVISOR_POLL_SECONDS, TERM_GRACE_SECONDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _sig
    from collections.abc import Callable, Mapping, Sequence
else:  # the C module is loaded at interpreter start; `signal` would import enum (slow)
    _sig = sys.modules.get("_signal") or __import__("signal")

SI_KERNEL = 0x80  # Linux: the kernel (e.g. the terminal driver) generated the signal
_FORWARDED = (_sig.SIGINT, _sig.SIGQUIT, _sig.SIGTERM, _sig.SIGHUP)
_WAITSET = frozenset((_sig.SIGCHLD, *_FORWARDED))
_TERMINAL_ONCE = (_sig.SIGINT, _sig.SIGQUIT)  # reach the whole foreground group from a terminal
_ENDING = (_sig.SIGTERM, _sig.SIGHUP)
# Python ignores SIGPIPE (and SIGXFSZ) at start-up and an ignored disposition survives exec: restore
# the defaults in the child, as subprocess does with restore_signals=True.
_RESTORED = (_sig.SIGPIPE, _sig.SIGXFSZ)


def exit_code_from_status(status: int) -> int:
    """A shell-style exit code: the exit status, or 128+N when signal N ended the process."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


class Outcome:
    """How a supervised session ended."""

    __slots__ = ("exit_code", "helper_exit", "reason", "signals_forwarded")

    def __init__(self, exit_code: int, reason: str, helper_exit: int | None, signals_forwarded: int) -> None:
        self.exit_code = exit_code
        self.reason = reason  # "exited", "signalled", "helper_died", "killed"
        self.helper_exit = helper_exit
        self.signals_forwarded = signals_forwarded


class Supervisor:
    """Blocks the forwarded signals for its lifetime, spawns children and waits for the client."""

    def __init__(self) -> None:
        self._old_mask: set[int] | None = None

    def __enter__(self) -> Supervisor:
        self.block()
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def block(self) -> None:
        """Block the forwarded signals and SIGCHLD in this thread (call before starting threads)."""
        if self._old_mask is None:
            if _sig.getsignal(_sig.SIGCHLD) == _sig.SIG_IGN:
                _sig.signal(_sig.SIGCHLD, _sig.SIG_DFL)  # ignored SIGCHLD would auto-reap our child
            self._old_mask = {int(s) for s in _sig.pthread_sigmask(_sig.SIG_BLOCK, _WAITSET)}

    def restore(self) -> None:
        """Drop signals that arrived for the finished session, then restore the original mask."""
        if self._old_mask is None:
            return
        while _sig.sigtimedwait(_WAITSET, 0) is not None:
            pass
        _sig.pthread_sigmask(_sig.SIG_SETMASK, self._old_mask)
        self._old_mask = None

    def pending_cancel(self) -> bool:
        """Consume a pending SIGINT/SIGTERM/SIGHUP that arrived before the client started (True if any)."""
        wanted = frozenset((_sig.SIGINT, _sig.SIGTERM, _sig.SIGHUP)) & {int(s) for s in _sig.sigpending()}
        if not wanted:
            return False
        while _sig.sigtimedwait(wanted, 0) is not None:
            pass
        return True

    def spawn(
        self,
        path: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        own_group: bool = False,
        stdin_devnull: bool = False,
        output_path: str | None = None,
    ) -> int:
        """Start `path` with `argv` (no shell) and the original signal mask; return its PID.

        `own_group` puts a non-interactive helper (a proxy) in its own process group so terminal
        signals meant for the client do not reach it. Raises OSError when the exec fails.
        """
        actions: list[tuple[int, ...] | tuple[int, int, str, int, int]] = []
        if stdin_devnull:
            actions.append((os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0))
        if output_path is not None:
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
            actions.append((os.POSIX_SPAWN_OPEN, 1, output_path, flags, 0o600))
            actions.append((os.POSIX_SPAWN_DUP2, 1, 2))
        mask = self._old_mask if self._old_mask is not None else set()
        if own_group:
            return os.posix_spawn(
                path,
                list(argv),
                dict(env),
                file_actions=actions,
                setsigmask=mask,
                setsigdef=_RESTORED,
                setpgroup=0,
            )
        return os.posix_spawn(
            path, list(argv), dict(env), file_actions=actions, setsigmask=mask, setsigdef=_RESTORED
        )

    def supervise(
        self,
        client_pid: int,
        *,
        helper_pid: int | None = None,
        on_helper_death: Callable[[int], None] | None = None,
        grace_seconds: float = TERM_GRACE_SECONDS,
        deferred: Callable[[], None] | None = None,
        defer_seconds: float = 0.0,
    ) -> Outcome:
        """Wait for the client, forwarding signals; end it (TERM -> KILL) if the helper dies.

        `deferred` runs once, `defer_seconds` after the start, if the client is still running then
        (the launcher writes the session record there, off the path of very short sessions).
        """
        kill_at: float | None = None
        killed = False
        helper_exit: int | None = None
        forwarded = 0
        defer_at = time.monotonic() + defer_seconds if deferred is not None else None
        while True:
            timeout = SUPERVISOR_POLL_SECONDS
            if defer_at is not None:
                timeout = max(0.0, min(timeout, defer_at - time.monotonic()))
            info = _sig.sigtimedwait(_WAITSET, timeout)
            if info is not None and info.si_signo != _sig.SIGCHLD:
                signo = info.si_signo
                if signo in _ENDING or (signo in _TERMINAL_ONCE and info.si_code != SI_KERNEL):
                    _send(client_pid, signo)
                    forwarded += 1
                if signo in _ENDING and kill_at is None:
                    kill_at = time.monotonic() + grace_seconds
            pid, status = os.waitpid(client_pid, os.WNOHANG)
            if pid:
                code = exit_code_from_status(status)
                if helper_exit is not None:
                    reason = "helper_died"
                elif killed:
                    reason = "killed"
                else:
                    reason = "signalled" if os.WIFSIGNALED(status) else "exited"
                return Outcome(code, reason, helper_exit, forwarded)
            if helper_pid is not None:
                hpid, hstatus = os.waitpid(helper_pid, os.WNOHANG)
                if hpid:
                    helper_exit = exit_code_from_status(hstatus)
                    helper_pid = None
                    if on_helper_death is not None:
                        on_helper_death(helper_exit)
                    _send(client_pid, _sig.SIGTERM)
                    kill_at = time.monotonic() + grace_seconds
            if kill_at is not None and not killed and time.monotonic() >= kill_at:
                _send(client_pid, _sig.SIGKILL)
                killed = True
            if defer_at is not None and deferred is not None and time.monotonic() >= defer_at:
                defer_at = None
                deferred()


def _send(pid: int, signo: int) -> None:
    try:  # noqa: SIM105 - contextlib is not loaded on the launch path
        os.kill(pid, signo)
    except ProcessLookupError:
        pass  # already gone; its exit is collected by waitpid


def stop_process(pid: int, *, grace_seconds: float = TERM_GRACE_SECONDS, group: bool = False) -> int | None:
    """Bounded TERM -> KILL of a child we spawned; return its exit code (None if already reaped)."""
    target = -pid if group else pid
    try:  # noqa: SIM105 - contextlib is not loaded on the launch path
        os.kill(target, _sig.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace_seconds
    delay = 0.005
    while True:
        try:
            rpid, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if rpid:
            return exit_code_from_status(status)
        if time.monotonic() >= deadline:
            try:  # noqa: SIM105 - contextlib is not loaded on the launch path
                os.kill(target, _sig.SIGKILL)
            except ProcessLookupError:
                pass
            _, status = os.waitpid(pid, 0)
            return exit_code_from_status(status)
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
