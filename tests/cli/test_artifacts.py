"""`ivoai artifacts` end to end on a fresh home: put, list, show, read (exact bytes), gc, stats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ivoai.common.paths import XdgPaths
from tests.conftest import CliRunner

BIN = bytes(range(256)) * 4 + b"\x00\xff end"


def _put(cli: CliRunner, path: Path, *extra: str) -> dict[str, object]:
    r = cli("artifacts", "put", "--session", "s1", *extra, str(path))
    assert r.code == 0, r.err
    ref: dict[str, object] = json.loads(r.out)
    return ref


def _ivoai_bytes(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ivoai", *args], input=stdin, capture_output=True, timeout=120, check=False,
        env=dict(os.environ),
    )  # fmt: skip


def test_put_and_read_round_trip_exact_bytes_through_real_processes(xdg: XdgPaths) -> None:
    put = _ivoai_bytes(
        "artifacts", "put", "--session", "s1", "--type", "application/octet-stream", "-", stdin=BIN
    )
    assert put.returncode == 0, put.stderr
    ref = json.loads(put.stdout)
    assert ref["size"] == len(BIN) and ref["state"] == "complete" and "path" not in ref
    read = _ivoai_bytes("artifacts", "read", ref["id"], "--session", "s1")
    assert (read.returncode, read.stdout) == (0, BIN)
    part = _ivoai_bytes("artifacts", "read", ref["id"], "--session", "s1", "--offset", "10", "--length", "5")
    assert part.stdout == BIN[10:15]
    other = _ivoai_bytes("artifacts", "read", ref["id"], "--session", "s2")
    assert other.returncode == 1 and other.stdout == b""
    assert (
        other.stderr.decode().startswith("ivoai: error: artifact art_")
        and "Traceback" not in other.stderr.decode()
    )


def test_put_from_a_file_with_owners_then_list_show_and_stats(cli: CliRunner, tmp_path: Path) -> None:
    src = tmp_path / "out.log"
    src.write_bytes(b"build ok\n")
    ref = _put(cli, src, "--task", "t1", "--worker", "w1", "--type", "text/plain", "--kind", "log")
    assert (ref["task_id"], ref["worker_id"], ref["payload_type"]) == ("t1", "w1", "log")
    listed = json.loads(cli("artifacts", "list", "--json").out)
    assert [a["id"] for a in listed["artifacts"]] == [ref["id"]] and listed["problems"] == []
    assert json.loads(cli("artifacts", "list", "--session", "other", "--json").out)["artifacts"] == []
    plain = cli("artifacts", "list")
    assert str(ref["id"]) in plain.out and "build ok" not in plain.out
    shown = json.loads(cli("artifacts", "show", str(ref["id"]), "--json").out)
    assert shown == ref
    stats = json.loads(cli("artifacts", "stats", "--json").out)
    assert (stats["objects"], stats["bytes"], stats["sessions"]["s1"]["objects"]) == (1, 9, 1)
    assert stats["limits"]["artifact_max_bytes"] == 16 * 1024 * 1024
    assert "s1" in cli("artifacts", "stats").out


def test_gc_dry_run_and_json_report(cli: CliRunner, tmp_path: Path) -> None:
    src = tmp_path / "a"
    src.write_bytes(b"x")
    _put(cli, src)
    r = cli("artifacts", "gc", "--dry-run", "--json")
    report = json.loads(r.out)
    assert r.code == 0 and report["dry_run"] is True and report["removed"] == []
    assert "removed artifacts: 0" in cli("artifacts", "gc").out


def test_bad_input_gives_one_line_errors_without_tracebacks(cli: CliRunner, tmp_path: Path) -> None:
    src = tmp_path / "a"
    src.write_bytes(b"data")
    ref = _put(cli, src)
    cases = [
        (("artifacts", "read", "../x", "--session", "s1"), "art_ followed by 32 hex"),
        (("artifacts", "show", "/etc/passwd"), "art_ followed by 32 hex"),
        (
            ("artifacts", "read", str(ref["id"]), "--session", "s1", "--offset", "99", "--length", "1"),
            "beyond the end",
        ),
        (
            ("artifacts", "read", str(ref["id"]), "--session", "s1", "--offset", "0", "--length", "2000000"),
            "1048576",
        ),
        (("artifacts", "read", str(ref["id"]), "--session", "s1", "--offset", "1"), "--length"),
        (("artifacts", "put", "--session", "s1", "--ttl", "9999999", str(src)), "604800"),
        (("artifacts", "put", "--session", "../s", str(src)), "session_id"),
        (("artifacts", "put", "--session", "s1", str(tmp_path / "missing")), "does not exist"),
        (("artifacts", "put", "--session", "s1", str(tmp_path)), "is a directory"),
        (("artifacts", "show", "art_" + "0" * 32), "not found"),
    ]
    for args, message in cases:
        r = cli(*args)
        assert r.code in (1, 2), args
        assert message in r.err and "Traceback" not in r.err, (args, r.err)
        assert r.err.count("\n") == 1


def test_a_credential_file_is_refused_and_nothing_is_stored(
    cli: CliRunner, tmp_path: Path, xdg: XdgPaths
) -> None:
    src = tmp_path / "env"
    src.write_bytes(b"GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123\n")
    r = cli("artifacts", "put", "--session", "s1", str(src))
    assert r.code == 1 and "credential" in r.err and "ghp_" not in r.err
    objects = xdg.working_context_dir / "objects"
    assert not objects.exists() or list(objects.iterdir()) == []
