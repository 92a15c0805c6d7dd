"""Installer subprocesses get a minimal environment: no credentials, no user npm/pip configuration.

`npm` here is a stand-in placed first on PATH (it records its argv and environment, then lays out
what `npm ci` would); it stands in for the real npm only to observe what ivoai hands it. The lock it
is given is the real, verified Codex lock.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from ivoai.client.components.manifest import DEFAULT_MANIFEST, current_target, load_manifest
from ivoai.client.components.runner import INSTALLER_ENV_ALLOWLIST
from ivoai.client.components.setup import run_setup
from ivoai.common.paths import XdgPaths
from tests.client.components.helpers import context

FAKE_NPM = """#!{python}
import json, os, sys
json.dump({{"argv": sys.argv[1:], "env": dict(os.environ)}}, open({seen!r}, "w"))
pkg = os.path.join("node_modules", "@openai", "codex")
os.makedirs(os.path.join(pkg, "bin"))
json.dump({{"version": "0.171.0"}}, open(os.path.join(pkg, "package.json"), "w"))
open(os.path.join(pkg, "bin", "codex.js"), "w").write("console.log('codex-cli 0.171.0')\\n")
native = os.path.join("node_modules", "@openai", {platform_pkg!r}, "vendor", "triple", "bin")
os.makedirs(native)
for name in ("codex", "codex-code-mode-host"):
    open(os.path.join(native, name), "w").close()
"""
SECRETS = {
    "OPENAI_API_KEY": "sk-should-never-reach-npm",
    "ANTHROPIC_API_KEY": "sk-ant-never",
    "NPM_TOKEN": "npm_secret",
    "GITHUB_TOKEN": "ghp_never",
    "AWS_SECRET_ACCESS_KEY": "never",
    "IVOAI_KNOWLEDGE_TOKEN": "never",
}


def test_npm_runs_with_an_allowlisted_environment_and_a_private_home(
    xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "npm").write_text(
        FAKE_NPM.format(
            python=sys.executable,
            seen=str(tmp_path / "npm-seen.json"),
            platform_pkg=f"codex-{current_target().platform}",
        )
    )
    (bin_dir / "npm").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for key, value in SECRETS.items():
        monkeypatch.setenv(key, value)
    home = Path(os.environ["HOME"])
    (home / ".npmrc").write_text("//registry.npmjs.org/:_authToken=npm_user_token\n")
    (home / ".netrc").write_text("machine pypi.org login u password p\n")
    manifest_dir = tmp_path / "m"
    manifest_dir.mkdir()
    shutil.copytree(DEFAULT_MANIFEST.parent / "locks", manifest_dir / "locks")
    shutil.copy(DEFAULT_MANIFEST, manifest_dir / "manifest.toml")
    # The manifest and locks are the shipped ones (copied so the stand-in npm is the only change).
    (result,) = run_setup(context(xdg), load_manifest(manifest_dir / "manifest.toml"), ["codex"]).results
    assert (result.action, result.probe) == ("installed", "0.171.0"), result.error
    seen = json.loads((tmp_path / "npm-seen.json").read_text())
    env = seen["env"]
    assert not set(SECRETS) & set(env)
    assert not any("token" in k.lower() or "secret" in k.lower() for k in env)
    assert env["HOME"] != str(home) and env["HOME"].startswith(str(xdg.data))
    assert env["npm_config_userconfig"].startswith(env["HOME"])  # an empty file, not ~/.npmrc
    assert env["PIP_CONFIG_FILE"] == os.devnull
    allowed = {*INSTALLER_ENV_ALLOWLIST, "HOME", "TMPDIR", "NO_COLOR", "PIP_CONFIG_FILE", "PIP_NO_INPUT"}
    allowed |= {"PIP_DISABLE_PIP_VERSION_CHECK", "PYTHONNOUSERSITE"}
    assert {k for k in env if not k.startswith("npm_config_")} <= allowed
    assert {k for k in env if k.startswith("npm_config_")} == {
        "npm_config_userconfig",
        "npm_config_globalconfig",
        "npm_config_update_notifier",
        "npm_config_fund",
        "npm_config_audit",
    }
    assert not {"OPENAI_API_KEY", "NPM_TOKEN"} & set(INSTALLER_ENV_ALLOWLIST)
    assert seen["argv"][:2] == ["ci", "--ignore-scripts"]
    assert "--registry=https://registry.npmjs.org/" in seen["argv"]
    assert (home / ".npmrc").read_text().endswith("npm_user_token\n")  # read by nobody, left alone
