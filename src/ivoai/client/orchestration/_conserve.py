"""Conservation: a fresh, authoritative window at or below `auto.conserve_threshold` % asks first.

AUTO.md: "any authoritative, fresh, non-context window with remaining <= 10 % asks the user before
routing on; the primary is never replaced silently". Two places route work:

- **the primary** (`ivoai auto`'s gate): *keep* starts the planner as asked; *conserve* starts the
  alternate instead (when it can run) so the low window is spared;
- **a worker** (`orchestration_plan`): *keep* lets ivoai's profile choice stand; *conserve*
  chooses profiles again without that vendor (a task with no other profile stays with the primary).

The user is asked where ivoai can ask: a terminal prompt for the gate, MCP elicitation for workers
(once per vendor and session). Where it cannot (no terminal, a client without elicitation, `--yes`
scripts), the safe default applies and is said: **keep**, i.e. nothing is switched. Windows that
count: account windows (not one model's), with a known used %, observed within the quota cache
TTL, from an authoritative source. Unknown quota never asks.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ivoai.client.orchestration._quota import VendorQuota

Choice = Literal["keep", "conserve"]


@dataclass(frozen=True)
class LowWindow:
    """A window at or below the threshold."""

    vendor: str
    kind: str
    remaining: float
    resets_at: float | None

    def describe(self) -> str:
        """`codex session window has 5 % left (resets 2026-12-01 14:00)`."""
        when = (
            "unknown"
            if self.resets_at is None
            else time.strftime("%Y-%m-%d %H:%M", time.localtime(self.resets_at))
        )
        return f"{self.vendor} {self.kind} window has {self.remaining:g} % left (resets {when})"


def low_windows(
    quota: VendorQuota, threshold: int, ttl_seconds: float, now: float | None = None
) -> list[LowWindow]:
    """The vendor's fresh, authoritative account windows with remaining <= `threshold` %."""
    now = time.time() if now is None else now
    out = []
    for w in quota.windows:
        if w.model is not None or not w.authoritative or w.remaining_percent is None:
            continue
        if w.is_stale(now, ttl_seconds) or w.expired(now):
            continue
        if w.remaining_percent <= threshold:
            out.append(LowWindow(w.vendor, w.kind, w.remaining_percent, w.resets_at))
    return sorted(out, key=lambda w: w.remaining)


@dataclass(frozen=True)
class Decision:
    """What was decided about a low window, and how (for the record and the messages)."""

    window: LowWindow
    choice: Choice
    asked: str  # terminal | elicitation | non_interactive | yes_flag | no_elicitation
    note: str

    def to_dict(self) -> dict[str, Any]:
        """Record form."""
        return {
            "vendor": self.window.vendor,
            "window": self.window.kind,
            "remaining": self.window.remaining,
            "resets_at": self.window.resets_at,
            "choice": self.choice,
            "asked": self.asked,
        }


def terminal_prompt(question: str) -> Choice | None:
    """Ask on the terminal (None when there is none: stdin and stderr must both be terminals)."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None
    for _ in range(3):
        sys.stderr.write(f"ivoai: {question} [k]eep / [c]onserve: ")
        sys.stderr.flush()
        answer = sys.stdin.readline().strip().lower()
        if answer in ("k", "keep"):
            return "keep"
        if answer in ("c", "conserve"):
            return "conserve"
    return "keep"


def decide_gate(
    window: LowWindow,
    alternate: str,
    alternate_ok: bool,
    ask: Callable[[str], Choice | None] = terminal_prompt,
) -> Decision:
    """The gate's decision for the planner's lowest window (asked on the terminal when there is one)."""
    if not alternate_ok:
        note = (
            f"conservation: {window.describe()}; the alternate {alternate} cannot run, "
            f"so {window.vendor} starts"
        )
        return Decision(window, "keep", "non_interactive", note)
    question = (
        f"{window.describe()}. Keep starting {window.vendor}, or conserve it and start {alternate} instead?"
    )
    answer = ask(question)
    if answer is None:
        note = (
            f"conservation: {window.describe()}; not a terminal, so the safe default applies: "
            f"{window.vendor} is kept and nothing was switched "
            f"(start `ivoai auto --planner {alternate}` to conserve it)"
        )
        return Decision(window, "keep", "non_interactive", note)
    if answer == "conserve":
        note = f"conservation: you chose to conserve {window.vendor}; starting {alternate} instead"
        return Decision(window, "conserve", "terminal", note)
    return Decision(window, "keep", "terminal", f"conservation: you chose to keep {window.vendor}")
