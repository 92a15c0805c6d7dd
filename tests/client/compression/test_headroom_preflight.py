"""Headroom preflight with the real headroom-ai CLI."""

from __future__ import annotations

import os

import pytest

from ivoai.client.compression import headroom
from ivoai.client.compression.errors import PreflightError
from ivoai.common.paths import XdgPaths
from tests.conftest import tool_path


def test_version_output_is_parsed() -> None:
    assert headroom.parse_version("headroom, version 0.42.0\n") == (0, 42, 0)
    assert headroom.parse_version("something else") is None


def test_missing_headroom_is_reported_as_not_installed(xdg: XdgPaths) -> None:
    with pytest.raises(PreflightError) as info:
        headroom.preflight("codex", {"PATH": "/nonexistent", "XDG_DATA_HOME": str(xdg.data.parent)})
    assert info.value.code == "headroom_not_installed"


def test_real_headroom_passes_preflight_for_codex_and_builds_a_config_free_wrap(xdg: XdgPaths) -> None:
    real = tool_path("headroom")
    if not real.exists():
        pytest.fail(f"headroom-ai is not installed at {real}; run scripts/test")
    env = dict(os.environ, PATH=f"{real.parent}:/usr/bin:/bin")
    binary = headroom.preflight("codex", env)
    assert binary.version == "0.42.0"
    argv = headroom.wrap_argv(binary, "codex", 40000, ["--version"])
    assert argv[1:3] == ["wrap", "codex"]
    assert "--no-mcp" in argv and argv[argv.index("--code-memory") + 1] == "none"
    assert argv[-2:] == ["--", "--version"]
