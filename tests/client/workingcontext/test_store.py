"""ArtifactStore in one process: writes, revalidating reads, limits, quotas, TTL, GC and bad input."""

from __future__ import annotations

import hashlib
import io
import os
import stat
from pathlib import Path

import pytest

from ivoai.client.workingcontext import (
    ArtifactCorruptError,
    ArtifactExpiredError,
    ArtifactNotFoundError,
    ArtifactQuotaError,
    ArtifactRangeError,
    ArtifactRefusedError,
    ArtifactState,
    ArtifactStore,
    ArtifactUnsafeError,
    InvalidArtifactIdError,
    Sensitivity,
    StoreUnavailableError,
)
from ivoai.common.errors import ValidationError
from ivoai.common.limits import (
    ARTIFACT_MAX_BYTES,
    ARTIFACT_RANGE_MAX_BYTES,
    ARTIFACT_TTL_DEFAULT_SECONDS,
    ARTIFACT_TTL_MAX_SECONDS,
)
from tests.client.workingcontext.conftest import Clock

SESSION = "sess-1"


def _obj(store: ArtifactStore, art_id: str) -> Path:
    return store.root / "objects" / art_id


def _all_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != ".lock")


def test_put_then_read_returns_the_exact_bytes_and_a_ref_without_path_or_content(
    store: ArtifactStore,
) -> None:
    data = bytes(range(256)) * 10
    ref = store.put(
        data, session_id=SESSION, task_id="t1", worker_id="w1", media_type="Text/Plain; Charset=UTF-8"
    )
    assert ref.size == ref.original_size == len(data)
    assert ref.sha256 == hashlib.sha256(data).hexdigest()
    assert ref.media_type == "text/plain; charset=utf-8"
    assert ref.state is ArtifactState.COMPLETE
    assert (ref.session_id, ref.task_id, ref.worker_id) == (SESSION, "t1", "w1")
    assert str(store.root) not in ref.model_dump_json()
    got_ref, got = store.read(ref.id, session_id=SESSION)
    assert got == data and got_ref == ref


def test_store_directories_are_0700_and_files_0600(store: ArtifactStore) -> None:
    ref = store.put(b"x", session_id=SESSION)
    obj = _obj(store, ref.id)
    for d in (store.root, store.root / "objects", store.root / "staging", obj):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    for f in (obj / "payload", obj / "meta.json"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600


def test_identical_output_from_two_calls_gets_two_distinct_refs(store: ArtifactStore) -> None:
    a = store.put(b"same", session_id=SESSION)
    b = store.put(b"same", session_id=SESSION)
    assert a.id != b.id and a.sha256 == b.sha256
    assert {r.id for r in store.list(session_id=SESSION).refs} == {a.id, b.id}


def test_output_over_16_mib_keeps_the_first_16_mib_marked_truncated_with_original_size(
    store: ArtifactStore,
) -> None:
    data = b"abcdefgh" * (ARTIFACT_MAX_BYTES // 8) + b"tail!"
    ref = store.put(io.BytesIO(data), session_id=SESSION, payload_type="log")
    assert ref.state is ArtifactState.TRUNCATED
    assert (ref.size, ref.original_size) == (ARTIFACT_MAX_BYTES, len(data))
    _ref, got = store.read(ref.id, session_id=SESSION)
    assert got == data[:ARTIFACT_MAX_BYTES]


def test_default_ttl_is_24_hours_and_over_7_days_is_refused(store: ArtifactStore) -> None:
    ref = store.put(b"x", session_id=SESSION)
    assert (ref.expires_at - ref.created_at).total_seconds() == ARTIFACT_TTL_DEFAULT_SECONDS
    week = store.put(b"x", session_id=SESSION, ttl_seconds=ARTIFACT_TTL_MAX_SECONDS)
    assert (week.expires_at - week.created_at).total_seconds() == ARTIFACT_TTL_MAX_SECONDS
    for bad in (ARTIFACT_TTL_MAX_SECONDS + 1, 0, -5):
        with pytest.raises(ValidationError, match="ttl_seconds.*604800"):
            store.put(b"x", session_id=SESSION, ttl_seconds=bad)


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("session_id", {"session_id": "../escape"}),
        ("session_id", {"session_id": ""}),
        ("task_id", {"session_id": SESSION, "task_id": "a/b"}),
        ("worker_id", {"session_id": SESSION, "worker_id": "x" * 200}),
        ("media_type", {"session_id": SESSION, "media_type": "not a media type"}),
        ("payload_type", {"session_id": SESSION, "payload_type": "Bad-Type!"}),
        ("sensitivity", {"session_id": SESSION, "sensitivity": "top-secret"}),
    ],
)
def test_invalid_put_arguments_name_the_field_and_store_nothing(
    store: ArtifactStore, field: str, kwargs: dict[str, str]
) -> None:
    with pytest.raises(ValidationError, match=field):
        store.put(b"data", **kwargs)  # type: ignore[arg-type]
    assert not store.root.exists() or _all_files(store.root) == []


@pytest.mark.parametrize("level", [Sensitivity.SECRET, Sensitivity.CREDENTIAL, Sensitivity.RAW_AUTH])
def test_declared_secret_credential_or_raw_auth_content_is_refused(
    store: ArtifactStore, level: Sensitivity
) -> None:
    with pytest.raises(ArtifactRefusedError, match=level.value):
        store.put(b"harmless", session_id=SESSION, sensitivity=level)


@pytest.mark.parametrize(
    "payload",
    [
        b'log line\npassword: "hunter2hunter2hunter2hunter2"\n',
        b"Authorization: Bearer abcdefghijklmnop1234\n",
        b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n",
        b"export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz012345\n",
    ],
)
def test_credential_looking_payload_is_refused_and_nothing_is_left_on_disk(
    store: ArtifactStore, payload: bytes
) -> None:
    store.put(b"unrelated", session_id=SESSION)
    before = _all_files(store.root)
    with pytest.raises(ArtifactRefusedError, match="credential"):
        store.put(payload, session_id=SESSION)
    with pytest.raises(ArtifactRefusedError):
        store.put(io.BytesIO(b"x" * 200_000 + payload + b"y" * 200_000), session_id=SESSION)
    assert _all_files(store.root) == before
    assert list((store.root / "staging").iterdir()) == []
    assert len(store.list().refs) == 1


def test_a_large_payload_with_a_credential_in_the_middle_is_refused(store: ArtifactStore) -> None:
    body = b"2026-01-01 INFO task-7 compiled 12 modules; tokens used: 42 code=0\n" * 40_000
    token = b"ghp_" + b"A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    with pytest.raises(ArtifactRefusedError, match="github_token"):
        store.put(body + token + b"\n" + body, session_id=SESSION)
    assert store.list().refs == ()


# ----------------------------------------------------------------------------- reads and bad IDs


@pytest.mark.parametrize(
    "bad_id",
    [
        "../x",
        "/etc/passwd",
        "art_../../etc",
        "art_" + "0" * 31,
        "art_" + "0" * 31 + "g",
        "ART_" + "0" * 32,
        "art_" + "0" * 32 + "/payload",
        "",
    ],
)
def test_ids_that_are_not_strict_artifact_ids_are_rejected_before_any_file_access(
    store: ArtifactStore, bad_id: str
) -> None:
    with pytest.raises(InvalidArtifactIdError, match="art_ followed by 32 hex"):
        store.read(bad_id, session_id=SESSION)
    with pytest.raises(InvalidArtifactIdError):
        store.read_range(bad_id, session_id=SESSION, offset=0, length=1)
    with pytest.raises(InvalidArtifactIdError):
        store.describe(bad_id)


def test_another_sessions_artifact_reads_as_not_found(store: ArtifactStore) -> None:
    ref = store.put(b"private to sess-1", session_id=SESSION)
    with pytest.raises(ArtifactNotFoundError) as info:
        store.read(ref.id, session_id="sess-2")
    with pytest.raises(ArtifactNotFoundError):
        store.read_range(ref.id, session_id="sess-2", offset=0, length=4)
    missing = "art_" + "0" * 32
    with pytest.raises(ArtifactNotFoundError) as missing_info:
        store.read(missing, session_id="sess-2")
    # The same answer as an ID that does not exist: no cross-session existence probe.
    assert info.value.message.replace(ref.id, "X") == missing_info.value.message.replace(missing, "X")


def test_expired_ref_is_refused_on_read_and_range_read(store: ArtifactStore, clock: Clock) -> None:
    ref = store.put(b"old evidence", session_id=SESSION, ttl_seconds=60)
    assert store.read(ref.id, session_id=SESSION)[1] == b"old evidence"
    clock.now += 60
    with pytest.raises(ArtifactExpiredError, match="expired"):
        store.read(ref.id, session_id=SESSION)
    with pytest.raises(ArtifactExpiredError):
        store.read_range(ref.id, session_id=SESSION, offset=0, length=3)


def test_tampered_bytes_fail_the_sha256_check_and_the_file_is_kept(store: ArtifactStore) -> None:
    ref = store.put(b"exact evidence", session_id=SESSION)
    payload = _obj(store, ref.id) / "payload"
    payload.write_bytes(b"EXACT evidence")  # same size, different bytes
    with pytest.raises(ArtifactCorruptError, match="SHA-256"):
        store.read(ref.id, session_id=SESSION)
    with pytest.raises(ArtifactCorruptError, match="SHA-256"):
        store.read_range(ref.id, session_id=SESSION, offset=0, length=5)
    assert payload.read_bytes() == b"EXACT evidence"


def test_tampering_after_a_verified_range_read_is_still_detected(store: ArtifactStore) -> None:
    ref = store.put(b"0123456789", session_id=SESSION)
    assert store.read_range(ref.id, session_id=SESSION, offset=2, length=3).data == b"234"
    payload = _obj(store, ref.id) / "payload"
    with payload.open("r+b") as f:  # rewrite in place: same inode, new ctime
        f.write(b"X")
    with pytest.raises(ArtifactCorruptError):
        store.read_range(ref.id, session_id=SESSION, offset=2, length=3)


def test_truncated_or_grown_payload_is_reported_as_corrupt(store: ArtifactStore) -> None:
    ref = store.put(b"0123456789", session_id=SESSION)
    (_obj(store, ref.id) / "payload").write_bytes(b"01234")
    with pytest.raises(ArtifactCorruptError, match="5 bytes on disk but 10 recorded"):
        store.read(ref.id, session_id=SESSION)


def test_edited_metadata_is_corrupt_not_trusted(store: ArtifactStore) -> None:
    ref = store.put(b"data", session_id=SESSION)
    meta = _obj(store, ref.id) / "meta.json"
    meta.write_text(meta.read_text().replace('"size": 4', '"size": 999999999'))
    with pytest.raises(ArtifactCorruptError, match="metadata"):
        store.read(ref.id, session_id=SESSION)


def test_a_symlink_planted_as_an_object_directory_is_refused(store: ArtifactStore, tmp_path: Path) -> None:
    ref = store.put(b"real", session_id=SESSION)
    decoy = tmp_path / "decoy"
    decoy.mkdir(mode=0o700)
    (decoy / "payload").write_bytes(b"decoy")
    (decoy / "meta.json").write_bytes((_obj(store, ref.id) / "meta.json").read_bytes())
    planted = "art_" + "a" * 32
    (store.root / "objects" / planted).symlink_to(decoy)
    with pytest.raises(ArtifactUnsafeError, match="symlink"):
        store.read(planted, session_id=SESSION)
    listing = store.list()
    assert [p.name for p in listing.problems] == [planted]
    assert [r.id for r in listing.refs] == [ref.id]


def test_a_symlink_planted_as_a_payload_is_never_followed(store: ArtifactStore, tmp_path: Path) -> None:
    ref = store.put(b"real", session_id=SESSION)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"real")  # even with identical bytes
    payload = _obj(store, ref.id) / "payload"
    payload.unlink()
    payload.symlink_to(outside)
    with pytest.raises(ArtifactUnsafeError, match="symlink"):
        store.read(ref.id, session_id=SESSION)
    with pytest.raises(ArtifactUnsafeError):
        store.read_range(ref.id, session_id=SESSION, offset=0, length=1)


def test_a_symlinked_objects_directory_makes_the_store_unavailable(
    store: ArtifactStore, tmp_path: Path
) -> None:
    ref = store.put(b"real", session_id=SESSION)
    objects = store.root / "objects"
    moved = tmp_path / "moved-objects"
    objects.rename(moved)
    objects.symlink_to(moved)
    with pytest.raises(StoreUnavailableError, match="symlink"):
        store.read(ref.id, session_id=SESSION)
    with pytest.raises(StoreUnavailableError):
        store.put(b"more", session_id=SESSION)


def test_a_group_readable_payload_is_refused(store: ArtifactStore) -> None:
    ref = store.put(b"real", session_id=SESSION)
    os.chmod(_obj(store, ref.id) / "payload", 0o640)
    with pytest.raises(ArtifactUnsafeError, match="0640"):
        store.read(ref.id, session_id=SESSION)


# ----------------------------------------------------------------------------- ranges


def test_range_read_returns_the_bytes_and_shortens_at_the_end(store: ArtifactStore) -> None:
    data = bytes(range(200))
    ref = store.put(data, session_id=SESSION)
    r = store.read_range(ref.id, session_id=SESSION, offset=10, length=20)
    assert (r.offset, r.data, r.eof) == (10, data[10:30], False)
    end = store.read_range(ref.id, session_id=SESSION, offset=190, length=50)
    assert (end.data, end.eof) == (data[190:], True)


def test_range_read_of_the_full_1_mib_limit_works(store: ArtifactStore) -> None:
    data = os.urandom(ARTIFACT_RANGE_MAX_BYTES + 10)
    ref = store.put(data, session_id=SESSION)
    r = store.read_range(ref.id, session_id=SESSION, offset=5, length=ARTIFACT_RANGE_MAX_BYTES)
    assert r.data == data[5 : 5 + ARTIFACT_RANGE_MAX_BYTES]


@pytest.mark.parametrize(
    ("offset", "length", "match"),
    [
        (200, 1, "beyond the end"),
        (10_000, 1, "beyond the end"),
        (0, ARTIFACT_RANGE_MAX_BYTES + 1, "1048576"),
        (0, 0, "1048576"),
        (-1, 10, "offset"),
    ],
)
def test_ranges_beyond_the_end_or_over_1_mib_are_refused(
    store: ArtifactStore, offset: int, length: int, match: str
) -> None:
    ref = store.put(bytes(200), session_id=SESSION)
    with pytest.raises(ArtifactRangeError, match=match):
        store.read_range(ref.id, session_id=SESSION, offset=offset, length=length)


# ----------------------------------------------------------------------------- quotas


def test_session_object_quota_is_an_explicit_error(small_store: ArtifactStore) -> None:
    for _ in range(4):
        small_store.put(b"x", session_id=SESSION)
    with pytest.raises(ArtifactQuotaError, match="per-session limit is 4 objects"):
        small_store.put(b"x", session_id=SESSION)
    assert len(small_store.list(session_id=SESSION).refs) == 4
    assert list((small_store.root / "staging").iterdir()) == []


def test_session_byte_quota_is_an_explicit_error(small_store: ArtifactStore) -> None:
    small_store.put(b"a" * 1000, session_id=SESSION)
    small_store.put(b"a" * 1000, session_id=SESSION)
    small_store.put(b"a" * 999, session_id=SESSION)
    with pytest.raises(ArtifactQuotaError, match="per-session limit is 3000 bytes"):
        small_store.put(b"ab", session_id=SESSION)
    small_store.put(b"a", session_id=SESSION)  # exactly at the limit is allowed
    assert small_store.stats().sessions[SESSION].bytes == 3000


def test_global_quotas_are_explicit_errors(small_store: ArtifactStore) -> None:
    small_store.put(b"a" * 1000, session_id="s1")
    small_store.put(b"a" * 1000, session_id="s1")
    small_store.put(b"a" * 1000, session_id="s2")
    small_store.put(b"a" * 1000, session_id="s2")
    small_store.put(b"a" * 1000, session_id="s3")
    with pytest.raises(ArtifactQuotaError, match="global limit is 5000 bytes"):
        small_store.put(b"a", session_id="s3")
    small_store.gc()  # nothing expired: nothing freed
    assert small_store.stats().bytes == 5000


def test_global_object_quota_is_an_explicit_error(small_store: ArtifactStore) -> None:
    for i in range(6):
        small_store.put(b"x", session_id=f"s{i}")
    with pytest.raises(ArtifactQuotaError, match="global limit is 6 objects"):
        small_store.put(b"x", session_id="s9")


def test_per_artifact_limit_applies_to_small_limits_too(small_store: ArtifactStore) -> None:
    ref = small_store.put(b"z" * 1500, session_id=SESSION)
    assert (ref.size, ref.original_size, ref.state) == (1000, 1500, ArtifactState.TRUNCATED)


# ----------------------------------------------------------------------------- list, stats, gc


def test_gc_removes_only_expired_objects(store: ArtifactStore, clock: Clock) -> None:
    short = store.put(b"short", session_id=SESSION, ttl_seconds=10)
    long = store.put(b"long", session_id=SESSION, ttl_seconds=1000)
    clock.now += 10
    dry = store.gc(dry_run=True)
    assert (dry.removed, dry.removed_bytes) == ([short.id], 5)
    assert _obj(store, short.id).exists()
    report = store.gc()
    assert report.removed == [short.id]
    assert not _obj(store, short.id).exists()
    assert [r.id for r in store.list().refs] == [long.id]


def test_gc_keeps_and_reports_corrupt_and_unknown_entries(store: ArtifactStore, clock: Clock) -> None:
    tampered = store.put(b"evidence", session_id=SESSION, ttl_seconds=10)
    bad_meta = store.put(b"evidence", session_id=SESSION, ttl_seconds=10)
    (_obj(store, tampered.id) / "payload").write_bytes(b"EVIDENCE")
    (_obj(store, bad_meta.id) / "meta.json").write_text("{not json")
    (store.root / "objects" / "notes.txt").write_text("mine")
    (store.root / "stray").mkdir(mode=0o700)
    clock.now += 3600
    report = store.gc()
    assert report.removed == []
    kept = {p.name: p.code for p in report.kept}
    assert kept == {
        tampered.id: "artifact_corrupt",
        bad_meta.id: "artifact_corrupt",
        "notes.txt": "unknown_entry",
        "stray": "unknown_entry",
    }
    assert (_obj(store, tampered.id) / "payload").exists()
    assert (store.root / "objects" / "notes.txt").exists()
    # stats() checks metadata, modes and sizes but does not hash: the SHA mismatch is gc's and read's.
    assert {p.name for p in store.stats().problems} == set(kept) - {tampered.id}


def test_gc_keeps_an_expired_object_that_holds_unexpected_files(store: ArtifactStore, clock: Clock) -> None:
    ref = store.put(b"x", session_id=SESSION, ttl_seconds=10)
    (_obj(store, ref.id) / "extra").write_bytes(b"?")
    clock.now += 10
    report = store.gc()
    assert report.removed == []
    assert (_obj(store, ref.id) / "extra").exists()


def test_gc_on_a_store_that_was_never_created_does_nothing(store: ArtifactStore) -> None:
    report = store.gc()
    assert (report.removed, report.kept) == ([], [])
    assert not store.root.exists()


def test_list_filters_by_session_and_stats_counts_usage(store: ArtifactStore, clock: Clock) -> None:
    a = store.put(b"aaa", session_id="s1")
    clock.now += 1
    b = store.put(b"bbbb", session_id="s2", ttl_seconds=5)
    assert [r.id for r in store.list().refs] == [a.id, b.id]
    assert [r.id for r in store.list(session_id="s2").refs] == [b.id]
    clock.now += 5
    stats = store.stats()
    assert (stats.objects, stats.bytes, stats.expired) == (2, 7, 1)
    assert stats.sessions["s1"].bytes == 3 and stats.sessions["s2"].expired == 1
    d = stats.to_dict()
    assert d["limits"]["session_max_objects"] == 256  # type: ignore[index]
