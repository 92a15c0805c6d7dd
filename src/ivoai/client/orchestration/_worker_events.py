"""Incremental parsing of a worker's JSONL event stream (pure; one line at a time).

Codex (`codex exec --json`, public sources and seen here): `thread.started {thread_id}`,
`turn.started`, `turn.completed {usage: {input_tokens, cached_input_tokens, output_tokens, …}}`,
`turn.failed {error: {message}}`, `item.started|updated|completed {item}` with item types
`agent_message`, `reasoning`, `command_execution`, `file_change`, `mcp_tool_call`, `todo_list`,
`web_search`, `error` (an `error` item can be a mere warning, e.g. unknown model metadata), and a
top-level `error {message}`. A usage limit arrives as message text only.

Claude (`claude -p --output-format stream-json --verbose`): `system/init {model, tools,
mcp_servers}`, `assistant {message: {model, content, usage}}`, `user` (tool results),
`rate_limit_event {rate_limit_info}` (free quota data on every run for subscribers) and the final
`result {subtype, is_error, result, total_cost_usd, usage, modelUsage, num_turns,
permission_denials}`: success is judged by `is_error`, not `subtype`; `modelUsage` names the models
that actually ran.

The parser counts turns (Codex: turns plus tool calls; Claude: assistant messages) so the runner
can enforce the turn limit, keeps the final answer, usage, cost and models, and collects limit
signals for the classifier. It never trusts a line: anything malformed is counted and ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ivoai.client.orchestration._classify import LimitSignal
from ivoai.common.validate import is_int

CODEX_TOOL_ITEMS = frozenset({"command_execution", "mcp_tool_call", "web_search", "file_change"})
ERROR_TEXT_MAX_CHARS = 2000


@dataclass
class EventState:
    """What the stream said so far."""

    vendor: str
    turns: int = 0
    final_text: str | None = None
    is_error: bool | None = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    models: list[str] = field(default_factory=list)
    thread_id: str | None = None
    skills: list[str] = field(default_factory=list)  # attached at launch (issue 20), for the report
    file_changes: list[str] = field(default_factory=list)
    permission_denials: int = 0
    limit_signals: list[LimitSignal] = field(default_factory=list)
    rate_limit_infos: list[dict[str, Any]] = field(default_factory=list)
    malformed: int = 0
    finished: bool = False  # the stream's own end event arrived (result / turn.completed)

    def _error(self, text: Any) -> None:
        message = str(text)[:ERROR_TEXT_MAX_CHARS]
        if message and len(self.errors) < 16:
            self.errors.append(message)
        self.limit_signals.append(
            LimitSignal(self.vendor, "message", message, model=self.models[-1] if self.models else None)
        )

    def _add_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key, value in usage.items():
            if is_int(value):
                self.usage[key] = self.usage.get(key, 0) + value

    def feed(self, line: bytes) -> None:
        """Consume one line of the stream."""
        try:
            event = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            self.malformed += 1
            return
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            self.malformed += 1
            return
        (self._codex if self.vendor == "codex" else self._claude)(event)

    def _codex(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "thread.started":
            self.thread_id = str(event.get("thread_id", ""))[:128] or None
        elif kind == "turn.started":
            self.turns += 1
        elif kind == "turn.completed":
            self._add_usage(event.get("usage"))
            self.finished = True
            if self.is_error is None:
                self.is_error = False
        elif kind == "turn.failed":
            err = event.get("error")
            self._error(err.get("message") if isinstance(err, dict) else err)
            self.is_error = True
            self.finished = True
        elif kind == "error":
            self._error(event.get("message"))
            self.is_error = True
        elif kind.startswith("item."):
            self._codex_item(kind, event.get("item"))

    def _codex_item(self, kind: str, item: Any) -> None:
        if not isinstance(item, dict):
            return
        itype = item.get("type")
        if kind == "item.completed" and itype in CODEX_TOOL_ITEMS:
            self.turns += 1
        if itype == "agent_message" and kind == "item.completed" and isinstance(item.get("text"), str):
            self.final_text = item["text"]
        elif itype == "file_change" and kind == "item.completed":
            for change in item.get("changes") or []:
                if (
                    isinstance(change, dict)
                    and isinstance(change.get("path"), str)
                    and len(self.file_changes) < 64
                ):
                    self.file_changes.append(change["path"][:1000])
        elif itype == "error" and kind == "item.completed" and len(self.warnings) < 16:
            self.warnings.append(str(item.get("message", ""))[:ERROR_TEXT_MAX_CHARS])

    def _claude(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "system" and event.get("subtype") == "init":
            model = event.get("model")
            if isinstance(model, str) and model not in self.models:
                self.models.append(model[:128])
        elif kind == "assistant":
            self.turns += 1
            message = event.get("message")
            model = message.get("model") if isinstance(message, dict) else None
            if isinstance(model, str) and model not in self.models:
                self.models.append(model[:128])
        elif kind == "rate_limit_event":
            info = event.get("rate_limit_info")
            if isinstance(info, dict):
                self.rate_limit_infos.append(info)
                self.limit_signals.append(LimitSignal("claude", "rate_limit_event", info=info))
        elif kind == "result":
            self._claude_result(event)

    def _claude_result(self, event: dict[str, Any]) -> None:
        self.finished = True
        self.is_error = event.get("is_error") is True
        result = event.get("result")
        if isinstance(result, str):
            self.final_text = result
        if self.is_error:
            self._error(result if isinstance(result, str) else event.get("subtype", "error"))
            status = event.get("api_error_status")
            if isinstance(status, int):
                self.limit_signals.append(
                    LimitSignal("claude", "http_status", str(result)[:500], code=status)
                )
        cost = event.get("total_cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            self.cost_usd = float(cost)
        self._add_usage(event.get("usage"))
        model_usage = event.get("modelUsage")
        if isinstance(model_usage, dict):
            ran = [str(m)[:128] for m in model_usage]
            self.models = ran + [m for m in self.models if m not in ran]
        denials = event.get("permission_denials")
        if isinstance(denials, list):
            self.permission_denials = len(denials)
