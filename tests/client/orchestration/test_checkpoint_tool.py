"""`orchestration_checkpoint` over the real MCP SDK client: stored, numbered, refused with its field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ivoai.client.orchestration._checkpoint import checkpoint_path, read_checkpoint
from ivoai.client.orchestration._state import read_state
from ivoai.client.workingcontext import ArtifactStore
from ivoai.common.paths import XdgPaths
from tests.client.orchestration.test_mcp_server import SESSION, _call, _client, _runtime, _standin

pytestmark = pytest.mark.anyio
OTHER = "ses_" + "f" * 32


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_primary_checkpoints_and_bad_checkpoints_are_refused(xdg: XdgPaths, tmp_path: Path) -> None:
    _standin(xdg)
    mine = ArtifactStore().put(b"evidence", payload_type="text", session_id=SESSION).id
    theirs = ArtifactStore().put(b"other", payload_type="text", session_id=OTHER).id
    async with _client(_runtime(xdg, tmp_path)) as s:
        listed = {tool.name: tool for tool in (await s.list_tools()).tools}
        assert "orchestration_checkpoint" in listed
        first = await _call(
            s, "orchestration_checkpoint", objective="Fix the parser", completed=["lexer"],
            changed_files=["parser.py"], next_step="run the tests", refs=[mine],
        )  # fmt: skip
        assert not first["_is_error"] and first["seq"] == 1 and first["chain"] == SESSION
        second = await _call(
            s, "orchestration_checkpoint", objective="Fix the parser", completed=["lexer", "parser"]
        )
        assert second["seq"] == 2
        secret = await _call(
            s, "orchestration_checkpoint", objective="x", decisions=["use Bearer abcdef1234567890XYZ"]
        )
        assert secret["_is_error"] and secret["error"]["code"] == "checkpoint_refused"
        assert secret["error"]["message"].startswith(
            "checkpoint.decisions[0]: looks like a credential (bearer)"
        )
        assert "abcdef1234567890XYZ" not in json.dumps(secret)
        esc = await _call(s, "orchestration_checkpoint", objective="\x1b]0;pwned\x07")
        assert esc["_is_error"] and "U+001B" in esc["error"]["message"]
        foreign = await _call(s, "orchestration_checkpoint", objective="x", refs=[theirs])
        assert foreign["_is_error"] and "checkpoint.refs[0]" in foreign["error"]["message"]
    stored = read_checkpoint(SESSION, xdg)
    assert stored is not None and stored.seq == 2 and stored.source == "primary"
    assert stored.body.completed == ["lexer", "parser"] and stored.vendor == "codex"
    assert stored.worktree is None  # the test's work tree is not a git repository
    assert oct(checkpoint_path(SESSION, xdg).stat().st_mode & 0o777) == "0o600"
    meta = read_state(SESSION, xdg)
    assert meta is not None and meta["checkpoint"]["seq"] == 2
    assert "Fix the parser" not in json.dumps(meta)  # plan metadata keeps the number, not the text
