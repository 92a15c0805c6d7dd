"""The client context: roots from the environment when built, config and secrets read on first use."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from ivoai.client.config.errors import ConfigError
from ivoai.client.context import ClientContext
from ivoai.common.paths import XdgPaths


def test_the_roots_are_those_of_the_environment_when_it_was_built(
    xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = ClientContext.from_environment()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "elsewhere"))
    assert ctx.paths == xdg
    assert ClientContext.from_environment().paths.config == tmp_path / "elsewhere" / "ivoai"


def test_the_context_is_immutable(xdg: XdgPaths) -> None:
    ctx = ClientContext(xdg)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.paths = xdg  # type: ignore[misc]


def test_config_is_read_once_on_first_use(xdg: XdgPaths) -> None:
    ctx = ClientContext(xdg)
    os.makedirs(xdg.config, mode=0o700)
    xdg.config_file.write_text('schema = 2\n[compression]\nprovider = "direct"\n')
    xdg.config_file.chmod(0o600)
    assert ctx.config.compression.provider == "direct"
    xdg.config_file.write_text("not toml [")
    assert ctx.config.compression.provider == "direct"  # the snapshot of this invocation
    with pytest.raises(ConfigError):
        _ = ClientContext(xdg).config


def test_secrets_live_below_the_contexts_config_root(xdg: XdgPaths) -> None:
    ctx = ClientContext(xdg)
    ctx.secrets.put("sec_" + "a" * 16, "value")
    assert ctx.secrets is ctx.secrets
    assert ctx.secrets.path == str(xdg.secrets_file)
    assert ClientContext(xdg).secrets.get("sec_" + "a" * 16) == "value"
