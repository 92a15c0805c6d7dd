"""Shared fixtures: every test runs with a private HOME and all four XDG roots in a temp directory."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ivoai.cli import main as cli_main
from ivoai.common.paths import XdgPaths, xdg_paths

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def xdg(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[XdgPaths]:
    """Point HOME and XDG_{CONFIG,DATA,STATE,CACHE}_HOME at a fresh temporary tree."""
    base = tmp_path_factory.mktemp("home")
    home = base / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_CACHE_HOME", "cache"),
    ):
        monkeypatch.setenv(var, str(base / sub))
    monkeypatch.delenv("IVOAI_DEBUG", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    yield xdg_paths()


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> CliRunner:
    return CliRunner(capsys)


class CliRunner:
    """Runs `ivoai ARGS` in process and captures its output."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self._capsys = capsys

    def __call__(self, *args: str) -> CliResult:
        self._capsys.readouterr()
        code = cli_main(list(args))
        captured = self._capsys.readouterr()
        return CliResult(code, captured.out, captured.err)


def run_ivoai(
    *args: str, input_text: str | None = None, timeout: float = 120.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m ivoai ARGS` as a real process with the current (test) environment."""
    return subprocess.run(
        [sys.executable, "-m", "ivoai", *args],
        input=input_text,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env if env is not None else dict(os.environ),
        check=False,
    )


def tool_path(name: str) -> Path:
    """A real peer installed by scripts/test (tools/node_modules/.bin or the headroom venv)."""
    base = Path(os.environ.get("IVOAI_TEST_TOOLS_DIR", REPO_ROOT / "tools" / "node_modules" / ".bin"))
    if name == "ruflo":  # issue 16: its own npm project (tools/ruflo), installed without optional extras
        default = REPO_ROOT / "tools" / "ruflo" / "node_modules" / ".bin" / "ruflo"
        return Path(os.environ.get("IVOAI_TEST_RUFLO", default))
    if name == "headroom":
        return Path(
            os.environ.get("IVOAI_TEST_HEADROOM", REPO_ROOT / ".tools" / "headroom" / "bin" / "headroom")
        )
    return base / name
