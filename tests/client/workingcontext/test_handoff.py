"""A WorkerResult crosses to another process (a handoff) and its refs rehydrate the same exact bytes."""

from __future__ import annotations

import os
import subprocess
import sys

from ivoai.client.workingcontext import (
    ArtifactStore,
    Budget,
    EvidenceRole,
    StateDelta,
    WorkerResult,
    WorkerStatus,
    capture,
)

SESSION = "handoff-session"


def test_a_new_primary_rehydrates_the_same_refs_without_duplicating_output(store: ArtifactStore) -> None:
    outputs = {
        "call-1": b"".join(b"FAILED tests/test_%03d.py::test_x\n" % i for i in range(800)),
        "call-2": b"diff --git a/x b/x\n" + b"+added line\n" * 3000,
    }
    refs = []
    for call, data in outputs.items():
        cap = capture(
            store, data, session_id=SESSION, payload_type="test_failure" if call == "call-1" else "diff",
            role=EvidenceRole.TEST if call == "call-1" else EvidenceRole.DIFF, association_id=call,
            budget=Budget.LIGHT,
        )  # fmt: skip
        assert cap.result_ref is not None
        refs.append(cap.result_ref)
    result = WorkerResult(
        status=WorkerStatus.FAILED,
        summary="800 tests fail after the refactor",
        errors=["pytest exited 1"],
        refs=refs,
        state_delta=StateDelta(changed_files=["src/x.py"], next_steps=["fix test_000"]),
    )
    wire = result.model_dump_json()
    assert b"FAILED tests/test_000" not in wire.encode() and len(wire) < 4096

    # The new primary is another process: it only has the JSON and the session.
    script = (
        "import sys\n"
        "from ivoai.client.workingcontext import ArtifactStore, WorkerResult\n"
        "result = WorkerResult.model_validate_json(sys.stdin.read())\n"
        "store = ArtifactStore()\n"
        "for r in result.refs:\n"
        f"    _ref, data = store.read(r.ref.id, session_id={SESSION!r})\n"
        "    sys.stdout.write(f'{r.association_id} {len(data)} {_ref.sha256}\\n')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], input=wire, capture_output=True, text=True, timeout=120, check=False,
        env=dict(os.environ),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split()
    assert lines == [
        tok
        for r in refs
        for tok in (str(r.association_id), str(len(outputs[str(r.association_id)])), r.ref.sha256)
    ]
    assert len(store.list(session_id=SESSION).refs) == 2  # rehydration stored nothing new
