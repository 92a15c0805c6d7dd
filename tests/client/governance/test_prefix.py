"""The stable prefix: fixed section order, byte-stable rendering, SHA-256 fingerprint."""

from __future__ import annotations

import hashlib

import pytest

import ivoai.client.governance as gov
from ivoai.client.governance import SECTION_ORDER, RunMetrics, ToolSpec, build_stable_prefix
from ivoai.common.errors import TooLargeError, ValidationError
from ivoai.common.limits import STABLE_PREFIX_MAX_BYTES

TOOLS = [ToolSpec("search", "Search the context index."), ToolSpec("apply_patch", "Apply a patch.")]


def test_package_exports_are_sorted() -> None:
    assert gov.__all__ == sorted(gov.__all__)


def test_sections_come_in_the_fixed_order_and_the_fingerprint_is_the_sha256_of_the_bytes() -> None:
    p = build_stable_prefix(
        core_rules="Be exact.", project_instructions="Use pytest.", tools=TOOLS, facts=["f1"], skills=["s1"]
    )
    headers = [line for line in p.text.splitlines() if line.startswith("## ")]
    assert headers == ["## Core rules", "## Project instructions", "## Tools", "## Facts", "## Skills"]
    assert list(p.section_sha256) == list(SECTION_ORDER)
    assert p.sha256 == hashlib.sha256(p.text.encode()).hexdigest() and p.byte_length == len(p.text.encode())


def test_equal_inputs_in_any_order_or_line_ending_give_identical_bytes() -> None:
    a = build_stable_prefix(
        core_rules="Rule one.\r\nRule two.   \n", tools=TOOLS, facts=["a", "b", "a"], skills=["y", "x"]
    )
    b = build_stable_prefix(
        core_rules="Rule one.\nRule two.",
        tools=list(reversed(TOOLS)),
        facts=["a", "b"],
        skills=["x", "y", "x"],
    )
    assert a.text == b.text and a.sha256 == b.sha256


def test_facts_keep_their_order_and_a_changed_fact_changes_only_that_section() -> None:
    a = build_stable_prefix(core_rules="r", facts=["first", "second"])
    b = build_stable_prefix(core_rules="r", facts=["second", "first"])
    assert a.sha256 != b.sha256
    changed = [k for k in SECTION_ORDER if a.section_sha256[k] != b.section_sha256[k]]
    assert changed == ["facts"]


def test_empty_sections_keep_their_headers() -> None:
    p = build_stable_prefix(core_rules="")
    assert p.text.count("(none)") == 5


def test_bad_prefix_input_is_rejected_naming_field_and_limit() -> None:
    with pytest.raises(ValidationError, match="duplicate tool"):
        build_stable_prefix(core_rules="r", tools=[ToolSpec("a", "x"), ToolSpec("a", "y")])
    with pytest.raises(ValidationError, match="facts"):
        build_stable_prefix(core_rules="r", facts=["nul\x00"])
    with pytest.raises(TooLargeError, match=str(STABLE_PREFIX_MAX_BYTES)):
        build_stable_prefix(core_rules="x" * (STABLE_PREFIX_MAX_BYTES + 1))


def test_the_prefix_fingerprint_is_recorded_in_run_metrics() -> None:
    p = build_stable_prefix(core_rules="Be exact.", tools=TOOLS)
    metrics = RunMetrics()
    metrics.context.record_prefix(p.sha256, p.byte_length)
    assert metrics.to_dict()["context"]["prefix_sha256"] == p.sha256  # type: ignore[index]
    assert "Be exact." not in str(metrics.to_dict())
