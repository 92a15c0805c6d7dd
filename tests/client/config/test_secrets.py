"""The secrets store: private file, opaque IDs, values never leaked, mutations serialized."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ivoai.client.config.errors import ConfigSchemaError, SecretsError
from ivoai.client.config.secrets import SecretsStore, new_secret_id, validate_secret_id
from ivoai.common.errors import UnsafePathError
from ivoai.common.paths import XdgPaths

VALUE = "sk-ant-api03-SECRETVALUEdonotleak0123456789"


def test_put_get_delete_round_trip_with_private_modes(xdg: XdgPaths) -> None:
    store = SecretsStore(xdg)
    sid = new_secret_id("prof")
    store.put(sid, VALUE)
    assert store.get(sid) == VALUE
    assert store.ids() == [sid]
    assert stat.S_IMODE(os.stat(xdg.secrets_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(xdg.config).st_mode) == 0o700
    doc = json.loads(xdg.secrets_file.read_text())
    assert doc == {"schema": 1, "secrets": {sid: VALUE}}
    assert store.delete(sid) is True
    assert store.delete(sid) is False
    assert store.get(sid) is None
    assert store.ids() == []


def test_missing_store_reads_as_empty_without_creating_files(xdg: XdgPaths) -> None:
    store = SecretsStore(xdg)
    assert store.ids() == []
    assert store.get(new_secret_id("x")) is None
    assert not xdg.config.exists()


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "PROF_0123456789abcdef",
        "prof",
        "prof_short",
        "prof_../../etc/passwd",
        "prof_0123456789\nabc",
        "a" * 17 + "_0123456789abcdef",
        "https://example.com/x_0123456789",
    ],
)
def test_malformed_secret_ids_are_refused(xdg: XdgPaths, bad: str) -> None:
    with pytest.raises(SecretsError, match="invalid secret ID"):
        SecretsStore(xdg).put(bad, "value")


def test_new_secret_ids_are_random_and_valid() -> None:
    a, b = new_secret_id("srv"), new_secret_id("srv")
    assert a != b
    assert validate_secret_id(a) == a


def test_values_never_appear_in_repr_or_errors(xdg: XdgPaths) -> None:
    store = SecretsStore(xdg)
    store.put(new_secret_id("prof"), VALUE)
    assert VALUE not in repr(store)
    os.chmod(xdg.secrets_file, 0o644)
    with pytest.raises(UnsafePathError) as info:
        store.ids()
    assert VALUE not in str(info.value)


def test_world_readable_secrets_file_is_refused_with_path_and_fix(xdg: XdgPaths) -> None:
    store = SecretsStore(xdg)
    store.put(new_secret_id("prof"), VALUE)
    os.chmod(xdg.secrets_file, 0o644)
    with pytest.raises(UnsafePathError) as info:
        store.get(new_secret_id("prof"))
    message = str(info.value)
    assert str(xdg.secrets_file) in message
    assert "0644" in message
    assert f"chmod 0600 {xdg.secrets_file}" in message


def test_symlinked_config_directory_is_refused_with_path_and_fix(
    xdg: XdgPaths, tmp_path: os.PathLike[str]
) -> None:
    elsewhere = os.path.join(tmp_path, "elsewhere")
    os.mkdir(elsewhere, 0o700)
    xdg.config.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(elsewhere, xdg.config)
    with pytest.raises(UnsafePathError) as info:
        SecretsStore(xdg).put(new_secret_id("prof"), VALUE)
    assert str(xdg.config) in str(info.value)
    assert "replace it with a real directory" in str(info.value)
    assert os.listdir(elsewhere) == []


def test_corrupt_store_is_reported_without_content_and_left_untouched(xdg: XdgPaths) -> None:
    store = SecretsStore(xdg)
    store.put(new_secret_id("prof"), VALUE)
    broken = b'{"schema": 1, "secrets": {"prof_0123456789abcdef": "' + VALUE.encode() + b'"'
    xdg.secrets_file.write_bytes(broken)
    with pytest.raises(SecretsError) as info:
        store.put(new_secret_id("prof"), "other-value")
    assert str(xdg.secrets_file) in str(info.value)
    assert "line 1" in str(info.value)
    assert VALUE not in str(info.value)
    assert xdg.secrets_file.read_bytes() == broken


def test_newer_schema_fails_closed(xdg: XdgPaths) -> None:
    store = SecretsStore(xdg)
    store.put(new_secret_id("prof"), VALUE)
    before = json.dumps({"schema": 2, "secrets": {}}).encode()
    xdg.secrets_file.write_bytes(before)
    with pytest.raises(ConfigSchemaError, match="newer than this ivoai"):
        store.put(new_secret_id("prof"), VALUE)
    assert xdg.secrets_file.read_bytes() == before


def test_oversized_value_is_refused_naming_the_limit(xdg: XdgPaths) -> None:
    with pytest.raises(SecretsError, match="65536 bytes"):
        SecretsStore(xdg).put(new_secret_id("prof"), "x" * (64 * 1024 + 1))
    assert not xdg.secrets_file.exists()


def test_separate_store_instances_keep_each_others_entries(xdg: XdgPaths) -> None:
    a, b = SecretsStore(xdg), SecretsStore(xdg)
    ida, idb = new_secret_id("a"), new_secret_id("b")
    a.put(ida, "one-value")
    b.put(idb, "two-value")
    assert a.ids() == sorted([ida, idb])
    assert a.get(idb) == "two-value"
