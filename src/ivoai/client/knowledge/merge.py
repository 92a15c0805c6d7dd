"""Deterministic merge of federated tool results, with per-source attribution and a `partial` flag.

Pure functions over plain dicts (the JSON form of MCP `CallToolResult`), so the same inputs always
give byte-identical output regardless of which upstream answered first. The merged result is one
conformant MCP result: `structuredContent` carries the merge, and a single text block carries the
same object as JSON for clients that read only text.

Merge rule: when every answering source returned structured content with the same list-valued key
(`results`, `documents`, `pages`, `items` or `hits`), the lists are merged into one `results` list
whose items gain a `knowledge_source` field. If every item has a numeric `score`, items are ordered
by score (descending), then by source ID, then by upstream rank; otherwise they are interleaved by
rank (first of each source in source-ID order, then second, ...). A `limit` argument caps the
merged list. Anything else is kept per source under `by_source`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ivoai.common.jsonio import dumps

LIST_KEYS = ("results", "documents", "pages", "items", "hits")
ATTRIBUTION_KEY = "knowledge_source"
META_SOURCE_KEY = "ivoai/knowledge_source"

OutcomeStatus = Literal["ok", "error", "not_found", "timeout", "unavailable", "breaker_open"]


@dataclass(frozen=True)
class SourceOutcome:
    """What one logical source gave for one call."""

    source_id: str
    alias: str
    status: OutcomeStatus
    served_by: str | None = None  # alias of the replica that answered
    result: Mapping[str, Any] | None = None  # CallToolResult as JSON (by alias)
    error: str | None = None

    @property
    def answered(self) -> bool:
        return self.status == "ok" and self.result is not None


def _text_of(result: Mapping[str, Any]) -> str:
    parts = [str(c.get("text", "")) for c in result.get("content", []) or [] if c.get("type") == "text"]
    return "\n".join(p for p in parts if p)


def structured_of(result: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """`structuredContent`, or the object a lone JSON text block carries (servers that return only text)."""
    structured = result.get("structuredContent")
    if isinstance(structured, Mapping):
        return structured
    blocks = [
        c for c in result.get("content", []) or [] if isinstance(c, Mapping) and c.get("type") == "text"
    ]
    if len(blocks) == 1:
        try:
            parsed = json.loads(str(blocks[0].get("text", "")))
        except ValueError:
            return None
        if isinstance(parsed, dict):
            return parsed
    return None


def _is_not_found(result: Mapping[str, Any]) -> bool:
    """A tool error saying the item does not exist at that source (ivoai errors read `<code>: …`)."""
    return bool(result.get("isError")) and _text_of(result).startswith("not_found")


def _list_key(structured: Sequence[Mapping[str, Any]]) -> str | None:
    if not structured:
        return None
    for key in LIST_KEYS:
        if all(isinstance(s.get(key), list) for s in structured):
            return key
    return None


def _score(item: Any) -> float | None:
    if isinstance(item, Mapping):
        value = item.get("score")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def merge_results(outcomes: Sequence[SourceOutcome], *, limit: int | None = None) -> dict[str, Any]:
    """Merge per-source outcomes into one CallToolResult (JSON form)."""
    ordered = sorted(outcomes, key=lambda o: o.source_id)
    answered = [o for o in ordered if o.answered and not (o.result or {}).get("isError")]
    # "Not found here" is a complete answer from that source, not a gap in the federation.
    absent = [o for o in ordered if o.answered and _is_not_found(o.result or {})]
    partial = len(answered) + len(absent) != len(ordered)
    summary: list[dict[str, Any]] = []
    for o in ordered:
        entry: dict[str, Any] = {"source": o.source_id, "alias": o.alias, "status": o.status}
        if o.served_by is not None:
            entry["served_by"] = o.served_by
        if o.result is not None and _is_not_found(o.result):
            entry["status"] = "not_found"
        elif o.result is not None and o.result.get("isError"):
            entry["status"] = "error"
            entry["error"] = _text_of(o.result)[:500] or "the tool reported an error"
        elif o.error:
            entry["error"] = o.error
        summary.append(entry)

    structured_by_source: dict[str, Mapping[str, Any]] = {}
    for o in answered:
        structured = structured_of(o.result or {})
        if structured is not None:
            structured_by_source[o.source_id] = structured
    merged: dict[str, Any] = {"partial": partial, "sources": summary}
    key = (
        _list_key(list(structured_by_source.values())) if len(structured_by_source) == len(answered) else None
    )
    if answered and key is not None:
        ranked: list[tuple[int, str, int, Any]] = []
        for index, o in enumerate(answered):
            for rank, item in enumerate(structured_by_source[o.source_id][key]):
                ranked.append((index, o.source_id, rank, item))
        scores = [_score(item) for *_, item in ranked]
        if ranked and all(s is not None for s in scores):
            order = sorted(
                range(len(ranked)), key=lambda i: (-(scores[i] or 0.0), ranked[i][1], ranked[i][2])
            )
        else:
            order = sorted(range(len(ranked)), key=lambda i: (ranked[i][2], ranked[i][1]))
        items: list[Any] = []
        for i in order:
            _, sid, _, item = ranked[i]
            items.append(
                {**item, ATTRIBUTION_KEY: sid}
                if isinstance(item, Mapping)
                else {"value": item, ATTRIBUTION_KEY: sid}
            )
        if limit is not None and limit >= 0:
            items = items[:limit]
        merged["results"] = items
        extras = {
            sid: {k: v for k, v in s.items() if k != key}
            for sid, s in structured_by_source.items()
            if any(k != key for k in s)
        }
        if extras:
            merged["by_source"] = extras
    else:
        by_source: dict[str, Any] = {}
        for o in answered:
            assert o.result is not None
            found = structured_by_source.get(o.source_id)
            by_source[o.source_id] = found if found is not None else {"text": _text_of(o.result)}
        merged["by_source"] = by_source
    return {
        "content": [{"type": "text", "text": dumps(merged)}],
        "structuredContent": merged,
        "isError": not answered,
    }


def attribute_single(outcome: SourceOutcome) -> dict[str, Any]:
    """A single authoritative answer, passed through unchanged except for attribution in `_meta`."""
    assert outcome.result is not None
    result = dict(outcome.result)
    meta = dict(result.get("_meta") or {})
    meta[META_SOURCE_KEY] = {"source": outcome.source_id, "served_by": outcome.served_by}
    result["_meta"] = meta
    return result


def error_result(message: str, **details: Any) -> dict[str, Any]:
    """A tool-level error result (isError) with a readable message and structured details."""
    body = {"error": message, **details}
    return {"content": [{"type": "text", "text": message}], "structuredContent": body, "isError": True}
