"""Upgrade from the first release: the files ivoai 0.1.0 persisted, updated by today's `ivoai update`.

The fixture (`fixtures/release-0.1.0`, rebuilt by `scripts/make-release-fixture`) was written by the
0.1.0 code itself: `config set` plus a hand-edited config.toml with unknown keys and comments, a
secret, a user MCP connection with its token, ownership entries, and two launched sessions with a
compression telemetry event. Nothing of it may be lost; only what a migration must change changes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ivoai.common.paths import XdgPaths
from tests.client.components.helpers import tree_bytes
from tests.conftest import run_ivoai

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "release-0.1.0"
ADDED = b'\n[compression]\nprovider = "caveman"\nsource = "migration"\n'


def _install_fixture(xdg: XdgPaths) -> None:
    for name, root in (("config", xdg.config), ("state", xdg.state)):
        shutil.copytree(FIXTURE / name / "ivoai", root)
        for dirpath, _dirs, files in os.walk(root):
            os.chmod(dirpath, 0o700)
            for file in files:
                os.chmod(Path(dirpath) / file, 0o600)


def _files(xdg: XdgPaths) -> dict[str, bytes | str]:
    return {k: v for k, v in tree_bytes(xdg.config, xdg.state).items() if "/ivoai/update/" not in k}


def test_the_first_releases_state_survives_an_update_and_its_rollback(xdg: XdgPaths) -> None:
    _install_fixture(xdg)
    before = _files(xdg)
    proc = run_ivoai("update", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["action"] == "updated" and doc["verify"]["doctor_ok"] is True
    assert {(m["store"], m["from"], m["to"]) for m in doc["migrations"]} == {
        ("config", 1, 2),
        ("ownership", 1, 2),
    }
    after = _files(xdg)

    # config.toml: the schema line changes and the normalized compression keys are appended;
    # every other byte (comments, unknown keys in known and unknown tables) is as 0.1.0 left it.
    old_config = before[str(xdg.config_file)]
    assert isinstance(old_config, bytes)
    assert after[str(xdg.config_file)] == old_config.replace(b"schema = 1\n", b"schema = 2\n", 1) + ADDED
    # ownership.json: same entries, now typed; nothing dropped or re-labelled.
    old_entries = json.loads(before[str(xdg.ownership_manifest)])["entries"]
    new = json.loads(after[str(xdg.ownership_manifest)])
    assert new["schema"] == 2
    assert [
        {k: e[k] for k in ("component", "path", "ownership", "recorded_at")} for e in new["entries"]
    ] == old_entries
    # Everything else -- secrets, connections, sessions, telemetry -- is byte for byte unchanged.
    untouched = {
        k: v for k, v in before.items() if k not in (str(xdg.config_file), str(xdg.ownership_manifest))
    }
    assert {k: after[k] for k in untouched} == untouched
    assert len(untouched) == 5  # secrets, connections, two sessions, telemetry

    # Today's readers accept all of it.
    sessions = json.loads(run_ivoai("session", "list", "--all", "--json").stdout)["sessions"]
    assert len(sessions) == 2 and sessions[0]["ivoai_version"] == "0.1.0"
    shown = json.loads(run_ivoai("config", "show", "--json").stdout)
    assert shown["values"]["auto.workers"]["value"] == 3
    assert shown["values"]["compression.source"]["value"] == "migration"
    assert {"auto.experimental_mode", "plugins"} <= set(shown["other_keys"])
    assert json.loads(run_ivoai("connect", "mcp", "list", "--json").stdout)

    # Rolling back restores the first release's files exactly.
    back = run_ivoai("update", "--rollback", "--json")
    assert back.returncode == 0, back.stderr
    assert _files(xdg) == before
