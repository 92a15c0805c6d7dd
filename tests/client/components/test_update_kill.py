"""SIGKILL at every journal phase of a real `ivoai update` process; the next run recovers.

The update process kills itself (`IVOAI_TEST_UPDATE_KILL_AT`, a test hook read by the journal) right
after the phase is journaled; `MIGRATE+1` dies after the first migrated file was written. The next
`ivoai update --dry-run` must roll an uncommitted transaction back to the exact pre-update bytes (or
finish a committed one), and a following `ivoai update` must then complete.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from ivoai.client.components.journal import KILL_ENV
from ivoai.client.components.manifest import TEST_MANIFEST_ENV
from ivoai.common.paths import XdgPaths
from tests.client.components.conftest import V2, World, snapshot
from tests.conftest import run_ivoai


def _outside_update_dir(tree: dict[str, bytes | str]) -> dict[str, bytes | str]:
    return {k: v for k, v in tree.items() if "/ivoai/update/" not in k}


@pytest.mark.parametrize("phase", ["PREPARE", "PROMOTE", "MIGRATE", "MIGRATE+1", "SETUP", "VERIFY", "COMMIT"])
def test_a_sigkilled_update_is_recovered_by_the_next_run(xdg: XdgPaths, world: World, phase: str) -> None:
    before = snapshot(xdg)
    env = dict(os.environ)
    env[TEST_MANIFEST_ENV] = str(world.m2.path)
    killed = run_ivoai("update", "--json", env={**env, KILL_ENV: phase})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (xdg.state / "update" / "journal.json").exists()

    recovery = run_ivoai("update", "--dry-run", "--json", env=env)
    assert recovery.returncode == 0, recovery.stderr
    recovered = json.loads(recovery.stdout)["recovered"]
    assert recovered["phase"] == phase.split("+")[0]
    if phase == "COMMIT":  # the commit point was reached: the update stands
        assert recovered["action"] == "completed"
        assert (xdg.data / "bin" / "tool").read_bytes() == V2
        assert (xdg.state / "update" / "last.json").exists()
    else:
        assert recovered["action"] == "rolled_back"
        assert _outside_update_dir(snapshot(xdg)) == _outside_update_dir(before)
        assert not list((xdg.state / "update").glob("tx-*"))
    assert not (xdg.state / "update" / "journal.json").exists()

    done = run_ivoai("update", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert (xdg.data / "bin" / "tool").read_bytes() == V2
