"""The program name printed in commands: bare `ivoai` only when PATH finds this installation."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from ivoai.common.command import entry_point, ivoai_command
from ivoai.common.paths import XdgPaths
from tests.conftest import CliRunner

XDG_VARS = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")


def test_without_ivoai_on_path_the_absolute_entry_point_is_printed(tmp_path: Path) -> None:
    mine = entry_point()
    assert mine is not None and os.path.isabs(mine)
    assert ivoai_command(path=str(tmp_path)) == shlex.quote(mine)


def test_a_launcher_on_path_pointing_at_this_installation_gives_the_bare_name(tmp_path: Path) -> None:
    mine = entry_point()
    assert mine is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ivoai").symlink_to(mine)  # what scripts/quickstart puts in ~/.local/bin
    assert ivoai_command(path=f"{tmp_path / 'empty'}{os.pathsep}{bin_dir}") == "ivoai"


def test_another_ivoai_first_on_path_is_not_trusted_to_be_this_one(tmp_path: Path) -> None:
    mine = entry_point()
    assert mine is not None
    other = tmp_path / "other"
    other.mkdir()
    (other / "ivoai").write_text("#!/bin/sh\necho other ivoai\n")
    (other / "ivoai").chmod(0o755)
    assert ivoai_command(path=str(other)) == shlex.quote(mine)


def test_the_printed_command_runs_from_a_fresh_shell(tmp_path: Path) -> None:
    command = ivoai_command(path=str(tmp_path))
    proc = subprocess.run(
        ["/bin/sh", "-c", f"{command} --version"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ivoai ")


def test_the_commands_the_quickstart_prints_run_pasted_into_a_fresh_shell(
    cli: CliRunner, xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # a fresh shell after scripts/quickstart: no .venv/bin
    source = tmp_path / "notes"
    source.mkdir()
    (source / "vpn.md").write_text("# VPN\n\nConnect with the wireguard profile from the wiki.\n")
    result = cli("quickstart", str(source), "--no-serve", "--port", "0", "--json")
    assert result.code == 0, result.err
    text = "\n".join(json.loads(result.out)["next_steps"])
    mine = entry_point()
    assert mine is not None
    assert not re.search(r"(?<![/\w])ivoai (server|connect)", text), text  # no bare `ivoai` command
    commands = re.findall(re.escape(shlex.quote(mine)) + r" [^,()\n]*?(?=\s{2,}|\)|,|$)", text, re.M)
    # Templates (NAME, a public URL) and `start` (it serves until stopped) are not run as they are.
    runnable = [c for c in commands if not re.search(r"NAME|--public-url| start$", c)]
    # ingest (embeds what phase 1 left; printed when nothing serves), enrollment create,
    # web-access create, context search
    assert len(runnable) == 4, commands
    env = {"PATH": "/usr/bin:/bin", **{k: os.environ[k] for k in ("HOME", *XDG_VARS)}}
    for command in runnable:
        proc = subprocess.run(
            ["/bin/sh", "-c", command], capture_output=True, text=True, timeout=180, env=env, check=False
        )
        assert proc.returncode == 0, (command, proc.stderr)
