"""memory_query reads candidates and snippets as packed JSON rows: nothing may change on the way."""

from __future__ import annotations

import pytest

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


# ---- hits' fields and snippet texts in one packed row vs one statement per hit ----

AWKWARD_BODIES = [
    TRICKY,
    "tab\tnew\nline\r\ncarriage \x01\x1f control characters around caching",
    'JSON-looking {"a": "\\"b\\"", "c": [1, 2.5e300, null]} caching',
    "emoji 😀🧪 combining e\u0301 and RTL \u05d0\u05d1 caching " + "word " * 200,  # longer than the fallback
    "</script> %!.17g %s ? '' \"\" caching",
    "   leading   and   inner   whitespace   runs   caching   ",
]
AWKWARD_TIMES = [
    1_764_460_800.123456789,
    0.1,
    1 / 3,
    5e-324,
    999_999_999_999_999.9,  # just under the packed form's range
    1e15,  # at the limit: read row by row
    1.0627297642918568e297,  # SQLite's %!.17g does not round-trip this one
]


def _awkward_store(service: MemoryService, times: list[float]) -> list[int]:
    for i, body in enumerate(AWKWARD_BODIES * 4):
        service.memory_write_page(
            "default",
            "default" if i % 3 else "_global",
            f'notes/ü "q" {i}.md',
            body,
            {
                "title": f'Tïtle "{i}" \\ {body.split()[0]}',
                "tags": ['a"b', "ü", f"t{i}"],
                "pinned": i % 5 == 0,
            },
        )
    conn = service._db.get()
    ids = [int(r[0]) for r in conn.execute("SELECT id FROM pages ORDER BY id")]
    with service._db.write() as wconn:
        for k, pid in enumerate(ids):
            wconn.execute("UPDATE pages SET updated_at = ? WHERE id = ?", (times[k % len(times)], pid))
    return ids


def test_packed_hit_rows_equal_one_statement_per_hit(service: MemoryService) -> None:
    import random

    from ivoai.server.memory import _ranking
    from ivoai.server.memory._repository import hit_rows as _hit_rows
    from ivoai.server.memory._repository import hit_rows_by_row as _hit_rows_by_row

    rnd = random.Random(5)
    for times in ([1_764_460_800 + rnd.random() * 1e6 for _ in range(30)], AWKWARD_TIMES):
        ids = _awkward_store(service, times)
        compared = 0
        with service._db.read() as conn:
            for text in ("caching", "caching control json", "ü emoji", "nothing matches this", "!!!"):
                expression = _ranking.fts_match_expression(text)
                for _ in range(40):
                    wanted = rnd.sample(ids, rnd.randint(0, len(ids))) + [10_000_000]  # one unknown id
                    matched = [i for i in wanted if rnd.random() < 0.7]
                    packed = _hit_rows(conn, expression, wanted, matched)
                    by_row = _hit_rows_by_row(conn, expression, wanted, matched)
                    # by page id: the caller looks hits up by id, in its own ranked order
                    assert repr(sorted(packed.items())) == repr(sorted(by_row.items()))
                    compared += len(packed)
        assert compared > 1000


def test_query_results_are_identical_with_hits_read_one_statement_each(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ivoai.server.memory import _repository as module

    # datetime (the hits' updated_at) stops at year 9999: awkward times a hit can carry
    _awkward_store(service, [t for t in AWKWARD_TIMES if t < 2e11] + [253_402_300_799.0])
    queries = [
        "caching",
        "decision blob",
        "ü",
        "json null",
        "word",
        "tïtle",
        "t3 t7",
        "carriage control",
        "?",
    ]
    combos = [(q, lim, glob) for q in queries for lim in (1, 5, 50) for glob in (True, False)]
    packed = [
        service.memory_query(q, limit=lim, include_global=glob).model_dump_json() for q, lim, glob in combos
    ]
    monkeypatch.setattr(module, "hit_rows", module.hit_rows_by_row)
    by_row = [
        service.memory_query(q, limit=lim, include_global=glob).model_dump_json() for q, lim, glob in combos
    ]
    assert packed == by_row
    assert sum(p.count('"path"') for p in packed) > 150
