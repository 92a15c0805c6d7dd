"""Several real processes changing config.toml and secrets.json at once: every change lands."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from ivoai.client.config.fast import read_config_fast
from ivoai.client.config.secrets import SecretsStore
from ivoai.common.paths import XdgPaths

WAIT_SECONDS = 120.0

# Each child waits for "go" on stdin so both start mutating at the same moment.
CONFIG_CHILD = textwrap.dedent(
    """
    import sys
    from ivoai.client.config.store import set_key
    from ivoai.common.paths import xdg_paths
    key, values = sys.argv[1], sys.argv[2].split(",")
    sys.stdin.readline()
    for value in values:
        set_key(key, value, xdg_paths())
    """
)

SECRETS_CHILD = textwrap.dedent(
    """
    import sys
    from ivoai.client.config.secrets import SecretsStore
    from ivoai.common.paths import xdg_paths
    store = SecretsStore(xdg_paths())
    prefix, count = sys.argv[1], int(sys.argv[2])
    sys.stdin.readline()
    for i in range(count):
        store.put(f"{prefix}_{i:016x}", f"value-{prefix}-{i}")
    """
)


def _run_together(commands: list[list[str]]) -> None:
    procs = [
        subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for cmd in commands
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        _out, err = proc.communicate(timeout=WAIT_SECONDS)
        assert proc.returncode == 0, err


def test_two_processes_racing_config_set_both_land_and_comments_survive(xdg: XdgPaths) -> None:
    xdg.config.mkdir(parents=True, mode=0o700)
    xdg.config_file.write_text("schema = 1\n# keep me\n[extra]\nx = 1\n")
    os.chmod(xdg.config_file, 0o600)
    providers = ",".join(["caveman", "headroom"] * 25 + ["direct"])
    workers = ",".join(["1", "2"] * 25 + ["3"])
    _run_together(
        [
            [sys.executable, "-c", CONFIG_CHILD, "compression.provider", providers],
            [sys.executable, "-c", CONFIG_CHILD, "auto.workers", workers],
        ]
    )
    data = read_config_fast(xdg)
    assert data["compression"] == {"provider": "direct", "source": "explicit"}
    assert data["auto"] == {"workers": 3}
    assert data["extra"] == {"x": 1}
    assert "# keep me\n" in xdg.config_file.read_text()
    assert [n for n in os.listdir(xdg.config) if ".tmp-" in n] == []


def test_two_ivoai_config_set_commands_started_together_both_land(xdg: XdgPaths) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "ivoai", "config", "set", key, value],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for key, value in (("compression.provider", "headroom"), ("auto.workers", "1"))
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=WAIT_SECONDS)
        assert proc.returncode == 0, err
    data = read_config_fast(xdg)
    assert data["compression"]["provider"] == "headroom"
    assert data["auto"]["workers"] == 1


def test_two_processes_adding_secrets_lose_none(xdg: XdgPaths) -> None:
    _run_together(
        [
            [sys.executable, "-c", SECRETS_CHILD, "alpha", "15"],
            [sys.executable, "-c", SECRETS_CHILD, "beta", "15"],
        ]
    )
    store = SecretsStore(xdg)
    assert len(store.ids()) == 30
    assert store.get(f"beta_{14:016x}") == "value-beta-14"
