"""Catalog.resolve_chunks reads each batch as one packed JSON row: nothing may change on the way.

Every comparison is against `resolve_chunks_by_row` (one SQLite row per chunk, the former code) on
a real catalog file, by `repr`, so text, integers, float bits, types and order must all match.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivoai.server.context.catalog import Catalog, ChunkRow, DocumentRecord

AWKWARD_TEXTS = [
    "quote \"marks\" and 'single' ones",
    "back\\slash \\\\ double and \\u0041 not an escape",
    "tab\tnew\nline\r\ncarriage \x01\x1f control",
    "nul \x00 inside",
    "“curly” ümlaut 漢字 emoji 😀🧪 combining é",
    '{"json": [1, 2.5e300, null], "nested": "\\"x\\""}',
    "</script><!-- -->&amp; %!.17g %s ?",
    "",
]
AWKWARD_TIMES = [
    1_764_460_800.123456789,
    1_764_460_800.0,
    0.0,
    -0.0,
    0.1,
    1 / 3,
    5e-324,
    2.2250738585072014e-308,
    -1_764_460_800.987654321,
    999_999_999_999_999.9,  # just under the packed form's range
    1e15,  # at the limit: read row by row
    1.0627297642918568e297,  # SQLite's %!.17g does not round-trip this one
    1.7976931348623157e308,
]


def _catalog(tmp_path: Path) -> Catalog:
    root = tmp_path / "srv"
    root.mkdir(mode=0o700)
    return Catalog(root / "context", root)


def _fill(cat: Catalog, rnd: random.Random, connector: str, docs: int) -> list[str]:
    """Documents with awkward bodies and paths, split into overlapping chunks; returns chunk IDs."""
    cat.add_connector(connector, "filesystem", f"/tmp/{connector}")
    records = []
    ids: list[str] = []
    for d in range(docs):
        body = "".join(rnd.choice(AWKWARD_TEXTS) + f" part {k} " for k in range(rnd.randint(1, 12)))
        chunks = []
        start = 0
        for k in range(rnd.randint(1, 6)):
            end = min(len(body), start + rnd.randint(0, 60))
            cid = f"{connector}-{d}-{k}"
            chunks.append(ChunkRow(cid, k, start, end))
            ids.append(cid)
            start = max(0, end - rnd.randint(0, 10))
        records.append(
            DocumentRecord(
                document_id=f"{connector}-doc-{d}",
                connector=connector,
                path=f'dir "q"/ü\\{d}.md',
                size=len(body.encode("utf-8")),
                content_hash=f"h{d}",
                mtime=rnd.random() * 2e9,
                body=body,
                chunks=tuple(chunks),
                metadata={},
            )
        )
    assert cat.commit_documents(connector, records) is not None
    return ids


def _set_times(cat: Catalog, connector: str, times: list[float]) -> None:
    with cat.tx() as db:
        rows = db.execute(
            "SELECT document_id FROM documents WHERE connector=? ORDER BY document_id", (connector,)
        )
        for i, (did,) in enumerate(rows.fetchall()):
            db.execute("UPDATE documents SET updated_at=? WHERE document_id=?", (times[i % len(times)], did))


def test_packed_chunks_equal_row_by_row_over_many_id_sets(tmp_path: Path) -> None:
    rnd = random.Random(6)
    cat = _catalog(tmp_path)
    try:
        ids = _fill(cat, rnd, "alpha", 40) + _fill(cat, rnd, "beta", 10)
        gone = _fill(cat, rnd, "gamma", 5)
        cat.mark_removing("gamma")  # inactive connectors stay invisible either way
        # Ordinary server timestamps, then timestamps of every awkward magnitude.
        for times in ([1_764_460_800 + rnd.random() * 1e6 for _ in range(50)], AWKWARD_TIMES):
            _set_times(cat, "alpha", times)
            _set_times(cat, "beta", list(reversed(times)))
            compared = 0
            for _ in range(150):
                wanted = rnd.sample(ids, rnd.randint(0, min(len(ids), 120)))
                wanted += rnd.sample(gone, 2) + ["no-such-chunk", "'; DROP TABLE chunks; --"]
                rnd.shuffle(wanted)
                packed = cat.resolve_chunks(wanted)
                by_row = cat.resolve_chunks_by_row(wanted)
                assert repr(packed) == repr(by_row)
                assert all(type(h.updated_at) is float for h in packed.values())
                compared += len(packed)
            assert compared > 3000
            assert not set(packed) & set(gone)
    finally:
        cat.close()


def test_more_ids_than_one_batch_are_all_resolved_in_order(tmp_path: Path) -> None:
    rnd = random.Random(7)
    cat = _catalog(tmp_path)
    try:
        ids = _fill(cat, rnd, "big", 260)
        assert len(ids) > 500  # more than one batch of 500
        rnd.shuffle(ids)
        packed = cat.resolve_chunks(ids)
        assert repr(packed) == repr(cat.resolve_chunks_by_row(ids))
        assert set(packed) == set(ids)
    finally:
        cat.close()


def test_a_timestamp_the_packed_form_cannot_carry_is_still_returned_exactly(tmp_path: Path) -> None:
    cat = _catalog(tmp_path)
    try:
        ids = _fill(cat, random.Random(8), "odd", 3)
        _set_times(cat, "odd", [1.0627297642918568e297])
        hits = cat.resolve_chunks(ids)
        assert {h.updated_at for h in hits.values()} == {1.0627297642918568e297}
    finally:
        cat.close()


@pytest.fixture(scope="module")
def shared_catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return _catalog(tmp_path_factory.mktemp("packing"))


@settings(max_examples=60, deadline=None)
@given(
    body=st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=200),
    bits=st.integers(min_value=0, max_value=2**64 - 1),
)
def test_any_text_and_any_finite_timestamp_survive_packing(
    shared_catalog: Catalog, body: str, bits: int
) -> None:
    stamp = struct.unpack("<d", struct.pack("<Q", bits))[0]
    if stamp != stamp or stamp in (float("inf"), float("-inf")):
        stamp = 1.5
    cat = shared_catalog
    if not cat.connectors():
        cat.add_connector("hyp", "filesystem", "/tmp/hyp")
    record = DocumentRecord(
        "hyp-doc", "hyp", "p.md", 1, "h", 0.0, body, (ChunkRow("hyp-c", 0, 0, len(body)),), {}
    )
    assert cat.commit_documents("hyp", [record]) is not None
    _set_times(cat, "hyp", [stamp])
    packed = cat.resolve_chunks(["hyp-c"])
    assert repr(packed) == repr(cat.resolve_chunks_by_row(["hyp-c"]))
    if "\x00" not in body:  # SQLite's substr() stops at a NUL, packed or not (ingestion stores none)
        assert packed["hyp-c"].text == body
