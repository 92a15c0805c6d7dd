"""The spool's bounds and crash tolerance, and the capture of host payloads (in process)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from ivoai.client.memoryhooks import capture, project, spool
from ivoai.client.memoryhooks.flusher import _records
from ivoai.common.errors import UnsafePathError
from ivoai.common.paths import XdgPaths


def _line(i: int, size: int = 100) -> bytes:
    event = {"idempotency_key": f"k{i}", "event": "stop", "session_id": "s", "message": "m" * size}
    return json.dumps({"v": 1, "dest": None, "event": event}).encode() + b"\n"


def test_spool_directories_are_0700_and_files_0600(xdg: XdgPaths) -> None:
    spool.append(str(xdg.state), _line(1))
    d = xdg.state / "memoryhooks" / "spool"
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE(d.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((d / spool.ACTIVE).stat().st_mode) == 0o600


def test_a_line_torn_by_a_killed_writer_is_ended_and_then_skipped(xdg: XdgPaths) -> None:
    spool.append(str(xdg.state), _line(1))
    active = xdg.state / "memoryhooks" / "spool" / spool.ACTIVE
    with active.open("ab") as fh:
        fh.write(_line(2)[:30])  # what SIGKILL during write(2) leaves
    spool.append(str(xdg.state), _line(3))
    records = _records(active.read_bytes(), 0)
    assert [r["event"]["idempotency_key"] if r else None for _end, r in records] == ["k1", None, "k3"]


def test_the_oldest_segments_are_evicted_first_and_counted(xdg: XdgPaths) -> None:
    root = str(xdg.state)
    for i in range(60):  # ~180 bytes each into 1 KiB segments, 4 KiB in all
        spool.append(root, _line(i), max_bytes=4096, segment_bytes=1024)
    fd = spool.open_spool(root)
    try:
        names = spool.segments(fd)
        kept = [r for n in [*names, spool.ACTIVE] for _e, r in _records(spool.read_segment(fd, n) or b"", 0)]
        evicted = spool.read_evictions(fd)
    finally:
        os.close(fd)
    keys = [int(r["event"]["idempotency_key"][1:]) for r in kept if r]
    assert keys == list(range(60 - len(keys), 60))  # a contiguous newest suffix survives
    assert evicted["events"] == 60 - len(keys) > 0
    assert spool.stats(root)["evicted_events"] == evicted["events"]
    assert int(str(spool.stats(root)["bytes"])) <= 4096


def test_a_symlinked_spool_directory_is_refused(xdg: XdgPaths, tmp_path: Path) -> None:
    (xdg.state / "memoryhooks").mkdir(parents=True, mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (xdg.state / "memoryhooks" / "spool").symlink_to(elsewhere)
    with pytest.raises(UnsafePathError):
        spool.append(str(xdg.state), _line(1))
    assert list(elsewhere.iterdir()) == []


def test_texts_lose_control_characters_and_lone_surrogates_and_are_bounded() -> None:
    assert capture.clean_text("a\x00b\x07c\x1b[0m\td\ne\x85", 100) == "abc[0m\td\ne"
    assert capture.clean_text("x\ud800y", 100) == "x?y"
    long = capture.clean_text("z" * 5000, 4000)
    assert long is not None and len(long) == 4000 and long.endswith("…[truncated]")
    assert capture.session_id_of("../evil id/☃", "fb") == "evil-id--"
    assert capture.session_id_of("", "fb") == "fb"


def test_touched_files_come_from_tool_arguments_and_codex_patches() -> None:
    patch = "*** Begin Patch\n*** Update File: src/a.py\n@@\n*** Add File: b.md\n*** End Patch\n"
    assert capture.files_of({"command": patch}) == ["src/a.py", "b.md"]
    assert capture.files_of({"file_path": "/r/x.py"}) == ["/r/x.py"]
    assert capture.files_of("not a dict") == []


def test_an_oversized_event_is_trimmed_under_the_server_bound() -> None:
    event = {
        "idempotency_key": "k",
        "event": "tool_use",
        "session_id": "s",
        "files": ["f" * 1024] * 50,
        "message": "☃" * 4000,
    }
    line = capture.encode_record(event, None)
    assert len(line) < 64 * 1024
    assert json.loads(line)["event"]["session_id"] == "s"


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=60,
        env={"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"},
    )


def test_subdirectories_and_linked_worktrees_resolve_to_the_main_repository(tmp_path: Path) -> None:
    main = tmp_path / "Shop_API"
    (main / "pkg" / "deep").mkdir(parents=True)
    _git("init", "-q", cwd=main)
    _git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x", cwd=main)
    _git("worktree", "add", "-q", str(tmp_path / "feature-wt"), cwd=main)
    common_main, root_main = project.discover(str(main / "pkg" / "deep"))
    common_wt, root_wt = project.discover(str(tmp_path / "feature-wt"))
    assert common_main == common_wt == str(main / ".git")
    assert (root_main, root_wt) == (str(main), str(tmp_path / "feature-wt"))
    assert project.discover(str(tmp_path)) == (None, None)


def test_wsl_and_windows_spellings_are_read_as_this_machines_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    assert project.native_path("\\\\wsl$\\Ubuntu\\home\\me\\shop") == "/home/me/shop"
    assert project.native_path("//wsl.localhost/Ubuntu/home/me/shop") == "/home/me/shop"
    monkeypatch.setattr(os.path, "isdir", lambda p: p == "/mnt/c")
    assert project.native_path("C:\\src\\shop\\api") == "/mnt/c/src/shop/api"
    assert project.native_path("c:/src/shop") == "/mnt/c/src/shop"


def test_an_offset_torn_mid_write_reads_as_zero_so_the_segment_is_resent(xdg: XdgPaths) -> None:
    spool.append(str(xdg.state), _line(1))
    fd = spool.open_spool(str(xdg.state))
    try:
        spool.set_offset(fd, "seg-x.ndjson", 4096)
        assert spool.read_offset(fd, "seg-x.ndjson") == 4096
        off = xdg.state / "memoryhooks" / "spool" / "seg-x.ndjson.off"
        off.write_bytes(b"00000000000000004096 000000000000000012")  # a write cut short
        assert spool.read_offset(fd, "seg-x.ndjson") == 0
    finally:
        os.close(fd)
