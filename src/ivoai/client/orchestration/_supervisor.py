"""The supervisor of an AUTO primary: watches for a hard limit and ends the primary when one is confirmed.

It runs in the `ivoai auto` process (a thread next to the launcher's supervise loop, which keeps
forwarding signals and collects the client's exit) from the primary's exec to its end. Every
`AUTO_SUPERVISOR_POLL_SECONDS` it reads:

1. the primary's own signals (`_signals`): Claude's `StopFailure` hook lines; the rate-limit and
   usage-limit events in the rollout a Codex primary holds open;
2. the quota ledger: a confirmed hard limit of the primary's vendor recorded after the primary
   started (by a worker's `rejected` rate-limit event, a fresh app-server read, `ivoai quota`).

Each signal goes through the limit classifier. A signal in words only (`unconfirmed`) is checked
by re-reading the quota now (`_limitprobe`); if that read does not show the limit it is treated as
transient. Transient and model-scoped limits are recorded and nothing else happens: the primary is
never ended for them. On a **confirmed** hard limit the supervisor records it in the ledger, trips
the vendor's launch breaker, remembers the verdict and the moment, and reaps the primary's tree
(bounded TERM -> KILL, `_reap`). `ivoai auto` then fails over (`_failover`).

Process identity: the primary's PID and start marker are in the session record (the launcher's);
the supervisor signals only PIDs whose start marker it read.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ivoai.client.orchestration._classify import LimitKind, LimitSignal, LimitVerdict, classify
from ivoai.client.orchestration._fuse import LaunchFuse
from ivoai.client.orchestration._ledger import QuotaLedger
from ivoai.client.orchestration._quota import HardLimit, VendorQuota
from ivoai.client.orchestration._reap import Reaped, process_tree, reap_tree
from ivoai.client.orchestration._signals import ClaudeHookSource, CodexRolloutSource, Conversation
from ivoai.client.sessions.procinfo import is_same_process, is_zombie, start_marker
from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import atomic_write
from ivoai.common.limits import AUTO_SUPERVISOR_POLL_SECONDS
from ivoai.common.paths import XdgPaths

Reprobe = Callable[[str], VendorQuota | None]
SUPERVISOR_FILE = "supervisor.json"  # in the session's runtime directory (removed with it)
FRESH_SECONDS = 30.0  # a re-read quota answers later signals of the same vendor for this long
LOCATE_EVERY_SECONDS = 1.0  # how often the process tree is searched for a Codex rollout


@dataclass
class Confirmed:
    """A confirmed hard limit and what the supervisor did about it."""

    verdict: LimitVerdict
    at: float  # wall clock
    monotonic: float
    source: str  # primary | ledger
    reaped: Reaped | None = None

    def to_dict(self) -> dict[str, Any]:
        """Session-record form."""
        return {
            "verdict": self.verdict.to_dict(),
            "at": self.at,
            "source": self.source,
            "reaped": None
            if self.reaped is None
            else {
                "members": self.reaped.members,
                "killed": self.reaped.killed,
                "seconds": round(self.reaped.seconds, 3),
            },
        }


def default_reprobe(env: Mapping[str, str], settings: Any, paths: XdgPaths) -> Reprobe:
    """Codex: a fresh app-server read; Claude: one minimal `claude -p` turn (see `_limitprobe`)."""

    def reprobe(vendor: str) -> VendorQuota | None:
        try:
            if vendor == "claude":
                from ivoai.client.orchestration._limitprobe import claude_quota_now

                return claude_quota_now(env)
            from ivoai.client.orchestration._runtime import Runtime

            return (
                Runtime(settings, paths=paths, env=env)
                .current(refresh=True, vendors=(vendor,))
                .quota.get(vendor)
            )
        except (IvoaiError, OSError):
            return None

    return reprobe


@dataclass
class PrimarySupervisor:
    """Watches one primary (a thread); `confirmed` is set when it ended it for a hard limit."""

    vendor: str
    pid: int
    session_id: str
    runtime_dir: str
    paths: XdgPaths
    reprobe: Reprobe
    started_at: float = field(default_factory=time.time)
    poll_seconds: float = AUTO_SUPERVISOR_POLL_SECONDS
    conversation: Conversation | None = None
    confirmed: Confirmed | None = None
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _fresh: dict[str, tuple[float, VendorQuota]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.marker = start_marker(self.pid)
        self.ledger = QuotaLedger(self.paths)
        self.claude = ClaudeHookSource(self.runtime_dir) if self.vendor == "claude" else None
        self.codex = CodexRolloutSource() if self.vendor == "codex" else None
        self._located_at = 0.0
        if self.conversation is not None:
            self._publish_conversation()

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start watching (a daemon thread: it never keeps ivoai alive)."""
        self._thread = threading.Thread(target=self._run, name="ivoai-supervisor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching and wait for the thread (one poll at most, or a reap in progress)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _alive(self) -> bool:
        return is_same_process(self.pid, self.marker) and not is_zombie(self.pid)

    def _run(self) -> None:
        try:
            self._watch()
        except Exception as exc:  # noqa: BLE001 - a broken supervisor must not take the session down
            why = f"{type(exc).__name__}: {exc}"
            sys.stderr.write(f"ivoai: warning: the supervisor stopped watching ({why})\n")

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            if not self._alive():
                self._poll()  # a last look: the signal may have been written just before the exit
                return
            if self._poll():
                assert self.confirmed is not None
                self.confirmed.reaped = reap_tree(self.pid)
                return

    # -- one look -----------------------------------------------------------------------------------

    def _poll(self) -> bool:
        """Read every source once; True when a hard limit is confirmed."""
        signals: list[LimitSignal] = []
        if self.claude is not None:
            signals += self.claude.poll()
            self._learn(self.claude.conversation)
        if self.codex is not None:
            now = time.monotonic()
            if self.codex.tail is None and now - self._located_at >= LOCATE_EVERY_SECONDS:
                self._located_at = now
                self.codex.locate([p for p, _ in process_tree(self.pid)])
                self._learn(self.codex.conversation)
            signals += self.codex.poll()
        for sig in signals:
            verdict = self._judge(sig)
            self._note(verdict, "primary")
            if verdict.kind is LimitKind.HARD_LIMIT and verdict.confirmed:
                self._confirm(verdict, "primary")
                return True
        hard = self.ledger.view().get(self.vendor).hard_limit
        if hard is not None and hard.confirmed and hard.observed_at >= self.started_at:
            verdict = LimitVerdict(
                LimitKind.HARD_LIMIT, "stop_vendor",
                f"recorded in the quota ledger by {hard.source} ({hard.reason})",
                True, resets_at=hard.resets_at,
            )  # fmt: skip
            self._note(verdict, "ledger")
            self._confirm(verdict, "ledger")
            return True
        return False

    def _judge(self, sig: LimitSignal) -> LimitVerdict:
        verdict = classify(sig)
        if verdict.kind is not LimitKind.UNCONFIRMED:
            return verdict
        cached = self._fresh.get(sig.vendor)
        if cached is not None and time.monotonic() - cached[0] < FRESH_SECONDS:
            fresh: VendorQuota | None = cached[1]
        else:
            fresh = self.reprobe(sig.vendor)
            if fresh is not None:
                self._fresh[sig.vendor] = (time.monotonic(), fresh)
        if fresh is None:
            return LimitVerdict(
                LimitKind.UNCONFIRMED, "reprobe", "limit message, and the quota could not be re-read"
            )
        return classify(sig, fresh)

    def _confirm(self, verdict: LimitVerdict, source: str) -> None:
        self.confirmed = Confirmed(verdict, time.time(), time.monotonic(), source)
        self.publish()
        if source == "primary":
            with contextlib.suppress(IvoaiError, OSError):
                self.ledger.record_hard_limit(
                    HardLimit(
                        self.vendor, True, "supervisor", time.time(), verdict.resets_at, verdict.reason[:240]
                    )
                )
        with contextlib.suppress(IvoaiError, OSError):
            LaunchFuse(self.paths).trip(self.vendor, verdict.reason, until=verdict.resets_at)

    def _note(self, verdict: LimitVerdict, source: str) -> None:
        entry = {"vendor": self.vendor, "source": source, "at": time.time(), **verdict.to_dict()}
        self.verdicts = [*self.verdicts[-15:], entry]
        self.publish()

    def publish(self) -> None:
        """`<runtime>/supervisor.json`: the live verdicts, conversation and confirmed limit (monitor)."""
        doc = {
            "session_id": self.session_id,
            "vendor": self.vendor,
            "pid": self.pid,
            "verdicts": self.verdicts,
            "confirmed": None if self.confirmed is None else self.confirmed.to_dict(),
            "conversation": None if self.conversation is None else self.conversation.id,
        }
        with contextlib.suppress(OSError, ValueError):
            path = os.path.join(self.runtime_dir, SUPERVISOR_FILE)
            tmp = f"{path}.tmp-{os.getpid()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(doc, fh)
            os.replace(tmp, path)

    def _learn(self, conversation: Conversation | None) -> None:
        if conversation is not None and (
            self.conversation is None or self.conversation.id != conversation.id
        ):
            self.conversation = conversation
            self._publish_conversation()

    def _publish_conversation(self) -> None:
        """`auto/<session>.conversation.json`: what `ivoai session resume` reopens, kept past a crash."""
        assert self.conversation is not None
        doc = {
            "session_id": self.session_id,
            "vendor": self.conversation.vendor,
            "id": self.conversation.id,
            "transcript": self.conversation.transcript,
            "source": self.conversation.source,
        }
        with contextlib.suppress(IvoaiError, OSError):
            atomic_write(
                self.paths.state,
                self.paths.state / "auto" / f"{self.session_id}.conversation.json",
                (json.dumps(doc, sort_keys=True) + "\n").encode("utf-8"),
            )
