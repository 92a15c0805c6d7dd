"""Checkpoints, the bounded work-tree summary and the handoff brief: limits, refusals, no file changed."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from ivoai.client.orchestration._checkpoint import (
    CheckpointBody,
    CheckpointRefusedError,
    checkpoint_path,
    parse_body,
    read_checkpoint,
    write_checkpoint,
)
from ivoai.client.orchestration._handoff import HandoffContext, build_brief
from ivoai.client.orchestration._worktree import summarize_worktree
from ivoai.common.limits import AUTO_CHECKPOINT_MAX_BYTES, AUTO_HANDOFF_BRIEF_MAX_BYTES
from ivoai.common.paths import XdgPaths
from tests.client.orchestration.workers import git_tree

CHAIN = "ses_" + "e" * 32
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _tree_fingerprint(repo: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under the repository (.git included): size, mtime and content."""
    out = {}
    for dirpath, _, names in os.walk(repo):
        for name in names:
            path = Path(dirpath) / name
            st = path.stat()
            out[str(path.relative_to(repo))] = (st.st_size, st.st_mtime_ns, path.read_bytes())
    return out


def test_a_checkpoint_is_stored_private_atomic_and_numbered(xdg: XdgPaths) -> None:
    body = parse_body(
        {"objective": "Fix the parser", "decisions": ["keep the API"], "changed_files": ["parser.py"],
         "next_step": "run the tests", "refs": ["art_" + "0" * 32]}
    )  # fmt: skip
    first = write_checkpoint(CHAIN, body, source="primary", session_id=CHAIN, vendor="codex", paths=xdg)
    second = write_checkpoint(CHAIN, body, source="supervisor", session_id=CHAIN, vendor="claude", paths=xdg)
    assert (first.seq, second.seq) == (1, 2)
    path = checkpoint_path(CHAIN, xdg)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    stored = read_checkpoint(CHAIN, xdg)
    assert stored is not None and stored.seq == 2 and stored.source == "supervisor"
    assert stored.body.next_step == "run the tests" and stored.body.refs == ["art_" + "0" * 32]
    assert [p.name for p in path.parent.iterdir() if not p.name.startswith(".")] == [path.name]


@pytest.mark.parametrize(
    ("args", "field", "why"),
    [
        (
            {"objective": "x", "decisions": ["ok", f"token {TOKEN}"]},
            "checkpoint.decisions[1]",
            "github_token",
        ),
        (
            {"objective": "x", "next_step": "password: Hunter2Hunter2Hunter2xx"},
            "checkpoint.next_step",
            "labelled",
        ),
        ({"objective": "clear \x1b[2J the screen"}, "checkpoint.objective", "U+001B"),
        ({"objective": "x", "blockers": ["bell\x07"]}, "checkpoint.blockers[0]", "U+0007"),
        ({"objective": "x", "checks": ["csi \x9b"]}, "checkpoint.checks[0]", "U+009B"),
        ({"objective": "x", "decisions": ["d"] * 65}, "checkpoint.decisions", "at most 64"),
        ({"objective": "x", "outstanding": ["y" * 1025]}, "checkpoint.outstanding.0", "at most 1024"),
        ({"objective": "x", "refs": ["../../etc/passwd"]}, "checkpoint.refs.0", "pattern"),
        ({"objective": "x", "transcript": "everything said"}, "checkpoint.transcript", "Extra inputs"),
    ],
)
def test_bad_checkpoint_text_is_refused_naming_the_field(
    args: dict[str, object], field: str, why: str
) -> None:
    with pytest.raises(CheckpointRefusedError) as info:
        parse_body(args)
    assert info.value.message.startswith(field + ":") and why in info.value.message
    assert TOKEN not in info.value.message and "Hunter2" not in info.value.message


def test_a_checkpoint_over_32_kib_is_refused_and_the_previous_one_stays(xdg: XdgPaths) -> None:
    small = parse_body({"objective": "keep me"})
    write_checkpoint(CHAIN, small, source="primary", session_id=CHAIN, vendor="codex", paths=xdg)
    big = CheckpointBody(objective="x", completed=["c" * 1000] * 40)  # ~40 KiB of JSON
    with pytest.raises(
        CheckpointRefusedError, match=rf"bytes; the limit is {AUTO_CHECKPOINT_MAX_BYTES} bytes"
    ):
        write_checkpoint(CHAIN, big, source="primary", session_id=CHAIN, vendor="codex", paths=xdg)
    stored = read_checkpoint(CHAIN, xdg)
    assert stored is not None and stored.body.objective == "keep me" and stored.seq == 1


def test_secret_shaped_work_tree_names_are_refused_too(xdg: XdgPaths) -> None:
    body = parse_body({"objective": "x"})
    with pytest.raises(
        CheckpointRefusedError, match=r"checkpoint.worktree.changed\[0\]: looks like a credential"
    ):
        write_checkpoint(
            CHAIN, body, source="supervisor", session_id=CHAIN, vendor="codex",
            worktree={"changed": [f"notes-{TOKEN}.txt"]}, paths=xdg,
        )  # fmt: skip
    assert read_checkpoint(CHAIN, xdg) is None


def test_the_work_tree_summary_names_branch_head_changes_and_changes_no_file(tmp_path: Path) -> None:
    repo = git_tree(tmp_path / "repo")
    (repo / "parser.py").write_text("def parse(x):\n    return x + 1\n")
    (repo / "new.py").write_text("NEW = 1\n")
    (repo / "odd\x1bname.txt").write_text("x")
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout
    before = _tree_fingerprint(repo)
    summary = summarize_worktree(str(repo))
    assert _tree_fingerprint(repo) == before  # not even the index was refreshed
    assert summary.git and summary.head == head.strip() and summary.branch in ("master", "main")
    assert summary.changed == (" M parser.py", "?? new.py", "?? odd?name.txt")
    assert summary.changed_total == 3 and summary.stat[-1].strip().startswith("1 file changed")
    assert not summarize_worktree(str(tmp_path)).git


def test_the_brief_fits_8_kib_and_says_what_it_cut(tmp_path: Path, xdg: XdgPaths) -> None:
    repo = git_tree(tmp_path / "repo")
    for i in range(300):
        (repo / f"file_{i:03}.py").write_text("x")
    body = CheckpointBody(
        objective="Port the tokenizer to the new grammar",
        decisions=[f"decision {i} " + "d" * 200 for i in range(30)],
        completed=["wrote the lexer"],
        outstanding=["the parser"],
        next_step="run the parser tests",
        uncertain_effects=["migration 0042 may have been applied"],
    )
    cp = write_checkpoint(CHAIN, body, source="primary", session_id=CHAIN, vendor="claude", paths=xdg)
    ctx = HandoffContext(
        CHAIN, "claude", "codex", "claude reached its limit (five_hour rejected)", cp,
        summarize_worktree(str(repo)), tasks=[{"id": "scan", "state": "succeeded", "tier": "strong"}],
        resets={"claude": 4102444800.0},
    )  # fmt: skip
    brief = build_brief(ctx)
    assert len(brief.encode()) <= AUTO_HANDOFF_BRIEF_MAX_BYTES
    assert "Objective: Port the tokenizer to the new grammar" in brief
    assert "Next step: run the parser tests" in brief and "migration 0042" in brief
    assert "more)" in brief and "300 changed file(s)" in brief and "scan: succeeded" in brief
    assert "claude quota resets at 2100-01-01" in brief
    no_cp = build_brief(
        HandoffContext(CHAIN, None, "claude", "explicit handoff", None, summarize_worktree(str(repo)))
    )
    assert "No checkpoint was written" in no_cp and "Reason: explicit handoff." in no_cp
    assert json.dumps(brief)  # plain text, no control bytes
    assert not any(ord(c) < 32 and c not in "\n\t" for c in brief)
