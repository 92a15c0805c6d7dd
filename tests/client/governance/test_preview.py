"""Large output previews, trusted tool-output import, and metrics that never carry a body."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ivoai.client.governance import ArtifactMetrics, RunMetrics, import_tool_output, preview_large_output
from ivoai.client.workingcontext import ArtifactStore, Budget
from ivoai.common.errors import UnsafePathError
from ivoai.common.paths import XdgPaths

SESSION = "gov-session"
SECRET_LINE = b"AWS_SECRET_ACCESS_KEY = abcdefghijabcdefghijabcdefghijabcdefghij\n"


@pytest.fixture
def store(xdg: XdgPaths) -> ArtifactStore:
    return ArtifactStore(xdg.working_context_dir)


@pytest.fixture
def trusted(tmp_path: Path) -> Path:
    d = tmp_path / "tool-out"
    d.mkdir(mode=0o700)
    return d


def _staged(store: ArtifactStore) -> list[Path]:
    staging = store.root / "staging"
    return list(staging.iterdir()) if staging.exists() else []


def _output(n: int = 4000) -> bytes:
    return b"".join(b"step %05d ok\n" % i for i in range(n))


def test_large_output_preview_is_head_tail_with_byte_summary_and_reference(store: ArtifactStore) -> None:
    data = _output()
    metrics = ArtifactMetrics()
    p = preview_large_output(store, data, session_id=SESSION, budget=Budget.LIGHT, metrics=metrics)
    assert p.head_bytes > 0 and p.tail_bytes > 0 and p.total_bytes == len(data)
    assert len(p.text.encode()) <= Budget.LIGHT.bytes and f"{len(data)} bytes" in p.text
    assert p.capture.result_ref is not None and p.capture.result_ref.ref.id in p.text
    assert (metrics.stored, metrics.stored_bytes, metrics.modes) == (1, len(data), {"head_tail": 1})


def test_suspected_credentials_remove_the_preview_and_the_staged_artifact(store: ArtifactStore) -> None:
    data = _output(2000) + SECRET_LINE + _output(2000)
    metrics = ArtifactMetrics()
    p = preview_large_output(store, data, session_id=SESSION, metrics=metrics)
    assert p.withheld and "step 0" not in p.text and p.head_bytes == p.tail_bytes == 0
    assert store.list().refs == () and _staged(store) == []
    assert metrics.refused_credentials == 1


def test_trusted_tool_output_is_imported_and_its_temporary_file_deleted(
    store: ArtifactStore, trusted: Path
) -> None:
    (trusted / "out.log").write_bytes(_output())
    p = import_tool_output(store, trusted, "out.log", session_id=SESSION)
    assert p.capture.result_ref is not None
    assert store.read(p.capture.result_ref.ref.id, session_id=SESSION)[1] == _output()
    assert not (trusted / "out.log").exists()


def test_credentials_in_tool_output_delete_both_temporary_and_staged_copies(
    store: ArtifactStore, trusted: Path
) -> None:
    (trusted / "out.log").write_bytes(_output(100) + SECRET_LINE)
    p = import_tool_output(store, trusted, "out.log", session_id=SESSION)
    assert p.withheld
    assert not (trusted / "out.log").exists()
    assert store.list().refs == () and _staged(store) == []


@pytest.mark.parametrize("name", ["../victim.txt", "/etc/passwd", "sub/out.log", "", ".."])
def test_forged_tool_output_names_are_neither_read_nor_deleted(
    store: ArtifactStore, trusted: Path, name: str
) -> None:
    victim = trusted.parent / "victim.txt"
    victim.write_bytes(b"do not touch")
    with pytest.raises(UnsafePathError):
        import_tool_output(store, trusted, name, session_id=SESSION)
    assert victim.read_bytes() == b"do not touch"
    assert not store.root.exists() or store.list().refs == ()


def test_a_symlinked_tool_output_is_neither_read_nor_deleted(store: ArtifactStore, trusted: Path) -> None:
    victim = trusted.parent / "victim.txt"
    victim.write_bytes(b"do not touch")
    (trusted / "out.log").symlink_to(victim)
    with pytest.raises(UnsafePathError, match="symlink"):
        import_tool_output(store, trusted, "out.log", session_id=SESSION)
    assert victim.read_bytes() == b"do not touch" and (trusted / "out.log").is_symlink()


def test_an_untrusted_directory_is_refused(store: ArtifactStore, tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    os.chmod(loose, 0o755)
    (loose / "out.log").write_bytes(b"x")
    with pytest.raises(UnsafePathError):
        import_tool_output(store, loose, "out.log", session_id=SESSION)
    assert (loose / "out.log").exists()


def test_run_metrics_never_contain_a_body_and_zero_cache_tokens_stay_zero(store: ArtifactStore) -> None:
    metrics = RunMetrics()
    marker = b"INTERNAL-BODY-MARKER "
    preview_large_output(store, marker * 2000, session_id=SESSION, metrics=metrics.artifacts)
    preview_large_output(store, marker + SECRET_LINE, session_id=SESSION, metrics=metrics.artifacts)
    metrics.context.prompt_cache.declared_available = True
    metrics.context.prompt_cache.add_usage(read_tokens=0, write_tokens=None)
    dumped = json.dumps(metrics.to_dict())
    assert "INTERNAL-BODY-MARKER" not in dumped and "abcdefghij" not in dumped
    cache = metrics.to_dict()["context"]["prompt_cache"]  # type: ignore[index]
    assert cache == {"declared_available": True, "read_tokens": 0, "write_tokens": None}
    assert metrics.artifacts.stored == 1 and metrics.artifacts.refused_credentials == 1
