"""The lazy command table: real import errors surface, a missing optional extra is named."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer import _click as click

from ivoai.cli._lazy import MissingExtraError, lazy_group


def _resolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> click.Command | None:
    (tmp_path / "ivoai_test_cmd.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "ivoai_test_cmd", raising=False)
    group = lazy_group({"probe": ("ivoai_test_cmd:app", "A command under test.")})(name="ivoai")
    return group.get_command(click.Context(group), "probe")


def test_a_command_whose_module_is_broken_raises_its_import_error_instead_of_no_such_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ImportError, match="gone"):
        _resolve(tmp_path, monkeypatch, "from ivoai.common import gone\n")


def test_a_command_needing_a_missing_server_extra_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `None` in sys.modules makes `import qdrant_edge` raise ModuleNotFoundError(name="qdrant_edge"),
    # as on a client-only install without the [server] extra.
    monkeypatch.setitem(sys.modules, "qdrant_edge", None)
    with pytest.raises(MissingExtraError) as info:
        _resolve(tmp_path, monkeypatch, "import qdrant_edge\n")
    assert "pip install 'ivoai[server]'" in info.value.message
    assert "qdrant_edge is not installed" in info.value.message


def test_a_working_command_module_resolves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = _resolve(tmp_path, monkeypatch, "def app() -> None:\n    'Do nothing.'\n")
    assert cmd is not None and cmd.name == "probe"
