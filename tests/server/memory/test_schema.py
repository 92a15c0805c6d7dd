"""Schema migrations: ordered named steps; newer or foreign databases fail closed, untouched."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from ivoai.common.errors import UnsafePathError
from ivoai.server.datadir import ServerDataDir
from ivoai.server.memory import _schema
from ivoai.server.memory._db import DB_NAME
from ivoai.server.memory.errors import MemorySchemaError, MemoryStoreError
from ivoai.server.memory.service import MemoryService


def _db(data_dir: ServerDataDir) -> Path:
    return data_dir.memory / DB_NAME


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_steps_are_numbered_in_order_with_unique_names() -> None:
    assert [m.version for m in _schema.MIGRATIONS] == list(range(1, len(_schema.MIGRATIONS) + 1))
    assert len({m.name for m in _schema.MIGRATIONS}) == len(_schema.MIGRATIONS)


def test_a_fresh_database_records_every_step(service: MemoryService, data_dir: ServerDataDir) -> None:
    with sqlite3.connect(_db(data_dir)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _schema.LATEST.version
        names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY version")]
        assert names == [m.name for m in _schema.MIGRATIONS]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_an_old_database_is_upgraded_step_by_step_keeping_its_pages(data_dir: ServerDataDir) -> None:
    path = _db(data_dir)
    path.touch(mode=0o600)
    conn = sqlite3.connect(path, isolation_level=None)
    _schema.migrate(conn, upto=1)
    conn.execute(
        "INSERT INTO pages (workspace, project, path, version, title, tags, entities, kind, body, "
        "created_at, updated_at) "
        "VALUES ('w', 'p', 'old.md', 1, 'Old', '[]', '[]', 'note', 'from step one', 1.0, 1.0)"
    )
    conn.close()
    with MemoryService.open(data_dir) as svc:
        assert svc.memory_status().schema_version == _schema.LATEST.version
        page = svc.memory_read_page("w", "p", "old.md")
        assert (page.body, page.useful) == ("from step one", 0)
        assert [h.path for h in svc.memory_query("step", "w", "p").hits] == ["old.md"]


def test_a_database_from_a_newer_ivoai_fails_closed_and_is_left_untouched(data_dir: ServerDataDir) -> None:
    MemoryService.open(data_dir).close()
    path = _db(data_dir)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")  # so that even switching to WAL would show
    conn.execute(f"PRAGMA user_version = {_schema.LATEST.version + 1}")
    conn.close()
    before = _digest(path)
    with pytest.raises(MemorySchemaError, match="newer than this ivoai") as info:
        MemoryService.open(data_dir)
    assert info.value.code == "memory_schema_unsupported"
    assert _digest(path) == before
    assert not Path(f"{path}-wal").exists()


def test_a_database_with_a_different_history_is_refused(data_dir: ServerDataDir) -> None:
    MemoryService.open(data_dir).close()
    conn = sqlite3.connect(_db(data_dir))
    conn.execute("UPDATE schema_migrations SET name = 'something_else' WHERE version = 2")
    conn.commit()
    conn.close()
    with pytest.raises(MemorySchemaError, match="different history"):
        MemoryService.open(data_dir)


def test_a_file_that_is_not_a_database_is_a_clear_error(data_dir: ServerDataDir) -> None:
    path = _db(data_dir)
    path.write_bytes(b"this is not sqlite" * 100)
    path.chmod(0o600)
    with pytest.raises(MemoryStoreError, match="unusable"):
        MemoryService.open(data_dir)


def test_a_symlinked_database_file_is_refused(data_dir: ServerDataDir, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.sqlite3"
    target.touch(mode=0o600)
    os.symlink(target, _db(data_dir))
    with pytest.raises(UnsafePathError, match="symlink"):
        MemoryService.open(data_dir)


def test_a_database_readable_by_others_is_refused(data_dir: ServerDataDir) -> None:
    MemoryService.open(data_dir).close()
    _db(data_dir).chmod(0o644)
    with pytest.raises(UnsafePathError, match="0600"):
        MemoryService.open(data_dir)


def test_open_creates_the_memory_directory_on_a_fresh_data_dir(tmp_path: Path) -> None:
    with MemoryService.open(ServerDataDir(tmp_path / "fresh")) as svc:
        assert svc.memory_status().pages == 0
