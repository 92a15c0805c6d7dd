"""config.toml: byte-preserving edits, typed projection, schema gate, clear errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from ivoai.client.config.errors import ConfigError, ConfigSchemaError, UnknownConfigKeyError
from ivoai.client.config.fast import read_config_fast
from ivoai.client.config.store import load_config, set_key, update_config
from ivoai.common.errors import UnsafePathError, UsageError
from ivoai.common.paths import XdgPaths

USER_FILE = textwrap.dedent(
    """\
    schema = 1
    # my notes about ivoai   (kept byte for byte)
    future_flag = true   # a key a newer ivoai added

    [compression]
    provider = "headroom"
    unknown_inner = [1, 2,   3]  # odd spacing survives

    [plugins.example]
    # comment inside an unknown table
    url = "https://example.invalid"
    """
)


def _write(xdg: XdgPaths, text: str) -> None:
    xdg.config.mkdir(parents=True, mode=0o700, exist_ok=True)
    xdg.config_file.write_text(text)
    os.chmod(xdg.config_file, 0o600)


def test_defaults_apply_when_no_file_exists(xdg: XdgPaths) -> None:
    cfg = load_config(xdg)
    assert cfg.compression.provider is None
    assert cfg.effective("compression.provider") == ("caveman", "default")
    assert cfg.effective("auto.workers") == (2, "default")
    assert read_config_fast(xdg) == {}
    assert not xdg.config.exists()


def test_set_creates_a_private_file_with_schema_and_explicit_source(xdg: XdgPaths) -> None:
    cfg = set_key("compression.provider", "direct", xdg)
    assert cfg.compression.provider == "direct"
    assert cfg.compression.source == "explicit"
    assert oct(os.stat(xdg.config_file).st_mode & 0o777) == "0o600"
    data = read_config_fast(xdg)
    # A new file starts at the current schema (2: compression normalized, see config/migrations.py).
    assert data == {"schema": 2, "compression": {"provider": "direct", "source": "explicit"}}


def test_unknown_tables_keys_and_comments_survive_a_write_byte_for_byte(xdg: XdgPaths) -> None:
    _write(xdg, USER_FILE)
    set_key("compression.provider", "direct", xdg)
    set_key("auto.workers", "3", xdg)
    expected = (
        USER_FILE.replace('provider = "headroom"', 'provider = "direct"').replace(
            "odd spacing survives\n", 'odd spacing survives\nsource = "explicit"\n'
        )
        + "\n[auto]\nworkers = 3\n"
    )
    assert xdg.config_file.read_text() == expected
    assert load_config(xdg).auto.workers == 3


def test_a_trailing_comment_on_a_changed_value_is_kept(xdg: XdgPaths) -> None:
    _write(xdg, 'schema = 1\n[compression]\nprovider = "headroom"   # chosen for reasons\n')
    set_key("compression.provider", "caveman", xdg)
    assert xdg.config_file.read_text() == (
        'schema = 1\n[compression]\nprovider = "caveman"   # chosen for reasons\nsource = "explicit"\n'
    )


def test_setting_the_same_document_twice_is_stable(xdg: XdgPaths) -> None:
    _write(xdg, USER_FILE)
    set_key("compression.provider", "direct", xdg)
    once = xdg.config_file.read_bytes()
    set_key("compression.provider", "direct", xdg)
    assert xdg.config_file.read_bytes() == once


def test_a_file_without_schema_gets_one_prepended_and_keeps_the_rest(xdg: XdgPaths) -> None:
    legacy = '# legacy\n[compression]\nprovider = "headroom"\n'
    _write(xdg, legacy)
    set_key("auto.workers", "1", xdg)
    after = xdg.config_file.read_text()
    assert after.startswith('schema = 1\n# legacy\n[compression]\nprovider = "headroom"\n')


def test_corrupt_toml_names_file_and_line_and_is_left_untouched(xdg: XdgPaths) -> None:
    broken = 'schema = 1\n[compression]\nprovider = "direct\nother = 1\n'
    _write(xdg, broken)
    for action in (
        lambda: load_config(xdg),
        lambda: read_config_fast(xdg),
        lambda: set_key("compression.provider", "caveman", xdg),
    ):
        with pytest.raises(ConfigError) as info:
            action()
        assert str(xdg.config_file) in str(info.value)
        assert "line 3" in str(info.value)
    assert xdg.config_file.read_text() == broken


def test_invalid_known_value_in_file_names_file_and_key(xdg: XdgPaths) -> None:
    _write(xdg, 'schema = 1\n[compression]\nprovider = "zstd"\n')
    with pytest.raises(ConfigError) as info:
        load_config(xdg)
    assert str(xdg.config_file) in str(info.value)
    assert "compression.provider" in str(info.value)


def test_newer_schema_fails_closed_and_nothing_is_written(xdg: XdgPaths) -> None:
    _write(xdg, "schema = 7\n")
    with pytest.raises(ConfigSchemaError, match="schema 7, newer"):
        read_config_fast(xdg)
    with pytest.raises(ConfigSchemaError):
        set_key("compression.provider", "direct", xdg)
    assert xdg.config_file.read_text() == "schema = 7\n"


def test_unknown_key_is_refused_with_the_valid_list(xdg: XdgPaths) -> None:
    with pytest.raises(UnknownConfigKeyError) as info:
        set_key("compression.level", "9", xdg)
    assert "auto.workers, compression.provider" in str(info.value)
    assert info.value.exit_code == 2
    assert not xdg.config_file.exists()


def test_internal_source_key_cannot_be_set_directly(xdg: XdgPaths) -> None:
    with pytest.raises(UnknownConfigKeyError, match="compression.source cannot be set"):
        set_key("compression.source", "explicit", xdg)


@pytest.mark.parametrize(
    ("key", "value"),
    [("compression.provider", "gzip"), ("auto.workers", "4"), ("auto.workers", "0"), ("auto.workers", "two")],
)
def test_invalid_values_name_the_key_and_the_allowed_values(xdg: XdgPaths, key: str, value: str) -> None:
    with pytest.raises(UsageError) as info:
        set_key(key, value, xdg)
    assert key in str(info.value)
    assert "expected" in str(info.value)


def test_a_mutation_that_would_produce_an_invalid_config_is_not_written(xdg: XdgPaths) -> None:
    set_key("compression.provider", "direct", xdg)
    before = xdg.config_file.read_bytes()

    def bad(doc: object) -> None:
        doc["compression"]["provider"] = "bogus"  # type: ignore[index]

    with pytest.raises(ConfigError):
        update_config(bad, xdg)
    assert xdg.config_file.read_bytes() == before


def test_group_writable_config_file_is_refused(xdg: XdgPaths) -> None:
    set_key("compression.provider", "direct", xdg)
    os.chmod(xdg.config_file, 0o620)
    with pytest.raises(UnsafePathError, match="chmod"):
        load_config(xdg)


def test_fast_reader_module_imports_neither_tomlkit_nor_pydantic() -> None:
    code = (
        "import sys, json; import ivoai.client.config.fast, ivoai.client.config.secrets; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    heavy = [m for m in out.stdout.split('"') if m.split(".")[0] in {"tomlkit", "pydantic", "typer", "rich"}]
    assert heavy == []
