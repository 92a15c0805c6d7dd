"""ivoai's research-order instruction is added to the user's own Codex `developer_instructions`.

The launcher runs with a stand-in `codex` that records its argv; the REAL Codex then shows, with
`codex debug prompt-input` (the model-visible prompt), what those exact arguments make it use.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ivoai.client.agents import mcp_render
from ivoai.client.agents.codex_instructions import active_profile, user_instructions
from ivoai.common.paths import XdgPaths
from tests.cli.test_launch_isolation import enroll_unreachable_source
from tests.client.agents.standins import install_client, reports
from tests.conftest import tool_path

USER_TEXT = "Always answer the user in plain English, never in haiku."
PROFILE_TEXT = "Work profile: cite the ticket number in every commit message."
PROJECT_TEXT = "This repository: run make check before proposing a change."
IVOAI_MARK = "consult shared memory first"  # a phrase of ivoai's instruction


def _codex_home(tmp_path: Path) -> Path:
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(f'developer_instructions = "{USER_TEXT}"\n')
    (home / "work.config.toml").write_text(f'developer_instructions = "{PROFILE_TEXT}"\n')
    return home


def _launch_argv(tmp_path: Path, codex_home: Path, *client_args: str, cwd: Path | None = None) -> list[str]:
    """The arguments `ivoai codex` (run in `cwd`) gives the client, the user's own last."""
    report = tmp_path / f"r{len(list(tmp_path.glob('r*.ndjson')))}.ndjson"
    env = dict(os.environ, CODEX_HOME=str(codex_home), STANDIN_REPORT=str(report), STANDIN_MODE="exit:0")
    launch = ["codex", "--direct", "--knowledge-source", "team", "--", *client_args]
    result = subprocess.run(
        [sys.executable, "-m", "ivoai", *launch],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    [start] = reports(report)
    argv: list[str] = start["argv"]
    assert argv[len(argv) - len(client_args) :] == list(client_args)
    return argv


def _prompt_seen_by_codex(argv: list[str], codex_home: Path, cwd: Path) -> str:
    proc = subprocess.run(
        [str(tool_path("codex")), *argv, "debug", "prompt-input", "hello"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={"HOME": str(Path.home()), "CODEX_HOME": str(codex_home), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_codex_sees_the_users_developer_instructions_and_ivoais(xdg: XdgPaths, tmp_path: Path) -> None:
    enroll_unreachable_source(xdg)
    install_client(xdg, "codex")
    codex_home = _codex_home(tmp_path)
    before = {p.name: p.read_bytes() for p in codex_home.iterdir()}
    work = tmp_path / "work"
    work.mkdir()
    prompt = _prompt_seen_by_codex(_launch_argv(tmp_path, codex_home), codex_home, work)
    assert USER_TEXT in prompt and IVOAI_MARK in prompt
    assert prompt.index(USER_TEXT) < prompt.index(IVOAI_MARK)
    # With a profile, Codex uses the profile's instructions instead of the base config's: so do we.
    argv = _launch_argv(tmp_path, codex_home, "-p", "work")
    prompt = _prompt_seen_by_codex(argv, codex_home, work)
    assert PROFILE_TEXT in prompt and IVOAI_MARK in prompt and USER_TEXT not in prompt
    # The user's Codex files are only read.
    assert {p.name: p.read_bytes() for p in codex_home.iterdir() if p.name in before} == before


def test_a_trusted_projects_instructions_are_kept_too(xdg: XdgPaths, tmp_path: Path) -> None:
    enroll_unreachable_source(xdg)
    install_client(xdg, "codex")
    codex_home = _codex_home(tmp_path)
    project = tmp_path / "project"
    (project / ".codex").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True, timeout=30)
    (project / ".codex" / "config.toml").write_text(f'developer_instructions = "{PROJECT_TEXT}"\n')
    with (codex_home / "config.toml").open("a") as fh:
        fh.write(f'[projects."{project}"]\ntrust_level = "trusted"\n')
    argv = _launch_argv(tmp_path, codex_home, cwd=project)
    prompt = _prompt_seen_by_codex(argv, codex_home, project)
    assert PROJECT_TEXT in prompt and IVOAI_MARK in prompt and USER_TEXT not in prompt
    assert user_instructions({"CODEX_HOME": str(codex_home)}, [], str(project)) == PROJECT_TEXT


def test_without_user_instructions_only_ivoais_are_passed(xdg: XdgPaths, tmp_path: Path) -> None:
    enroll_unreachable_source(xdg)
    install_client(xdg, "codex")
    empty_home = tmp_path / "empty-codex-home"
    empty_home.mkdir()
    argv = _launch_argv(tmp_path, empty_home)
    [value] = [a for a in argv if a.startswith("developer_instructions=")]
    assert value == "developer_instructions=" + mcp_render.toml_string(mcp_render.RESEARCH_ORDER_INSTRUCTION)


def test_the_profile_is_read_from_the_clients_arguments_only_when_it_is_a_plain_name() -> None:
    assert active_profile(["-p", "work", "exec", "hi"]) == "work"
    assert active_profile(["--profile=dev-2"]) == "dev-2"
    assert active_profile(["exec", "--", "-p", "work"]) is None
    assert active_profile(["-p", "../secrets"]) is None
