"""The prompt gate: ready vs waiting_for_refinement, English and Portuguese."""

from __future__ import annotations

import pytest

from ivoai.client.orchestration._gate import check_prompt


def test_a_specific_english_objective_is_ready() -> None:
    r = check_prompt(
        "Fix the date parser in src/ivoai/dates.py so that the tests in tests/test_dates.py pass"
    )
    assert r.state == "ready" and r.missing == () and r.questions == ()


def test_a_specific_portuguese_objective_is_ready() -> None:
    r = check_prompt("Corrija a função de datas do módulo de importação; os testes devem passar sem erro")
    assert r.state == "ready"


def test_a_vague_objective_waits_with_questions_per_gap() -> None:
    r = check_prompt("make it better")
    assert r.state == "waiting_for_refinement"
    assert set(r.missing) == {"action_verb", "deliverable", "acceptance_criteria"}
    assert r.vague_phrases == ("make it better",)
    assert len(r.questions) == 4


def test_a_vague_portuguese_phrase_blocks_even_an_otherwise_complete_objective() -> None:
    r = check_prompt("Revise o módulo de relatório e melhore tudo; os testes devem passar")
    assert r.state == "waiting_for_refinement" and r.vague_phrases == ("melhore tudo",)


def test_explicit_deliverable_and_criteria_satisfy_those_checks() -> None:
    r = check_prompt(
        "Investigate the slowness",
        deliverable="a written report",
        acceptance_criteria=("names the slowest three endpoints",),
    )
    assert r.state == "ready"


def test_oversized_and_empty_objectives_are_refused_with_the_limit() -> None:
    with pytest.raises(ValueError, match="131072 bytes"):
        check_prompt("fix " + "x" * (128 * 1024))
    with pytest.raises(ValueError, match="empty"):
        check_prompt("   ")
