"""memory_query reads candidates and snippets as packed JSON rows: nothing may change on the way."""

from __future__ import annotations

from ivoai.server.memory.service import MemoryService

TRICKY = 'Decision: quote "marks", back\\slash, tab\tend, “curly” ümlaut 漢字 and a {json: [1]} blob.'


def test_snippets_keep_quotes_backslashes_and_non_ascii_text_intact(service: MemoryService) -> None:
    service.memory_write_page("default", "default", "notes/tricky.md", TRICKY)
    hits = service.memory_query("decision blob", limit=5).hits
    assert [h.path for h in hits] == ["notes/tricky.md"]
    snippet = hits[0].snippet
    for part in ('"marks"', "back\\slash", "“curly”", "ümlaut", "漢字", "{json: [1]}"):
        assert part in snippet


def test_hit_timestamps_equal_the_stored_page_timestamps_exactly(service: MemoryService) -> None:
    for i in range(12):
        service.memory_write_page("default", "default", f"notes/n{i}.md", f"Decision {i} about caching.")
    hits = service.memory_query("caching decision", limit=12).hits
    assert len(hits) == 12
    for hit in hits:
        page = service.memory_read_page("default", "default", hit.path)
        assert hit.updated_at == page.updated_at


def test_every_lexical_match_is_ranked_once_with_a_snippet(service: MemoryService) -> None:
    for i in range(30):
        service.memory_write_page("default", "default", f"notes/p{i:02d}.md", f"Billing rule {i}: round up.")
    hits = service.memory_query("billing rule", limit=50).hits
    assert sorted(h.path for h in hits) == [f"notes/p{i:02d}.md" for i in range(30)]
    assert all("Billing" in h.snippet for h in hits)
