"""Test support: install the stand-ins and the real clients' fixtures into a test's private HOME."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ivoai.common.paths import XdgPaths
from tests.client.orchestration.plans import FIXTURES
from tests.conftest import tool_path

HERE = Path(__file__).resolve().parent


def fixture(name: str) -> Any:
    """A JSON fixture by file name."""
    return json.loads((FIXTURES / name).read_text())


def install(xdg: XdgPaths, name: str, script: str) -> Path:
    """Copy a stand-in script into ivoai's managed bin dir (found before PATH) as `name`."""
    bindir = xdg.data / "bin"
    bindir.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = bindir / name
    target.write_text(f"#!{sys.executable}\n" + (HERE / script).read_text(encoding="utf-8"), encoding="utf-8")
    target.chmod(0o755)
    return target


def codex_standin(xdg: XdgPaths, script: dict[str, Any]) -> Path:
    """Install the logged-in codex stand-in with `script`; return its CODEX_HOME."""
    install(xdg, "codex", "codex_standin.py")
    home = Path(os.environ["HOME"]) / ".codex"
    home.mkdir(parents=True, exist_ok=True)
    (home / "ivoai-standin.json").write_text(json.dumps(script))
    return home


def standin_requests(codex_home: Path) -> list[dict[str, Any]]:
    """Every request the codex stand-in received."""
    path = codex_home / "ivoai-standin-requests.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def real_clients_on_path(monkeypatch: Any) -> None:
    """Put the real npm `codex`/`claude` first on PATH for this test."""
    monkeypatch.setenv("PATH", f"{tool_path('codex').parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
