"""`ivoai knowledge status|search`: start a router for the call and show attributed, merged results."""

from __future__ import annotations

from typing import Any

import typer

from ivoai.cli._output import info, print_json, print_table

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Search enrolled knowledge sources through a per-call router.",
)

SOURCE_OPT = typer.Option(None, "--knowledge-source", help="Restrict to this source (repeatable).")


SNIPPET_CHARS = 100


def _rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The hits of one tool result, each with the source that gave it.

    A merged answer names the source on every item; a single source's answer is passed through
    unchanged with the source in `_meta`, so it is filled in from there.
    """
    structured = result.get("structuredContent") or {}
    meta = (result.get("_meta") or {}).get("ivoai/knowledge_source") or {}
    for key in ("results", "documents", "pages", "items", "hits"):
        items = structured.get(key)
        if isinstance(items, list):
            return [
                {**i, "knowledge_source": i.get("knowledge_source") or meta.get("source") or ""}
                for i in items
                if isinstance(i, dict)
            ]
    return []


def _title(item: dict[str, Any]) -> str:
    for key in ("title", "path", "document_id", "id"):
        if item.get(key):
            return str(item[key])
    return ""


def _snippet(item: dict[str, Any]) -> str:
    text = " ".join(str(item.get("snippet") or item.get("text") or "").split())
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"


@app.command("search")
def search_command(
    query: str = typer.Argument(..., help="What to look for."),
    sources: list[str] | None = SOURCE_OPT,
    limit: int = typer.Option(10, "--limit", min=1, max=100, help="Results per tool (1-100)."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Federated memory and context search with per-source attribution.

    Exits 1 when no source answered (each source's cause is printed).
    """
    from ivoai.cli._context import client_context
    from ivoai.client.knowledge.client import answered, failures, for_output, search

    result = search(query, limit=limit, selectors=sources or (), paths=client_context().paths)
    if json_out:
        print_json(for_output(result))
    else:
        for tool in ("memory_query", "context_search"):
            if tool not in result:
                continue
            res = result[tool]
            rows = _rows(res)
            partial = (res.get("structuredContent") or {}).get("partial")
            info(f"{tool}: {len(rows)} result(s){' (partial: a source did not answer)' if partial else ''}")
            if rows:
                print_table(
                    tool,
                    ["source", "score", "title", "snippet"],
                    [[r["knowledge_source"], r.get("score", ""), _title(r), _snippet(r)] for r in rows],
                )
            lead = "no source answered" if res.get("isError") else "did not answer"
            for line in failures(res):
                info(f"{tool}: {lead}: {line}")
    if not answered(result):
        raise typer.Exit(1)


@app.command("status")
def status_command(
    sources: list[str] | None = SOURCE_OPT,
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Every selected source, its kinds and live health through a router."""
    from ivoai.cli._context import client_context
    from ivoai.client.knowledge.client import status

    result = status(selectors=sources or (), paths=client_context().paths)
    if json_out:
        print_json(result)
        return
    listing = result.get("knowledge_status") or {}
    rows = []
    for source in listing.get("sources", []):
        members = ", ".join(f"{m['alias']}(p{m['priority']})" for m in source["members"])
        rows.append([source["id"], source["purpose"], ",".join(source["kinds"]), members])
    print_table("knowledge sources", ["source", "purpose", "kinds", "members"], rows)
    for tool in ("memory_status", "context_health"):
        if tool in result:
            res = result[tool]
            structured = res.get("structuredContent") or {}
            for entry in structured.get("sources", []):
                info(
                    f"{tool} {entry['source']}: {entry['status']}"
                    + (f" ({entry['error']})" if entry.get("error") else "")
                )
            if "sources" not in structured:
                meta = (res.get("_meta") or {}).get("ivoai/knowledge_source") or {}
                info(f"{tool} {meta.get('source', '?')}: {'error' if res.get('isError') else 'ok'}")
