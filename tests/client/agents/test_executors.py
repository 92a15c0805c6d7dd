"""Discovery of the official clients: managed data root first, then absolute PATH entries."""

from __future__ import annotations

from pathlib import Path

from ivoai.client.agents.executors import EXECUTORS, discover, managed_bin_dir
from ivoai.common.paths import XdgPaths


def _exe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_managed_install_wins_over_path(xdg: XdgPaths, tmp_path: Path) -> None:
    on_path = _exe(tmp_path / "bin" / "codex")
    env = {"PATH": str(on_path.parent), "XDG_DATA_HOME": str(xdg.data.parent)}
    assert discover("codex", env) == (str(on_path), "path")
    managed = _exe(Path(managed_bin_dir(env)) / "codex")
    assert managed == xdg.data / "bin" / "codex"
    assert discover("codex", env) == (str(managed), "managed")


def test_relative_path_entries_and_non_executables_are_ignored(xdg: XdgPaths, tmp_path: Path) -> None:
    (tmp_path / "rel").mkdir()
    plain = tmp_path / "abs" / "claude"
    plain.parent.mkdir()
    plain.write_text("not executable")
    env = {"PATH": f"rel:{plain.parent}", "XDG_DATA_HOME": str(xdg.data.parent)}
    assert discover("claude", env) is None


def test_opencode_is_direct_only_and_has_no_process_local_mcp() -> None:
    assert EXECUTORS["opencode"].compression == ()
    assert EXECUTORS["opencode"].mcp_style is None
    assert EXECUTORS["codex"].auth_args == ("login", "status")
    assert EXECUTORS["claude"].auth_args == ("auth", "status")


def test_an_empty_codex_home_created_during_a_wrapped_session_is_removed_and_a_used_one_kept(
    tmp_path: Path,
) -> None:
    """`headroom wrap codex` creates an empty ~/.codex when there was none; ivoai removes it again."""
    from ivoai.client.agents.argv import LaunchArgs
    from ivoai.client.agents.launch import _Session

    for used in (False, True):
        home = tmp_path / f"codex-{used}"
        home.mkdir()
        if used:
            (home / "history.jsonl").write_text("{}\n")
        session = _Session(LaunchArgs("codex"), EXECUTORS["codex"], {"HOME": str(tmp_path)})
        session.codex_home_created_by_us = str(home)
        session.close()
        assert home.exists() is used
