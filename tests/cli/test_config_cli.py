"""`ivoai config show|set` through the CLI entry point."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ivoai.common.paths import XdgPaths
from tests.conftest import CliRunner


def test_set_then_show_json_round_trips(cli: CliRunner, xdg: XdgPaths) -> None:
    result = cli("config", "set", "compression.provider", "direct")
    assert result.code == 0, result.err
    assert "compression.provider = direct" in result.err
    doc = json.loads(cli("config", "show", "--json").out)
    assert doc["exists"] is True
    assert doc["path"] == str(xdg.config_file)
    assert doc["values"]["compression.provider"]["value"] == "direct"
    assert doc["values"]["compression.provider"]["origin"] == "file"
    assert doc["values"]["compression.source"]["value"] == "explicit"
    assert doc["values"]["auto.workers"] == {
        "value": 2,
        "origin": "default",
        "allowed": "integer 1..3",
        "description": "Concurrent AUTO workers (default 2, hard cap 3).",
    }


def test_unknown_key_exits_2_listing_valid_keys_and_writes_nothing(cli: CliRunner, xdg: XdgPaths) -> None:
    result = cli("config", "set", "compression.level", "9")
    assert result.code == 2
    assert result.err == (
        "ivoai: error: unknown config key 'compression.level'; "
        "valid keys: auto.conserve_threshold, auto.coordinator, auto.resume_after_reset, "
        "auto.resume_windows, auto.workers, compression.provider\n"
    )
    assert not xdg.config.exists()


def test_invalid_value_exits_2_naming_the_allowed_values(cli: CliRunner) -> None:
    result = cli("config", "set", "compression.provider", "zstd")
    assert result.code == 2
    assert "caveman, headroom, direct" in result.err


def test_missing_arguments_are_a_usage_error(cli: CliRunner) -> None:
    assert cli("config", "set", "compression.provider").code == 2


def test_corrupt_config_is_one_line_error_with_file_and_line_and_untouched(
    cli: CliRunner, xdg: XdgPaths
) -> None:
    xdg.config.mkdir(parents=True, mode=0o700)
    broken = 'schema = 1\nname = "unterminated\n'
    xdg.config_file.write_text(broken)
    os.chmod(xdg.config_file, 0o600)
    for args in (("config", "show"), ("config", "set", "auto.workers", "3")):
        result = cli(*args)
        assert result.code == 1
        assert result.err.count("\n") == 1
        assert f"{xdg.config_file}: invalid TOML at line 2" in result.err
        assert "Traceback" not in result.err
    assert xdg.config_file.read_text() == broken


def test_show_text_lists_keys_with_origin(cli: CliRunner) -> None:
    result = cli("config", "show")
    assert result.code == 0
    assert "compression.provider\tcaveman\tdefault\tcaveman|headroom|direct" in result.out
    assert "not created yet" in result.err


def test_config_set_refuses_a_symlinked_config_directory_with_path_and_fix(
    cli: CliRunner, xdg: XdgPaths, tmp_path: Path
) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    xdg.config.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(real, xdg.config)
    result = cli("config", "set", "compression.provider", "direct")
    assert result.code == 1
    assert str(xdg.config) in result.err
    assert "replace it with a real directory" in result.err
    assert list(real.iterdir()) == []


def test_config_show_refuses_a_world_writable_config_file(cli: CliRunner, xdg: XdgPaths) -> None:
    assert cli("config", "set", "auto.workers", "1").code == 0
    os.chmod(xdg.config_file, 0o666)
    result = cli("config", "show")
    assert result.code == 1
    assert f"chmod go-w {xdg.config_file}" in result.err


def test_the_auto_part_2_keys_are_validated_and_persisted(cli: CliRunner, xdg: XdgPaths) -> None:
    """Issue 16: auto.resume_after_reset is a boolean, the others name their range or choices."""
    assert cli("config", "set", "auto.resume_after_reset", "true").code == 0
    assert cli("config", "set", "auto.coordinator", "ruflo").code == 0
    bad = cli("config", "set", "auto.resume_after_reset", "yes")
    assert bad.code == 2 and "auto.resume_after_reset; expected true or false" in bad.err
    assert "expected an integer 1..100" in cli("config", "set", "auto.conserve_threshold", "0").err
    assert "native, ruflo" in cli("config", "set", "auto.coordinator", "swarm").err
    assert "resume_after_reset = true" in xdg.config_file.read_text()
    shown = json.loads(cli("config", "show", "--json").out)["values"]
    assert shown["auto.resume_after_reset"] == {
        "value": True,
        "origin": "file",
        "allowed": "true|false",
        "description": shown["auto.resume_after_reset"]["description"],
    }
    assert shown["auto.coordinator"]["value"] == "ruflo" and shown["auto.resume_windows"]["value"] == 3
