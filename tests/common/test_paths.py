"""XDG roots: honour absolute XDG_*_HOME values, ignore relative ones, fall back to HOME."""

from __future__ import annotations

from pathlib import Path

import pytest

from ivoai.common.paths import xdg_paths


def test_every_root_follows_its_xdg_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    paths = xdg_paths()
    assert paths.config == tmp_path / "xdg_config_home" / "ivoai"
    assert paths.data == tmp_path / "xdg_data_home" / "ivoai"
    assert paths.state == tmp_path / "xdg_state_home" / "ivoai"
    assert paths.cache == tmp_path / "xdg_cache_home" / "ivoai"
    assert paths.secrets_file == paths.config / "secrets.json"
    assert paths.ownership_manifest == paths.state / "ownership.json"


def test_unset_or_relative_values_fall_back_to_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")
    monkeypatch.setenv("XDG_STATE_HOME", "")
    paths = xdg_paths()
    assert paths.config == tmp_path / ".config" / "ivoai"
    assert paths.data == tmp_path / ".local" / "share" / "ivoai"
    assert paths.state == tmp_path / ".local" / "state" / "ivoai"
