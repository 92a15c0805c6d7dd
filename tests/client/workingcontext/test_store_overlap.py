"""Large in-memory payloads are scanned while another thread writes them into an unnamed file."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

import ivoai.client.workingcontext._store_write as store_module
from ivoai.client.workingcontext import ArtifactRefusedError, ArtifactStore
from ivoai.client.workingcontext._secrets import scan_bytes
from ivoai.client.workingcontext._store import OVERLAP_MIN_BYTES

SESSION = "s-overlap"
LINE = b"2026-01-01 INFO task-7 compiled 12 modules; tokens used: 42 code=0\n"
BIG = LINE * (2 * OVERLAP_MIN_BYTES // len(LINE))
TOKEN = b"\nghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4\n"


def _stage_entries(root: Path) -> list[list[str]] | None:
    """The names inside each staging directory; None before `staging/` exists."""
    if not (root / "staging").exists():
        return None
    return [sorted(os.listdir(d)) for d in sorted((root / "staging").iterdir())]


@pytest.fixture
def seen_during_scan(monkeypatch: pytest.MonkeyPatch, store: ArtifactStore) -> list[list[list[str]] | None]:
    """What the staging directories hold at the moment the credential scan runs."""
    seen: list[list[list[str]] | None] = []

    def watching_scan(data: bytes) -> list[str]:
        seen.append(_stage_entries(store.root))
        return scan_bytes(data)

    monkeypatch.setattr(store_module, "scan_bytes", watching_scan)
    return seen


def _assert_stored_exactly(store: ArtifactStore, data: bytes | bytearray) -> None:
    ref = store.put(data, session_id=SESSION)
    assert ref.sha256 == hashlib.sha256(data).hexdigest()
    assert ref.size == len(data)
    _, back = store.read(ref.id, session_id=SESSION)
    assert back == data
    payload = store.root / "objects" / ref.id / "payload"
    assert stat.S_IMODE(payload.stat().st_mode) == 0o600
    assert _stage_entries(store.root) == []


def test_a_large_clean_payload_is_stored_exactly(
    store: ArtifactStore, seen_during_scan: list[list[list[str]] | None]
) -> None:
    _assert_stored_exactly(store, BIG)
    _assert_stored_exactly(store, bytearray(BIG + b"tail"))
    assert seen_during_scan == [[[]], [[]]]  # the copy being written had no name while it was scanned


def test_a_large_refused_payload_never_gets_a_name_and_leaves_nothing(
    store: ArtifactStore, seen_during_scan: list[list[list[str]] | None]
) -> None:
    with pytest.raises(ArtifactRefusedError, match="github_token"):
        store.put(BIG + TOKEN, session_id=SESSION)
    assert seen_during_scan == [[[]]]
    assert _stage_entries(store.root) == []
    assert list((store.root / "objects").iterdir()) == []


def test_a_payload_just_below_the_overlap_size_is_scanned_before_any_staging_exists(
    store: ArtifactStore, seen_during_scan: list[list[list[str]] | None]
) -> None:
    small = BIG[: OVERLAP_MIN_BYTES - 1]
    with pytest.raises(ArtifactRefusedError):
        store.put(small[: -len(TOKEN)] + TOKEN, session_id=SESSION)
    _assert_stored_exactly(store, small)
    assert seen_during_scan == [None, None]


def test_without_o_tmpfile_the_scan_runs_before_the_payload_is_written(
    monkeypatch: pytest.MonkeyPatch, store: ArtifactStore, seen_during_scan: list[list[list[str]] | None]
) -> None:
    # A filesystem without O_TMPFILE: this flag set is refused by open(2) on a directory.
    monkeypatch.setattr(os, "O_TMPFILE", os.O_DIRECTORY | os.O_CREAT)
    with pytest.raises(ArtifactRefusedError):
        store.put(BIG + TOKEN, session_id=SESSION)
    _assert_stored_exactly(store, BIG)
    assert seen_during_scan == [[[]], [[]]]


def test_without_proc_the_scanned_payload_is_written_under_its_name(
    monkeypatch: pytest.MonkeyPatch, store: ArtifactStore
) -> None:
    def no_proc(*_args: object, **_kwargs: object) -> None:
        raise FileNotFoundError("/proc/self/fd")

    monkeypatch.setattr(os, "link", no_proc)
    _assert_stored_exactly(store, BIG)
