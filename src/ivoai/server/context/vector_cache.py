"""The content-hash vector cache: a passage's dense vector, keyed by what was embedded, kept across runs.

Identical chunk texts (a license header in every file, a document copied into two connectors, a chunk
that only moved when text above it changed, a whole index after `context rebuild`) are embedded once.

- Key: SHA-256 of (embedder name, "passage", the exact text given to the embedder). The entry also
  records the embedder name and the text length, and a lookup checks both, so a vector is never
  returned for a different text or by a different model.
- Value: the vector as float32 (what the index stores), so a cached vector is the one the index would
  have received.
- Bounded: at most `CONTEXT_VECTOR_CACHE_MAX_ENTRIES` entries; beyond that the least recently used
  ones are dropped (`used_at` is refreshed on every hit).
- Rebuildable: it lives in `DIR/index/` with the rest of the rebuildable state; deleting the file
  loses nothing but embedding time. One SQLite file (WAL), safe across threads and processes.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from array import array
from collections.abc import Sequence
from pathlib import Path

from ivoai.common import sqlite
from ivoai.common.limits import CONTEXT_VECTOR_CACHE_MAX_ENTRIES

CACHE_FILE = "vector-cache.sqlite3"
_BUSY_TIMEOUT_S = 10.0
_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors(
    key BLOB PRIMARY KEY, model TEXT NOT NULL, chars INTEGER NOT NULL, dims INTEGER NOT NULL,
    vec BLOB NOT NULL, used_at REAL NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS vectors_used ON vectors(used_at);
"""


def cache_key(model: str, text: str) -> bytes:
    """The cache key of one passage embedded by `model`."""
    return hashlib.sha256(f"{model}\x00passage\x00{text}".encode()).digest()


class VectorCache:
    """Passage vectors by content hash in `DIR/index/vector-cache.sqlite3` (thread-safe)."""

    def __init__(self, index_dir: Path, root: Path, *, max_entries: int = CONTEXT_VECTOR_CACHE_MAX_ENTRIES):
        self.path = sqlite.prepare_file(root, index_dir / CACHE_FILE)
        self.max_entries = max_entries
        self._approx_count: int | None = None  # rows as of our last count plus what we added since
        self._pool = sqlite.ConnectionPool(self.path, sqlite.Pragmas(busy_timeout_seconds=_BUSY_TIMEOUT_S))
        with self._pool.write() as db:
            sqlite.run_script(db, _SCHEMA)

    def _db(self) -> sqlite3.Connection:
        return self._pool.connection()

    def get_many(self, model: str, texts: Sequence[str]) -> dict[str, list[float]]:
        """The cached vectors of those `texts` that `model` embedded before (text -> vector)."""
        wanted = {cache_key(model, t): t for t in dict.fromkeys(texts)}
        found: dict[str, list[float]] = {}
        keys = list(wanted)
        db = self._db()
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            rows = db.execute(
                f"SELECT key, model, chars, vec FROM vectors WHERE key IN ({','.join('?' * len(part))})", part
            ).fetchall()
            for key, row_model, chars, blob in rows:
                text = wanted[bytes(key)]
                if row_model != model or chars != len(text):  # belt and braces over the hash
                    continue
                vec = array("f")
                vec.frombytes(blob)
                found[text] = vec.tolist()
        if found:
            with self._pool.write() as wdb:
                wdb.executemany(
                    "UPDATE vectors SET used_at=? WHERE key=?",
                    [(time.time(), cache_key(model, t)) for t in found],
                )
        return found

    def put_many(self, model: str, items: Sequence[tuple[str, Sequence[float]]]) -> None:
        """Store vectors `model` produced for these texts (one transaction), then keep the bound."""
        if not items:
            return
        now = time.time()
        with self._pool.write() as db:
            db.executemany(
                "INSERT OR REPLACE INTO vectors(key, model, chars, dims, vec, used_at) VALUES(?,?,?,?,?,?)",
                [
                    (cache_key(model, text), model, len(text), len(vec), array("f", vec).tobytes(), now)
                    for text, vec in items
                ],
            )
            approx = (self._approx_count or 0) + len(items)
            if self._approx_count is None or approx > self.max_entries:  # count(*) scans: only then
                approx = int(db.execute("SELECT count(*) FROM vectors").fetchone()[0])
                over = approx - self.max_entries
                if over > 0:  # drop the least recently used, plus a tenth of the bound so this runs rarely
                    approx -= db.execute(
                        "DELETE FROM vectors WHERE key IN (SELECT key FROM vectors ORDER BY used_at LIMIT ?)",
                        (over + self.max_entries // 10,),
                    ).rowcount
            self._approx_count = approx

    def count(self) -> int:
        """Number of cached vectors."""
        return int(self._db().execute("SELECT count(*) FROM vectors").fetchone()[0])

    def clear(self, model: str | None = None) -> int:
        """Drop every entry (or those of one model); returns how many were dropped."""
        self._approx_count = None
        with self._pool.write() as db:
            if model is None:
                return int(db.execute("DELETE FROM vectors").rowcount)
            return int(db.execute("DELETE FROM vectors WHERE model=?", (model,)).rowcount)

    def close(self) -> None:
        """Close every thread's connection (a later call opens new ones)."""
        self._pool.close()
