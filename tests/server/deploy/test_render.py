"""Rendered deployment: units pass `systemd-analyze verify`, exposure is OK, Compose validates."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ivoai.common.errors import ValidationError
from ivoai.server.deploy.apply import ApplyError, apply
from ivoai.server.deploy.render import RenderOptions, read_existing_secrets, render, write_render
from tests.conftest import CliRunner

URL = "https://ai.example.com"


def _analyze() -> str:
    found = shutil.which("systemd-analyze")
    assert found, "systemd-analyze is missing: scripts/test installs Debian's systemd package"
    return found


def _verify(unit: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_analyze(), "verify", str(unit)], capture_output=True, text=True, timeout=60)


def _exposure(unit: Path) -> tuple[float, str]:
    out = subprocess.run(
        [_analyze(), "security", "--offline=yes", str(unit)], capture_output=True, text=True, timeout=60
    ).stdout
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+) (\w+)", out)
    assert m, out[-500:]
    return float(m.group(1)), m.group(2)


def _render(tmp_path: Path, mode: str, workers: int = 1) -> Path:
    out = tmp_path / mode
    write_render(render(RenderOptions(public_url=URL, mode=mode, workers=workers)), out)  # type: ignore[arg-type]
    return out


@pytest.mark.parametrize(
    ("mode", "units"),
    [
        ("embedded", {"ivoai-gateway.service"}),
        ("services", {"ivoai-gateway.service", "ivoai-context.service", "ivoai-reingest.timer"}),
    ],
)
def test_every_rendered_unit_passes_systemd_analyze_verify_with_exposure_ok(
    tmp_path: Path, mode: str, units: set[str]
) -> None:
    out = _render(tmp_path, mode, workers=2 if mode == "services" else 1)
    unit_dir = out / "etc/systemd/system"
    assert {p.name for p in unit_dir.iterdir()} == units
    exposures = {}
    for unit in sorted(unit_dir.iterdir()):
        result = _verify(unit)
        assert result.returncode == 0 and result.stderr == "" and result.stdout == "", result.stderr
        if unit.suffix == ".service":
            exposures[unit.name] = _exposure(unit)
    print(json.dumps({"mode": mode, "exposure": exposures}))
    for level, label in exposures.values():
        assert level <= 2.0 and label == "OK"


def test_systemd_analyze_verify_catches_a_broken_unit(tmp_path: Path) -> None:
    """Control: the verification above would notice a typo or a bad value."""
    good = _render(tmp_path, "embedded") / "etc/systemd/system/ivoai-gateway.service"
    bad = tmp_path / "ivoai-broken.service"
    bad.write_text(good.read_text().replace("Restart=on-failure", "Restart=sometimes\nProtectSystm=strict"))
    result = _verify(bad)
    assert "Failed to parse service restart specifier" in result.stderr
    assert "Unknown key 'ProtectSystm'" in result.stderr


def test_units_carry_the_required_hardening_and_limited_write_paths(tmp_path: Path) -> None:
    units = _render(tmp_path, "services") / "etc/systemd/system"
    for name in ("ivoai-gateway.service", "ivoai-context.service"):
        text = (units / name).read_text()
        for line in (
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "ProtectHome=yes",
            "PrivateTmp=yes",
            "UMask=0077",
            "ProtectProc=invisible",
            "User=ivoai-gateway",
            "Group=ivoai",
        ):
            assert f"\n{line}\n" in text, (name, line)
        assert re.search(r"^CapabilityBoundingSet=$", text, re.M)
    gateway = (units / "ivoai-gateway.service").read_text()
    assert "\nRestart=on-failure\n" in gateway and "--workers 2" not in gateway
    rw = re.search(r"^ReadWritePaths=(.*)$", gateway, re.M)
    assert rw and "/var/lib/ivoai " not in rw.group(1) + " " and "/var/lib/ivoai/backups" not in rw.group(1)
    context = (units / "ivoai-context.service").read_text()
    rw = re.search(r"^ReadWritePaths=(.*)$", context, re.M)
    assert rw and rw.group(1).split() == ["/var/lib/ivoai/context", "/var/lib/ivoai/run"]
    for hidden in ("enrollment", "oauth", "memory"):
        assert f"/var/lib/ivoai/.sandbox-empty:/var/lib/ivoai/{hidden}" in context
    assert "/etc/ivoai/secrets:/var/lib/ivoai/secrets" not in context  # only the two key files
    timer = (units / "ivoai-reingest.timer").read_text()
    assert "Unit=ivoai-context.service" in timer and "OnUnitInactiveSec=300s" in timer


def test_compose_file_validates_against_the_compose_specification(tmp_path: Path) -> None:
    out = _render(tmp_path, "services")
    compose = out / "etc/ivoai/compose.yaml"
    checker = Path(sys.executable).parent / "check-jsonschema"
    ok = subprocess.run(
        [str(checker), "--builtin-schema", "vendor.compose-spec", str(compose)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    doc = json.loads(compose.read_text().split("\n", 1)[1])
    bad = tmp_path / "bad-compose.yaml"
    doc_bad = json.loads(json.dumps(doc))
    doc_bad["services"]["qdrant"]["restart_policy"] = "always"  # not a Compose key
    bad.write_text(json.dumps(doc_bad))
    refused = subprocess.run(
        [str(checker), "--builtin-schema", "vendor.compose-spec", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0  # control: the schema is really applied

    for service in doc["services"].values():
        assert re.fullmatch(r"[^@\s]+@sha256:[0-9a-f]{64}", service["image"])
        assert all(p.startswith("127.0.0.1:") for p in service.get("ports", []))
        assert service["cap_drop"] == ["ALL"] and service["read_only"] is True
    assert doc["networks"]["backend"]["internal"] is True
    publish = doc["networks"]["publish"]["driver_opts"]
    assert publish["com.docker.network.bridge.enable_ip_masquerade"] == "false"


def test_generated_keys_are_private_consistent_and_kept_on_rerender(tmp_path: Path) -> None:
    out = _render(tmp_path, "services")
    for rel in (
        "etc/ivoai/secrets/qdrant.key",
        "etc/ivoai/backends/qdrant.env",
        "etc/ivoai/backends/tei.env",
    ):
        assert stat.S_IMODE(os.stat(out / rel).st_mode) == 0o600
    for rel in ("etc/ivoai/secrets", "etc/ivoai/backends"):
        assert stat.S_IMODE(os.stat(out / rel).st_mode) == 0o700
    key = (out / "etc/ivoai/secrets/qdrant.key").read_text().strip()
    assert (
        len(key) >= 43
        and f"QDRANT__SERVICE__API_KEY={key}\n" in (out / "etc/ivoai/backends/qdrant.env").read_text()
    )
    assert key not in (out / "etc/ivoai/compose.yaml").read_text()
    again = render(
        RenderOptions(public_url=URL, mode="services"), existing_secrets=read_existing_secrets(out)
    )
    assert next(f for f in again if f.path.endswith("qdrant.key")).content.decode().strip() == key
    config = (out / "etc/ivoai/config.toml").read_text()
    assert 'qdrant_api_key_file = "qdrant.key"' in config and key not in config


def test_embedded_mode_refuses_more_than_one_worker_and_privileged_ports() -> None:
    with pytest.raises(ValidationError, match="services"):
        render(RenderOptions(public_url=URL, mode="embedded", workers=2))
    with pytest.raises(ValidationError, match="1024"):
        render(RenderOptions(public_url=URL, listen="0.0.0.0:443"))
    with pytest.raises(ValidationError, match="public-url"):
        render(RenderOptions(public_url="http://ai.example.com"))


def test_apply_into_a_root_creates_users_layout_and_owners(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        with pytest.raises(ApplyError, match="root"):
            apply(RenderOptions(public_url=URL), tmp_path)
        return
    root = tmp_path / "root"
    root.mkdir()
    steps = apply(RenderOptions(public_url=URL, mode="services"), root)
    assert [s["action"] for s in steps if s.get("skipped")] == ["backends", "systemd", "start"]
    passwd = (root / "etc/passwd").read_text()
    uid = int(next(line for line in passwd.splitlines() if line.startswith("ivoai-gateway:")).split(":")[2])
    assert ":/usr/sbin/nologin" in passwd.split("ivoai-gateway:", 1)[1].splitlines()[0]
    for rel, mode in (
        ("etc/ivoai/secrets", 0o700),
        ("etc/ivoai/secrets/tei.key", 0o600),
        ("var/lib/ivoai", 0o700),
        ("var/lib/ivoai/memory", 0o700),
        ("etc/ivoai/config.toml", 0o600),
    ):
        st = os.stat(root / rel)
        assert (stat.S_IMODE(st.st_mode), st.st_uid) == (mode, uid), rel
    assert os.stat(root / "etc/ivoai/backends/tei.env").st_uid == 0
    ids = (root / "etc/ivoai/backends/ids.env").read_text()
    assert ids.startswith("IVOAI_BACKEND_UID=")


def test_setup_cli_renders_with_json(cli: CliRunner, tmp_path: Path) -> None:
    r = cli(
        "server",
        "setup",
        "--render",
        str(tmp_path / "r"),
        "--mode",
        "services",
        "--public-url",
        URL,
        "--json",
    )
    assert r.code == 0, r.err
    listing = json.loads(r.out)
    assert {f["path"] for f in listing["files"]} >= {
        "/etc/systemd/system/ivoai-context.service",
        "/etc/ivoai/compose.yaml",
    }
    assert all("API_KEY" not in json.dumps(f) for f in listing["files"])
    both = cli("server", "setup", "--render", str(tmp_path / "x"), "--apply")
    assert both.code == 2 and "exactly one" in both.err


def test_tls_copies_are_service_owned_private_files_named_in_the_config(tmp_path: Path) -> None:
    from tests.tls import self_signed_cert

    cert, key = self_signed_cert(tmp_path)
    out = tmp_path / "r"
    files = render(
        RenderOptions(public_url="https://127.0.0.1:8443", listen="0.0.0.0:8443", tls_cert=cert, tls_key=key)
    )
    write_render(files, out)
    copies = {f.path: f for f in files if "/tls/" in f.path}
    assert set(copies) == {"/etc/ivoai/secrets/tls/gateway.crt", "/etc/ivoai/secrets/tls/gateway.key"}
    assert all(f.owner == "ivoai-gateway" and f.mode == 0o600 and f.secret for f in copies.values())
    assert (out / "etc/ivoai/secrets/tls/gateway.key").read_bytes() == key.read_bytes()
    assert stat.S_IMODE(os.stat(out / "etc/ivoai/secrets/tls").st_mode) == 0o700
    config = (out / "etc/ivoai/config.toml").read_text()
    assert 'tls_cert = "/var/lib/ivoai/secrets/tls/gateway.crt"' in config
    assert 'tls_key = "/var/lib/ivoai/secrets/tls/gateway.key"' in config
    with pytest.raises(ValidationError, match="together"):
        render(RenderOptions(public_url=URL, tls_cert=cert))
    with pytest.raises(ValidationError, match="PEM"):
        render(RenderOptions(public_url=URL, tls_cert=tmp_path / "r" / "etc/ivoai/config.toml", tls_key=key))
