"""The import-light I/O module: same JSON as jsonio, same XDG rule as paths, private 0700/0600 writes."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ivoai.common import jsonio
from ivoai.common.errors import UnsafePathError
from ivoai.common.lightio import json_dumps, open_private_dirs, write_atomic, xdg_root
from ivoai.common.paths import xdg_paths
from tests.probe import run_bare


def test_light_json_matches_the_json_module() -> None:
    doc = {"b": [1, 2.5, None, True, False], "a": 'q"\\\n\x01é', "c": {"z": {}, "y": []}}
    assert json.loads(json_dumps(doc)) == doc
    assert json_dumps(doc) == json.dumps(doc, sort_keys=True, ensure_ascii=False)


@pytest.mark.parametrize(
    "value",
    [None, 0, -7, 2**70, 0.1, 1e300, "", "\u2028\x7f\x1f", ["x", ("y", 3)], {"k": {"j": [None]}}],
)
def test_light_json_renders_exactly_what_jsonio_renders(value: object) -> None:
    assert json_dumps(value) == jsonio.dumps(value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {1: "x"}, {"s": {1, 2}}, b"x"])
def test_light_json_refuses_what_it_cannot_encode_exactly(value: object) -> None:
    with pytest.raises(TypeError):
        json_dumps(value)


def test_xdg_root_is_the_rule_paths_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")
    paths = xdg_paths()
    assert xdg_root("XDG_STATE_HOME", ".local/state") == str(paths.state) == str(tmp_path / "state" / "ivoai")
    assert xdg_root("XDG_CONFIG_HOME", ".config") == str(paths.config) == str(tmp_path / ".config" / "ivoai")
    env = {"HOME": "/elsewhere", "XDG_DATA_HOME": "/data"}
    assert xdg_root("XDG_DATA_HOME", ".local/share", env) == "/data/ivoai"


def test_the_launch_paths_private_dirs_create_missing_ancestors_0700(tmp_path: Path) -> None:
    os.umask(0o022)
    root = tmp_path / "state" / "ivoai"  # a fresh home without ~/.local/state
    os.close(open_private_dirs(str(root), "sessions"))
    for path in (root.parent, root, root / "sessions"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path


def test_a_symlinked_component_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    os.close(open_private_dirs(str(root)))
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (root / "sessions").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafePathError, match="symlink"):
        open_private_dirs(str(root), "sessions")


def test_write_atomic_gives_the_mode_asked_whatever_the_umask(tmp_path: Path) -> None:
    fd = open_private_dirs(str(tmp_path / "root"), "bin")
    previous = os.umask(0o077)
    try:
        write_atomic(fd, "wrapper", b"#!/bin/sh\n", mode=0o700)
        write_atomic(fd, "record.json", b"{}\n")
    finally:
        os.umask(previous)
        os.close(fd)
    bin_dir = tmp_path / "root" / "bin"
    assert stat.S_IMODE((bin_dir / "wrapper").stat().st_mode) == 0o700
    assert stat.S_IMODE((bin_dir / "record.json").stat().st_mode) == 0o600
    assert sorted(p.name for p in bin_dir.iterdir()) == ["record.json", "wrapper"]  # no staging left


def test_importing_lightio_loads_nothing_heavy() -> None:
    code = "import sys, ivoai.common.lightio; print(' '.join(sys.modules))"
    banned = {"json", "re", "pathlib", "dataclasses", "typing", "secrets", "fcntl", "contextlib"}
    assert sorted({m.split(".")[0] for m in run_bare(code).split()} & banned) == []
