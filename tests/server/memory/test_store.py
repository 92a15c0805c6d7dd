"""Writing, reading, versioning, deleting and feedback on real SQLite files."""

from __future__ import annotations

import os
import stat
import threading
from datetime import UTC, datetime, timedelta

import pytest

from ivoai.common.errors import ConflictError, NotFoundError, TooLargeError, ValidationError
from ivoai.common.limits import MEMORY_BODY_MAX_BYTES
from ivoai.server.datadir import ServerDataDir
from ivoai.server.memory import _schema
from ivoai.server.memory.errors import (
    MemoryClosedError,
    MemoryConfirmError,
    MemoryConflictError,
    MemoryNotFoundError,
)
from ivoai.server.memory.service import MemoryService

API_KEY = "sk-ant-api03-" + "Zx9" * 12


def test_a_written_page_reads_back_with_its_frontmatter(service: MemoryService) -> None:
    result = service.memory_write_page(
        "default",
        "proj",
        "decisions/auth",
        "# Auth\nWe use PKCE.\n",
        {"tags": ["auth"], "entities": ["oauth"], "pinned": True, "kind": "decision"},
    )
    assert (result.path, result.version, result.created) == ("decisions/auth.md", 1, True)
    page = service.memory_read_page("default", "proj", "decisions/auth.md")
    assert page.body == "# Auth\nWe use PKCE.\n"
    assert (page.title, page.tags, page.entities, page.pinned, page.kind) == (
        "Auth",
        ["auth"],
        ["oauth"],
        True,
        "decision",
    )
    assert page.label == "stored_memory" and "not instructions" in page.notice


def test_each_write_supersedes_and_keeps_the_history(service: MemoryService) -> None:
    for i in range(1, 4):
        assert service.memory_write_page("w", "p", "a.md", f"body {i}").version == i
    assert service.memory_read_page("w", "p", "a.md").body == "body 3"
    old = service.memory_read_page("w", "p", "a.md", version=1)
    assert (old.body, old.version, old.latest_version) == ("body 1", 1, 3)
    assert service.memory_status().versions == 3


def test_writing_without_frontmatter_keeps_the_metadata(service: MemoryService) -> None:
    service.memory_write_page("w", "p", "a.md", "one", {"title": "Kept", "tags": ["x"], "pinned": True})
    service.memory_write_page("w", "p", "a.md", "two")
    page = service.memory_read_page("w", "p", "a.md")
    assert (page.title, page.tags, page.pinned, page.body) == ("Kept", ["x"], True, "two")


def test_a_two_mib_body_is_refused_naming_the_limit(service: MemoryService) -> None:
    with pytest.raises(TooLargeError, match=f"limit is {MEMORY_BODY_MAX_BYTES} bytes") as info:
        service.memory_write_page("w", "p", "big.md", "x" * (2 * 1024 * 1024))
    assert info.value.code == "memory_too_large"
    assert service.memory_status().pages == 0


def test_a_body_exactly_at_the_limit_is_accepted(service: MemoryService) -> None:
    assert service.memory_write_page("w", "p", "edge.md", "é" * (MEMORY_BODY_MAX_BYTES // 2)).version == 1


@pytest.mark.parametrize(
    ("frontmatter", "field"),
    [
        ({"entities": [f"e{i}" for i in range(11)]}, "entities"),
        ({"title": "t" * 201}, "title"),
        ({"kind": "Not A Kind"}, "kind"),
        ({"colour": "red"}, "colour"),
        ({"tags": ["bad\ttag"]}, "tags.0"),
    ],
)
def test_bad_frontmatter_is_refused_naming_the_field(
    service: MemoryService, frontmatter: dict[str, object], field: str
) -> None:
    with pytest.raises(ValidationError, match=f"frontmatter field '{field}'"):
        service.memory_write_page("w", "p", "a.md", "body", frontmatter)


def test_a_stale_expected_version_is_a_conflict_never_a_lost_update(service: MemoryService) -> None:
    service.memory_write_page("w", "p", "a.md", "v1")
    service.memory_write_page("w", "p", "a.md", "v2", expected_version=1)
    with pytest.raises(ConflictError, match="expected version 1, but it is version 2") as info:
        service.memory_write_page("w", "p", "a.md", "lost?", expected_version=1)
    assert info.value.code == "memory_version_conflict"
    assert service.memory_read_page("w", "p", "a.md").body == "v2"


def test_expected_version_zero_means_create_only(service: MemoryService) -> None:
    assert service.memory_write_page("w", "p", "a.md", "first", expected_version=0).created
    with pytest.raises(MemoryConflictError):
        service.memory_write_page("w", "p", "a.md", "second", expected_version=0)


def test_two_threads_racing_with_the_same_expected_version_leave_exactly_one_winner(
    service: MemoryService,
) -> None:
    service.memory_write_page("w", "p", "race.md", "base")
    writers = 8
    barrier = threading.Barrier(writers)
    outcomes: list[str] = []
    lock = threading.Lock()

    def write(i: int) -> None:
        barrier.wait(timeout=10)
        try:
            service.memory_write_page("w", "p", "race.md", f"writer {i}", expected_version=1)
            outcome = f"won {i}"
        except MemoryConflictError:
            outcome = "conflict"
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    winners = [o for o in outcomes if o.startswith("won")]
    assert len(winners) == 1 and outcomes.count("conflict") == writers - 1
    page = service.memory_read_page("w", "p", "race.md")
    assert (page.version, page.body) == (2, "writer " + winners[0].split()[1])


def test_delete_requires_the_normalized_path_as_confirmation(service: MemoryService) -> None:
    service.memory_write_page("w", "p", "notes/x", "body")
    with pytest.raises(MemoryConfirmError, match="'notes/x.md'"):
        service.memory_delete_page("w", "p", "notes/x", confirm="notes/x")
    assert service.memory_read_page("w", "p", "notes/x.md").body == "body"


def test_delete_leaves_a_tombstone_and_the_history(service: MemoryService) -> None:
    service.memory_write_page("w", "p", "a.md", "v1")
    deleted = service.memory_delete_page("w", "p", "a.md", confirm="a.md")
    assert deleted.version == 2
    with pytest.raises(MemoryNotFoundError, match="deleted"):
        service.memory_read_page("w", "p", "a.md")
    assert service.memory_read_page("w", "p", "a.md", version=1).body == "v1"
    assert service.memory_query("v1", "w", "p").hits == []
    with pytest.raises(NotFoundError):
        service.memory_delete_page("w", "p", "a.md", confirm="a.md")
    again = service.memory_write_page("w", "p", "a.md", "reborn")
    assert (again.version, again.created) == (3, True)
    status = service.memory_status()
    assert (status.pages, status.deleted_pages, status.versions) == (1, 0, 3)


def test_feedback_counts_votes_and_redacts_the_note(service: MemoryService) -> None:
    service.memory_write_page("w", "p", "a.md", "body")
    service.memory_feedback("w", "p", "a.md", True)
    result = service.memory_feedback("w", "p", "a.md", False, note=f"leaked {API_KEY}")
    assert (result.useful, result.not_useful) == (1, 1)
    conn = service._db.get()
    notes = [row[0] for row in conn.execute("SELECT note FROM page_feedback WHERE note IS NOT NULL")]
    assert notes == ["leaked [REDACTED]"]
    with pytest.raises(MemoryNotFoundError):
        service.memory_feedback("w", "p", "missing.md", True)


def test_an_api_key_in_a_page_is_redacted_before_it_is_stored(
    service: MemoryService, data_dir: ServerDataDir
) -> None:
    result = service.memory_write_page("w", "p", "a.md", f"deploy with {API_KEY} please")
    assert "anthropic_key" in result.redacted
    assert "[REDACTED]" in service.memory_read_page("w", "p", "a.md").body
    service.close()
    for name in os.listdir(data_dir.memory):
        assert API_KEY.encode() not in (data_dir.memory / name).read_bytes()


def test_expired_pages_leave_queries_and_recent_but_stay_readable(service: MemoryService) -> None:
    past = datetime.now(UTC) - timedelta(days=1)
    service.memory_write_page("w", "p", "old.md", "temporary rollout flag", {"expires_at": past.isoformat()})
    service.memory_write_page("w", "p", "live.md", "permanent rollout plan")
    assert [h.path for h in service.memory_query("rollout", "w", "p").hits] == ["live.md"]
    assert [s.path for s in service.memory_recent("w", "p", 10).pages] == ["live.md"]
    assert service.memory_read_page("w", "p", "old.md").expired is True


def test_recent_lists_one_scope_newest_first_without_bodies(service: MemoryService) -> None:
    for name in ("a", "b", "c"):
        service.memory_write_page("w", "p", name, f"body {name}")
    service.memory_write_page("w", "other", "z", "elsewhere")
    result = service.memory_recent("w", "p", 2)
    assert [p.path for p in result.pages] == ["c.md", "b.md"]
    assert "body" not in result.pages[0].model_dump()
    with pytest.raises(ValidationError, match="1 to 100"):
        service.memory_recent("w", "p", 101)


def test_status_reports_counts_schema_and_last_write(service: MemoryService) -> None:
    empty = service.memory_status()
    assert (empty.pages, empty.last_write_at, empty.schema_version) == (0, None, _schema.LATEST.version)
    service.memory_write_page("w", "p", "a.md", "x")
    service.memory_write_page("w", "_global", "b.md", "y")
    status = service.memory_status()
    assert (status.pages, status.scopes, status.schema_name) == (2, 2, _schema.LATEST.name)
    assert status.database_bytes > 0 and status.last_write_at is not None


def test_the_database_file_and_directory_are_private(service: MemoryService, data_dir: ServerDataDir) -> None:
    service.memory_write_page("w", "p", "a.md", "x")
    assert stat.S_IMODE(os.stat(data_dir.memory).st_mode) == 0o700
    for name in os.listdir(data_dir.memory):
        assert stat.S_IMODE(os.stat(data_dir.memory / name).st_mode) == 0o600, name


def test_a_closed_service_refuses_calls(service: MemoryService) -> None:
    service.close()
    with pytest.raises(MemoryClosedError):
        service.memory_status()


def test_many_threads_reading_and_writing_see_no_errors(service: MemoryService) -> None:
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(15):
                service.memory_write_page("w", "p", f"t{i}/n{j}", f"thread {i} note {j} shared words")
                service.memory_query("shared words", "w", "p", limit=5)
                service.memory_recent("w", "p", 5)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert service.memory_status().pages == 90


def test_a_writer_blocked_past_the_busy_timeout_gets_a_busy_error_and_recovers(
    data_dir: ServerDataDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from ivoai.server.memory import _db
    from ivoai.server.memory.errors import MemoryBusyError

    monkeypatch.setattr(_db, "MEMORY_SQLITE_BUSY_TIMEOUT_SECONDS", 0.05)
    with MemoryService.open(data_dir) as svc:
        holder = sqlite3.connect(data_dir.memory / _db.DB_NAME, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(MemoryBusyError, match="locked") as info:
            svc.memory_write_page("w", "p", "a.md", "blocked")
        assert info.value.code == "memory_busy"
        holder.execute("ROLLBACK")
        holder.close()
        assert svc.memory_write_page("w", "p", "a.md", "after").version == 1
