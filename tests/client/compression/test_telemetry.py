"""Compression telemetry: bounded schema, private rotating NDJSON, failures never raise."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ivoai.client.compression import telemetry as telemetry_mod
from ivoai.client.compression.telemetry import Telemetry, build_event, estimate_tokens
from ivoai.common.limits import TELEMETRY_ROTATIONS_KEPT
from ivoai.common.paths import XdgPaths
from tests.conftest import run_ivoai


def test_only_bounded_fields_survive_and_free_text_cannot_enter() -> None:
    event = build_event(
        executor="codex",
        effective="caveman",
        requested="caveman",
        fidelity="compressible",
        result="ok",
        bytes_before=1000,
        bytes_after=250,
        tokens_before=estimate_tokens(1000),
        tokens_after=estimate_tokens(250),
        latency_ms=12,
        recovery_count=0,
        bypass=False,
        fallback=False,
        payload_type="json",
        prompt="secret prompt",
        path="/home/u/x",
        env={"OPENAI_API_KEY": "sk"},
        reason="Weird reason /etc",
        session_id="ses_" + "a" * 32,
    )
    assert event["ratio"] == 0.25 and event["tokens_estimated"] is True
    assert event["reason"] == "other"
    assert not {"prompt", "path", "env"} & set(event)
    assert "secret" not in json.dumps(event) and "/home" not in json.dumps(event)
    assert build_event(executor="vim", effective="zstd")["executor"] == "other"
    assert "bytes_before" not in build_event(bytes_before=-1)


def test_events_are_appended_privately_and_rotated(xdg: XdgPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 4096  # the same rotation logic with a small file, to keep the test fast
    monkeypatch.setattr(telemetry_mod, "TELEMETRY_FILE_MAX_BYTES", limit)
    telemetry = Telemetry(xdg.state)
    line_size = len(json.dumps(build_event(executor="codex", result="ok", payload_type="x" * 60))) + 1
    for _ in range(limit // line_size * (TELEMETRY_ROTATIONS_KEPT + 2)):
        assert telemetry.record(executor="codex", result="ok", payload_type="x" * 60)
    assert stat.S_IMODE(Path(telemetry.path).stat().st_mode) == 0o600
    assert Path(telemetry.path).stat().st_size <= limit
    rotated = sorted(
        p.name for p in Path(telemetry.path).parent.iterdir() if p.name.startswith("compression.ndjson.")
    )
    assert rotated == [f"compression.ndjson.{i}" for i in range(1, TELEMETRY_ROTATIONS_KEPT + 1)]


def test_a_broken_telemetry_directory_never_blocks_a_launch(xdg: XdgPaths, tmp_path: Path) -> None:
    xdg.state.mkdir(parents=True, mode=0o700, exist_ok=True)
    (xdg.state / "telemetry").write_text("not a directory")
    assert Telemetry(xdg.state).record(executor="codex", result="ok") is False
    from tests.client.agents.standins import install_client

    install_client(xdg, "codex")
    result = run_ivoai("codex", "--direct", env=dict(os.environ, STANDIN_MODE="exit:0"))
    assert result.returncode == 0, result.stderr


def test_the_bypass_event_fidelity_class_is_what_the_classifier_says_for_memory_responses() -> None:
    from ivoai.client.compression.fidelity import classify

    assert str(classify("memory_response")) == "exact_required"  # launch.py records this literal
