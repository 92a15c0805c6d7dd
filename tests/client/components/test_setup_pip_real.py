"""A real pip install of the pinned Headroom into a private venv: wheels only, every file hash-checked
(`--require-hashes` against the shipped lock), from the wheelhouse `scripts/test` fills
(`IVOAI_TEST_WHEELHOUSE`; `--no-index`, so no network). Then Headroom's own launch preflight
accepts the managed launcher.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ivoai.client.components.manifest import load_manifest
from ivoai.client.components.setup import run_setup
from ivoai.client.compression import headroom
from ivoai.common.paths import XdgPaths
from tests.client.components.helpers import context
from tests.conftest import REPO_ROOT

WHEELHOUSE = Path(os.environ.get("IVOAI_TEST_WHEELHOUSE", REPO_ROOT / ".tools" / "wheelhouse"))


@pytest.fixture
def wheelhouse() -> Path:
    assert any(WHEELHOUSE.glob("headroom_ai-0.42.0-*.whl")), (
        f"{WHEELHOUSE}: scripts/test downloads the pinned wheels"
    )
    return WHEELHOUSE


def test_headroom_installs_from_hashed_wheels_and_passes_its_launch_preflight(
    xdg: XdgPaths, wheelhouse: Path
) -> None:
    report = run_setup(context(xdg, offline=True, wheelhouse=wheelhouse), load_manifest(), ["headroom"])
    (result,) = report.results
    assert (result.action, result.probe) == ("installed", "0.42.0"), result.error
    launcher = xdg.data / "bin" / "headroom"
    venv_python = next((xdg.data / "components" / "headroom").glob("0.42.0-*")) / "venv" / "bin" / "python"
    assert launcher.read_bytes().startswith(f"#!{venv_python}\n".encode())
    binary = headroom.preflight("codex", os.environ)  # version, `wrap codex`, proxy extras importable
    assert (binary.path, binary.version) == (str(launcher), "0.42.0")
    assert json.loads((xdg.state / "components.json").read_text())["components"]["headroom"]["kind"] == "pip"


def test_a_tampered_wheel_is_refused_and_nothing_is_promoted(
    xdg: XdgPaths, tmp_path: Path, wheelhouse: Path
) -> None:
    mirror = tmp_path / "wheels"
    mirror.mkdir()
    for wheel in wheelhouse.glob("*.whl"):
        if wheel.name.startswith("aiohappyeyeballs-"):  # first in the lock: refused before the rest is read
            (mirror / wheel.name).write_bytes(wheel.read_bytes() + b"\0tampered")
        else:
            (mirror / wheel.name).symlink_to(wheel)
    (result,) = run_setup(
        context(xdg, offline=True, wheelhouse=mirror), load_manifest(), ["headroom"]
    ).results
    assert (result.action, result.error_code) == ("failed", "integrity_mismatch"), result.error
    assert not (xdg.data / "bin" / "headroom").exists()
    assert list((xdg.data / "components").glob("headroom/*")) == []
