"""Real npm installs of the pinned Codex CLI and Claude Code (and ivoai's Node), offline, from the npm
cache `scripts/test` fills (`IVOAI_TEST_NPM_CACHE`): `npm ci --offline --ignore-scripts` with every
tarball checked against the shipped lock's integrity, into a temporary XDG root. Loopback only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ivoai.client.components.locks import npm_lock_digest
from ivoai.client.components.manifest import DEFAULT_MANIFEST, load_manifest
from ivoai.client.components.setup import run_setup
from ivoai.client.config.ownership import Ownership, OwnershipManifest
from ivoai.common.paths import XdgPaths
from tests.client.components.helpers import ArtifactServer, context, serve
from tests.conftest import REPO_ROOT, run_ivoai

NPM_CACHE = Path(os.environ.get("IVOAI_TEST_NPM_CACHE", REPO_ROOT / ".tools" / "npm-cache"))


@pytest.fixture
def npm_cache() -> Path:
    assert NPM_CACHE.is_dir(), f"{NPM_CACHE} is missing: scripts/test fills it with the pinned tarballs"
    return NPM_CACHE


def _old_node(bin_dir: Path) -> None:
    """A system `node` that reports v14.0.0 (older than Codex's engines) but runs npm with the real one."""
    real = subprocess.run(
        ["sh", "-c", "command -v node"], capture_output=True, text=True, check=True
    ).stdout.strip()
    bin_dir.mkdir()
    node = bin_dir / "node"
    node.write_text(f'#!/bin/sh\n[ "$1" = "--version" ] && {{ echo v14.0.0; exit 0; }}\nexec {real} "$@"\n')
    node.chmod(0o755)
    codex = bin_dir / "codex"  # the user's own codex, already on PATH
    codex.write_text("#!/bin/sh\necho users-own-codex\n")
    codex.chmod(0o755)


def test_codex_and_claude_install_for_real_with_integrity_and_without_lifecycle_scripts(
    xdg: XdgPaths, tmp_path: Path, npm_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _old_node(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    ctx = context(xdg, offline=True, npm_cache=npm_cache)
    report = run_setup(ctx, load_manifest(), ["codex", "claude"])
    results = {r.name: r for r in report.results}
    assert report.ok, [(r.name, r.error) for r in report.results]
    assert (results["codex"].probe, results["claude"].probe) == ("0.171.0", "2.1.197")
    # Codex needs Node >= 16 and the system one says 14: ivoai's pinned Node 22 runs it.
    assert results["codex"].node_source == "managed"
    assert "/components/node/22.23.3-" in (results["codex"].node or "")
    codex_dir = next((xdg.data / "components" / "codex").glob("0.171.0-*"))
    # The platform package came from the lock (integrity-checked like the main package).
    assert json.loads((codex_dir / "node_modules/@openai/codex-linux-x64/package.json").read_text())[
        "version"
    ] == ("0.171.0-linux-x64")
    # Lifecycle scripts never ran: Claude's postinstall would have replaced this placeholder.
    claude_dir = next((xdg.data / "components" / "claude").glob("2.1.197-*"))
    assert (claude_dir / "node_modules/@anthropic-ai/claude-code/bin/claude.exe").stat().st_size < 1024 * 1024
    # The user's own codex is recorded pre-existing and left alone; sessions prefer the managed pin.
    assert results["codex"].pre_existing == [str(tmp_path / "bin" / "codex")]
    entry = OwnershipManifest(xdg).get(tmp_path / "bin" / "codex")
    assert entry is not None and entry.ownership is Ownership.PRE_EXISTING
    proc = run_ivoai("codex", "--direct", "--", "--version")
    assert proc.returncode == 0 and "codex-cli 0.171.0" in proc.stdout, proc.stderr
    (record,) = [json.loads(p.read_text()) for p in xdg.sessions_dir.glob("ses_*.json")]
    assert record["client_origin"] == "managed"
    assert (tmp_path / "bin" / "codex").read_text() == "#!/bin/sh\necho users-own-codex\n"
    # Everything is in place: the repair path changes nothing and needs no npm.
    again = run_setup(
        context(xdg, offline=True, npm_cache=tmp_path / "empty"), load_manifest(), ["codex", "claude"]
    )
    assert [r.action for r in again.results] == ["unchanged", "unchanged"]


def test_a_tampered_tarball_is_refused_by_npm_and_nothing_is_promoted(xdg: XdgPaths, tmp_path: Path) -> None:
    """A registry mirror on loopback serves a Codex tarball that does not match the lock's integrity."""
    lock = DEFAULT_MANIFEST.parent / "locks" / "npm" / "codex"
    assert npm_lock_digest((lock / "package.json").read_bytes(), (lock / "package-lock.json").read_bytes())
    tampered = b"\x1f\x8b" + b"not the reviewed tarball" * 100
    server = ArtifactServer(
        {
            "@openai/codex/-/codex-0.171.0.tgz": tampered,
            "@openai/codex/-/codex-0.171.0-linux-x64.tgz": tampered,
        }
    )
    with serve(server) as srv:
        ctx = context(xdg, npm_cache=tmp_path / "cache")
        ctx.npm_registry = srv.url("")
        ctx.npm_fetch_retries = 0  # npm retries a bad tarball with back-off; once is proof enough
        (result,) = run_setup(ctx, load_manifest(), ["codex"]).results
    assert srv.hits, "npm never asked the mirror"
    assert (result.action, result.error_code) == ("failed", "integrity_mismatch"), result.error
    assert not (xdg.data / "bin" / "codex").exists()
    assert list((xdg.data / "components").glob("codex/*")) == []
    assert json.loads((xdg.state / "components.json").read_text())["components"] == {}


def test_the_shipped_codex_lock_pins_the_platform_package_by_integrity() -> None:
    lock = json.loads((DEFAULT_MANIFEST.parent / "locks/npm/codex/package-lock.json").read_text())
    platform = lock["packages"]["node_modules/@openai/codex-linux-x64"]
    assert platform["version"] == "0.171.0-linux-x64" and platform["optional"] is True
    assert platform["integrity"].startswith("sha512-")
    assert sys.platform != "linux" or platform["resolved"].startswith(
        "https://registry.npmjs.org/@openai/codex/"
    )
