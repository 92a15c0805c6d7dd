"""`ivoai server memory …` through the real CLI entry point."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

from ivoai.server.memory import _schema
from tests.conftest import CliRunner, run_ivoai


def test_write_read_query_and_delete_through_the_cli(cli: CliRunner, tmp_path: Path) -> None:
    data = str(tmp_path / "srv")
    doc = tmp_path / "auth.md"
    doc.write_text("---\ntitle: Auth decision\ntags: [auth]\n---\n# Auth\nUse PKCE for web clients.\n")
    wrote = cli(
        "server",
        "--data-dir",
        data,
        "memory",
        "write",
        "decisions/auth",
        "--file",
        str(doc),
        "-p",
        "shop",
        "--json",
    )
    assert wrote.code == 0, wrote.err
    assert json.loads(wrote.out)["path"] == "decisions/auth.md"
    found = cli("server", "--data-dir", data, "memory", "query", "pkce", "-p", "shop", "--json")
    hits = json.loads(found.out)["hits"]
    assert [h["path"] for h in hits] == ["decisions/auth.md"] and hits[0]["title"] == "Auth decision"
    read = cli("server", "--data-dir", data, "memory", "read", "decisions/auth.md", "-p", "shop")
    assert read.code == 0 and read.out.startswith('---\ntitle: "Auth decision"\n')
    refused = cli(
        "server",
        "--data-dir",
        data,
        "memory",
        "delete",
        "decisions/auth.md",
        "-p",
        "shop",
        "--confirm",
        "decisions/other.md",
    )
    assert refused.code == 1 and "confirm must equal the normalized path" in refused.err
    assert "Traceback" not in refused.err
    deleted = cli(
        "server",
        "--data-dir",
        data,
        "memory",
        "delete",
        "decisions/auth.md",
        "-p",
        "shop",
        "--confirm",
        "decisions/auth.md",
    )
    assert deleted.code == 0 and "tombstone version 2" in deleted.out


def test_status_works_on_a_fresh_data_directory(cli: CliRunner, tmp_path: Path) -> None:
    result = cli("server", "--data-dir", str(tmp_path / "new"), "memory", "status", "--json")
    assert result.code == 0, result.err
    status = json.loads(result.out)
    assert (status["pages"], status["schema_name"]) == (0, _schema.LATEST.name)
    assert status["database"].endswith("memory/memory.sqlite3")


def test_bad_input_is_one_line_with_the_field_and_exit_one(cli: CliRunner, tmp_path: Path) -> None:
    data = str(tmp_path / "srv")
    assert cli("server", "--data-dir", data, "init").code == 0  # else the first command says it initialized
    traversal = cli("server", "--data-dir", data, "memory", "read", "../etc/passwd")
    assert traversal.code == 1 and traversal.err == "ivoai: error: path must not contain '..' components\n"
    name = cli("server", "--data-dir", data, "memory", "query", "x", "--workspace", "Bad")
    assert name.code == 1 and "workspace 'Bad' must match" in name.err
    missing = cli(
        "server", "--data-dir", data, "memory", "write", "a.md", "--file", str(tmp_path / "nope.md")
    )
    assert missing.code == 2 and "cannot read --file" in missing.err


def test_export_through_the_cli(cli: CliRunner, tmp_path: Path) -> None:
    data = str(tmp_path / "srv")
    doc = tmp_path / "n.md"
    doc.write_text("note body")
    assert (
        cli(
            "server",
            "--data-dir",
            data,
            "memory",
            "write",
            "notes/n",
            "--file",
            str(doc),
            "--tag",
            "x",
            "--pinned",
        ).code
        == 0
    )
    out = tmp_path / "exported"
    result = cli("server", "--data-dir", data, "memory", "export", str(out), "--json")
    assert result.code == 0 and json.loads(result.out)["pages"] == 1
    text = (out / "default" / "default" / "notes" / "n.md").read_text()
    assert 'tags: ["x"]\n' in text and "pinned: true\n" in text and text.endswith("---\nnote body")


def test_write_reads_standard_input_in_a_real_process(tmp_path: Path) -> None:
    data = str(tmp_path / "srv")
    done = run_ivoai(
        "server",
        "--data-dir",
        data,
        "memory",
        "write",
        "from-stdin",
        "--file",
        "-",
        input_text="# Piped\nbody with sk-ant-" + "k" * 30 + "\n",
    )
    assert done.returncode == 0, done.stderr
    assert "redacted before storing: anthropic_key" in done.stderr
    shown = run_ivoai("server", "--data-dir", data, "memory", "read", "from-stdin.md", "--json")
    page = json.loads(shown.stdout)
    assert page["title"] == "Piped" and "sk-ant-" not in page["body"]


def test_an_empty_body_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    data = tmp_path / "srv"
    frontmatter_only = tmp_path / "meta.md"
    frontmatter_only.write_text("---\ntitle: Only metadata\n---\n\n")
    for extra, stdin in (((), ""), (("--file", "-"), "  \n\n"), (("--file", str(frontmatter_only)), None)):
        args = ("server", "--data-dir", str(data), "memory", "write", "notes/x", *extra)
        refused = run_ivoai(*args, input_text=stdin)
        assert refused.returncode == 2, refused.stderr
        assert "refusing to write an empty page" in refused.stderr and "nothing was written" in refused.stderr
    assert not data.exists()  # refused before the data directory was even opened


def test_on_a_terminal_write_says_what_to_type_and_reads_until_end_of_input(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    data = str(tmp_path / "srv")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ivoai", "server", "--data-dir", data, "memory", "write", "typed"],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(slave)
    try:
        assert proc.stderr is not None
        prompt = b""
        while b"Ctrl-D" not in prompt:  # the prompt follows the data dir's initialization notice
            ready, _, _ = select.select([proc.stderr], [], [], 60.0)
            assert ready, f"no prompt within 60 s: {prompt!r}"
            chunk = os.read(proc.stderr.fileno(), 4096)
            assert chunk, f"ivoai ended without prompting: {prompt!r}"
            prompt += chunk
        assert b"type the page in Markdown" in prompt
        os.write(master, b"# Typed\nwritten at a terminal\n")
        os.write(master, b"\x04")  # Ctrl-D at the start of a line: end of input
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 0, err
    assert out == b"wrote default/default/typed.md version 1\n"


def test_an_oversized_input_file_is_refused_before_anything_is_stored(cli: CliRunner, tmp_path: Path) -> None:
    data = str(tmp_path / "srv")
    big = tmp_path / "big.md"
    big.write_bytes(b"x" * (2 * 1024 * 1024))
    result = cli("server", "--data-dir", data, "memory", "write", "big", "--file", str(big))
    assert result.code == 1 and "exceeds" in result.err
    status = cli("server", "--data-dir", data, "memory", "status", "--json")
    assert json.loads(status.out)["pages"] == 0


def test_hook_events_from_a_file_are_applied_once(cli: CliRunner, tmp_path: Path) -> None:
    data = str(tmp_path / "srv")
    events = tmp_path / "events.json"
    events.write_text(
        json.dumps(
            {
                "events": [
                    {
                        "idempotency_key": "e1",
                        "event": "user_prompt",
                        "session_id": "s1",
                        "agent": "codex",
                        "repo_root": "/home/dev/Shop",
                        "at": "2025-06-01T10:00:00Z",
                        "prompt": "add a cart",
                    },
                    {"idempotency_key": "e2", "event": "bogus", "session_id": "s1"},
                ]
            }
        )
    )
    first = cli("server", "--data-dir", data, "memory", "hook", "--file", str(events), "--json")
    assert first.code == 1  # one event was rejected
    result = json.loads(first.out)
    assert (result["applied"], result["rejected"]) == (1, 1)
    assert result["results"][0]["path"] == "sessions/2025-06-01/s1.md"
    again = cli("server", "--data-dir", data, "memory", "hook", "--file", str(events))
    assert "e1: duplicate" in again.out
    page = cli("server", "--data-dir", data, "memory", "read", "sessions/2025-06-01/s1.md", "-p", "shop")
    assert "1. add a cart" in page.out
