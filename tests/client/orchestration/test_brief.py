"""SharedContextBrief bounds and the byte-stable worker prefix (seed 001 governance)."""

from __future__ import annotations

import subprocess
import sys

import pydantic
import pytest

from ivoai.client.orchestration import _EXPORTS
from ivoai.client.orchestration import __all__ as exported
from ivoai.client.orchestration._brief import SharedContextBrief, worker_prefix


def _brief(**extra: object) -> SharedContextBrief:
    doc: dict[str, object] = {
        "objective": "Fix the parser",
        "research": {"memory": "done", "context": "unavailable"},
    }
    doc.update(extra)
    return SharedContextBrief.model_validate(doc)


def test_the_worker_prefix_is_byte_stable_and_fingerprinted() -> None:
    a = worker_prefix(_brief(facts=["b", "a", "b"], constraints=["no new deps"]))
    b = worker_prefix(_brief(facts=["b", "a"], constraints=["no new deps"]))
    assert a.text == b.text and a.sha256 == b.sha256
    assert a.text.index("## Core rules") < a.text.index("## Project instructions") < a.text.index("## Facts")
    assert "Objective: Fix the parser" in a.text and "memory done, context unavailable" in a.text
    assert worker_prefix(_brief(objective="Fix the lexer")).sha256 != a.sha256


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"objective": "x" * 4097}, "4096"),
        ({"facts": ["f"] * 65}, "64"),
        ({"facts": ["x" * 1025]}, "1024"),
        ({"constraints": ["bad \x1b[2J"]}, "NUL or ESC"),
        ({"shell": "sh"}, "Extra inputs"),
        ({"research": {"memory": "maybe", "context": "done"}}, "done"),
    ],
)
def test_out_of_bounds_briefs_are_refused(extra: dict[str, object], message: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=message):
        _brief(**extra)


def test_the_whole_brief_is_bounded_to_64_kib() -> None:
    lists = {
        k: ["y" * 1000] * 10
        for k in (
            "facts",
            "constraints",
            "decisions",
            "memory_findings",
            "context_findings",
            "non_goals",
            "open_questions",
        )
    }
    with pytest.raises(pydantic.ValidationError, match="65536 bytes"):
        _brief(**lists)


def test_the_package_exports_a_sorted_all_and_imports_lazily() -> None:
    assert list(exported) == sorted(exported) and set(exported) == set(_EXPORTS)
    code = "import sys, ivoai.client.orchestration; print(any(m.endswith('_scheduler') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"
