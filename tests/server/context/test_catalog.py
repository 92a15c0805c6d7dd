"""The catalog file: created private, upgraded by `common.sqlite`'s runner, refused when newer than code."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from ivoai.server.context.catalog import CATALOG_FILE, MIGRATIONS, Catalog
from ivoai.server.context.errors import CatalogSchemaError


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "srv"
    root.mkdir(mode=0o700)
    return root


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_new_catalog_records_every_step_and_is_private(tmp_path: Path) -> None:
    root = _root(tmp_path)
    cat = Catalog(root / "context", root)
    cat.add_connector("docs", "filesystem", "/tmp/docs")
    cat.close()
    path = root / "context" / CATALOG_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == MIGRATIONS.latest.version == 2
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_catalog_of_the_first_schema_is_upgraded_keeping_its_connectors(tmp_path: Path) -> None:
    root = _root(tmp_path)
    (root / "context").mkdir(mode=0o700)
    path = root / "context" / CATALOG_FILE
    path.touch(mode=0o600)
    conn = sqlite3.connect(path, isolation_level=None)
    MIGRATIONS.migrate(conn, upto=1)
    conn.execute(
        "INSERT INTO connectors(name, type, path, created_at) VALUES('old', 'filesystem', '/x', 1.0)"
    )
    conn.close()
    cat = Catalog(root / "context", root)
    assert [c.name for c in cat.connectors()] == ["old"]
    assert cat.coverage().total == 0  # the second step's `dense` column exists
    cat.close()


def test_a_catalog_from_a_newer_ivoai_is_refused_naming_the_version_and_left_untouched(
    tmp_path: Path,
) -> None:
    root = _root(tmp_path)
    Catalog(root / "context", root).close()
    path = root / "context" / CATALOG_FILE
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")  # so that even switching to WAL would show
    conn.execute(f"PRAGMA user_version = {MIGRATIONS.latest.version + 1}")
    conn.close()
    before = _digest(path)
    with pytest.raises(CatalogSchemaError) as info:
        Catalog(root / "context", root)
    assert info.value.code == "catalog_schema_unsupported"
    assert str(info.value) == (
        "context catalog schema version 3 is newer than this ivoai supports (2); "
        "upgrade ivoai (the catalog was left untouched)"
    )
    assert _digest(path) == before
    assert not Path(f"{path}-wal").exists()
