"""`ivoai setup` with archive components served on loopback: install, verify, promote, repair, refuse.

The real Caveman asset cannot be fetched here; the archives are built locally (the Caveman one holds
`caveman_standin.py`, which speaks the pinned proxy's `version --json` contract).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ivoai.client.components.manifest import TEST_MANIFEST_ENV, load_manifest
from ivoai.client.components.setup import run_setup
from ivoai.client.compression import caveman
from ivoai.client.config.ownership import Ownership, OwnershipManifest
from ivoai.common.paths import XdgPaths
from tests.client.components.helpers import (
    ArtifactServer,
    artifact_component,
    caveman_script,
    context,
    serve,
    sha256,
    tar_gz,
    tool_script,
    tree_bytes,
    write_manifest,
)
from tests.conftest import CliRunner

SCRIPT = tool_script("1.0.0")
ARCHIVE = tar_gz({"bin/tool": SCRIPT})


def _manifest(tmp_path: Path, url: str) -> Path:
    return write_manifest(
        tmp_path / "m", artifact_component("tool", "1.0.0", url, ARCHIVE, {"bin/tool": SCRIPT})
    )


def test_an_archive_component_is_verified_extracted_probed_and_promoted(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    with serve(ArtifactServer({"tool.tgz": ARCHIVE})) as srv:
        manifest = load_manifest(_manifest(tmp_path, srv.url("tool.tgz")))
        report = run_setup(context(xdg), manifest)
    (result,) = report.results
    assert (result.action, result.probe, result.error) == ("installed", "1.0.0", None)
    launcher = xdg.data / "bin" / "tool"
    assert launcher.read_bytes() == SCRIPT
    assert stat.S_IMODE(launcher.stat().st_mode) == 0o700
    state = json.loads((xdg.state / "components.json").read_text())
    assert state["components"]["tool"]["version"] == "1.0.0"
    assert state["components"]["tool"]["launchers"] == {"tool": sha256(SCRIPT)}
    owned = {(e.kind, e.path, e.ownership) for e in OwnershipManifest(xdg).entries()}
    assert ("executable", str(launcher), Ownership.MANAGED) in owned
    assert ("directory", str(xdg.data / "components" / "tool"), Ownership.MANAGED) in owned
    # Nothing was written outside ivoai's roots (HOME stays empty).
    assert list(Path(os.environ["HOME"]).iterdir()) == []


def test_the_repair_path_needs_no_network_and_rewrites_a_damaged_launcher(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    with serve(ArtifactServer({"tool.tgz": ARCHIVE})) as srv:
        manifest = load_manifest(_manifest(tmp_path, srv.url("tool.tgz")))
        run_setup(context(xdg), manifest)
    # The server is gone: an intact install is `unchanged` without any download.
    assert run_setup(context(xdg), manifest).results[0].action == "unchanged"
    launcher = xdg.data / "bin" / "tool"
    launcher.write_bytes(b"#!/bin/sh\necho tampered\n")
    assert run_setup(context(xdg), manifest).results[0].action == "repaired"
    assert launcher.read_bytes() == SCRIPT
    launcher.unlink()
    assert run_setup(context(xdg), manifest).results[0].action == "repaired"
    assert launcher.read_bytes() == SCRIPT


def test_a_tampered_archive_is_refused_and_nothing_is_promoted(xdg: XdgPaths, tmp_path: Path) -> None:
    evil = tar_gz({"bin/tool": tool_script("6.6.6")})
    with serve(ArtifactServer({"tool.tgz": evil})) as srv:
        manifest = load_manifest(_manifest(tmp_path, srv.url("tool.tgz")))
        report = run_setup(context(xdg), manifest)
    (result,) = report.results
    assert (result.action, result.error_code) == ("failed", "integrity_mismatch")
    assert not report.ok
    assert not (xdg.data / "bin" / "tool").exists()
    assert list((xdg.data / "components").glob("tool/*")) == []  # no generation, no staging left
    assert json.loads((xdg.state / "components.json").read_text())["components"] == {}
    assert not any(p.name.startswith(sha256(evil)) for p in (xdg.cache / "downloads").iterdir())


def test_a_member_that_does_not_match_its_pinned_digest_is_refused(xdg: XdgPaths, tmp_path: Path) -> None:
    other = tar_gz({"bin/tool": tool_script("1.0.1")})  # the archive digest is pinned, its member is not ours
    table = artifact_component("tool", "1.0.0", "", other, {"bin/tool": SCRIPT})
    with serve(ArtifactServer({"tool.tgz": other})) as srv:
        manifest = load_manifest(
            write_manifest(tmp_path / "m", table.replace('url = ""', f'url = "{srv.url("tool.tgz")}"'))
        )
        (result,) = run_setup(context(xdg), manifest).results
    assert result.error_code == "integrity_mismatch"
    assert "bin/tool has SHA-256" in (result.error or "")
    assert not (xdg.data / "bin" / "tool").exists()


def test_a_failing_probe_keeps_the_previous_launcher_untouched(xdg: XdgPaths, tmp_path: Path) -> None:
    broken = tool_script("1.0.0", fail=True)
    archive = tar_gz({"bin/tool": broken})
    with serve(ArtifactServer({"tool.tgz": archive})) as srv:
        manifest = load_manifest(
            write_manifest(
                tmp_path / "m",
                artifact_component("tool", "1.0.0", srv.url("tool.tgz"), archive, {"bin/tool": broken}),
            )
        )
        (result,) = run_setup(context(xdg), manifest).results
    assert (result.action, result.error_code) == ("failed", "probe_failed")
    assert not (xdg.data / "bin" / "tool").exists()


def test_the_managed_caveman_proxy_passes_the_launchers_preflight(
    xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = caveman_script()
    archive = tar_gz({"caveman-proxy": proxy})
    table = artifact_component(
        "caveman",
        "bin-v1.1.3",
        "URL",
        archive,
        {"caveman-proxy": proxy},
        launcher="caveman-proxy",
        probe='args = ["version", "--json"], pattern = \'"schema"\\s*:\', check_version = false',
    ).replace('launchers."caveman"', 'launchers."caveman-proxy"')
    with serve(ArtifactServer({"cm.tgz": archive})) as srv:
        manifest = load_manifest(
            write_manifest(tmp_path / "m", table.replace('url = "URL"', f'url = "{srv.url("cm.tgz")}"'))
        )
        (result,) = run_setup(context(xdg), manifest).results
    assert (result.action, result.probe) == ("installed", "ok")
    monkeypatch.setenv(caveman.TEST_PIN_ENV, sha256(proxy))
    binary = caveman.preflight(os.environ)  # regular file, pinned digest, `version --json` answers
    assert binary.path == str(xdg.data / "bin" / "caveman-proxy")


def test_setup_cli_reports_json_and_warns_about_the_test_manifest(
    xdg: XdgPaths, tmp_path: Path, cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve(ArtifactServer({"tool.tgz": ARCHIVE})) as srv:
        monkeypatch.setenv(TEST_MANIFEST_ENV, str(_manifest(tmp_path, srv.url("tool.tgz"))))
        res = cli("setup", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["schema"] == 1 and doc["ok"] is True and doc["test_manifest"] is True
    assert [(c["name"], c["action"]) for c in doc["components"]] == [("tool", "installed")]
    assert "replaces the shipped component manifest (test hook)" in res.err
    before = tree_bytes(xdg.data, xdg.state)
    again = cli("setup", "--json")
    assert json.loads(again.out)["components"][0]["action"] == "unchanged"
    assert tree_bytes(xdg.data, xdg.state) == before


def test_an_unknown_component_is_a_usage_error_that_lists_the_known_ones(cli: CliRunner) -> None:
    res = cli("setup", "--component", "nope")
    assert res.code == 2
    assert "unknown component 'nope'; known components: codex, claude" in res.err
