"""Plan validation: every error names its field; the invalid plans the issue lists are refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ivoai.client.orchestration._plan import validate_plan
from tests.client.orchestration.plans import plan, task, twelve_task_plan


def _errors(doc: Any) -> dict[str, str]:
    parsed, issues = validate_plan(doc)
    assert parsed is None
    return {i.field: i.message for i in issues}


def test_a_twelve_task_dag_is_valid_and_keeps_its_dependency_order() -> None:
    parsed, issues = validate_plan(twelve_task_plan())
    assert issues == []
    assert parsed is not None and len(parsed.tasks) == 12
    order = parsed.order()
    assert order[0] == "scan" and order[-1] == "synth"


def test_thirteen_tasks_are_refused_naming_the_limit() -> None:
    doc = plan(*[task(f"t{i}") for i in range(13)])
    errors = _errors(doc)
    assert errors["tasks"] == "must hold 1-12 tasks (has 13)"


def test_an_empty_task_list_is_refused() -> None:
    assert "1-12" in _errors(plan())["tasks"]


def test_a_cycle_is_refused_with_its_members() -> None:
    doc = plan(task("a", deps=["c"]), task("b", deps=["a"]), task("c", deps=["b"]), task("d"))
    errors = _errors(doc)
    [(field, message)] = errors.items()
    assert field.startswith("tasks[") and field.endswith("].dependencies")
    assert message == "dependency cycle among a, b, c; a plan must be a DAG"


def test_unknown_and_self_dependencies_are_refused_at_their_index() -> None:
    doc = plan(task("a", deps=["ghost"]), task("b", deps=["b"]))
    errors = _errors(doc)
    assert errors["tasks[0].dependencies[0]"] == "unknown task ID 'ghost'"
    assert errors["tasks[1].dependencies[0]"] == "a task cannot depend on itself"


def test_a_task_over_32_kib_is_refused_with_its_size() -> None:
    doc = plan(task("big", text="x" * (32 * 1024 + 1)))
    assert _errors(doc)["tasks[0].task"] == "is 32769 bytes; the limit is 32768 bytes"


def test_a_task_of_exactly_32_kib_is_accepted() -> None:
    assert validate_plan(plan(task("big", text="é" * (16 * 1024))))[1] == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("shell", "bash -c x"),
        ("executable", "/bin/sh"),
        ("env", {"A": "1"}),
        ("endpoint", "http://x"),
        ("api_key", "sk-x"),
        ("credential", "x"),
        ("command", ["rm"]),
    ],
)
def test_fields_that_would_say_how_to_run_things_are_forbidden(name: str, value: Any) -> None:
    doc = plan(task("a"))
    doc["tasks"][0][name] = value
    message = _errors(doc)[f"tasks[0].{name}"]
    assert message.startswith("forbidden field")


def test_a_forbidden_field_at_plan_level_is_named_too() -> None:
    doc = plan(task("a"))
    doc["base_url"] = "http://127.0.0.1:1"
    assert _errors(doc)["base_url"].startswith("forbidden field")


def test_an_unknown_harmless_field_is_refused_as_unknown() -> None:
    doc = plan(task("a"))
    doc["tasks"][0]["priority"] = 1
    assert _errors(doc)["tasks[0].priority"].startswith("unknown field; allowed:")


def test_missing_and_out_of_range_signals_are_each_reported() -> None:
    doc = plan(task("a"))
    del doc["tasks"][0]["signals"]["risk"]
    doc["tasks"][0]["signals"]["complexity"] = 101
    doc["tasks"][0]["signals"]["parallel_value"] = 4.5
    doc["tasks"][0]["signals"]["mood"] = 3
    errors = _errors(doc)
    assert errors["tasks[0].signals.risk"] == "required signal is missing (integer 0-100)"
    assert errors["tasks[0].signals.complexity"] == "must be 0-100, got 101"
    assert errors["tasks[0].signals.parallel_value"] == "must be an integer 0-100, got float"
    assert errors["tasks[0].signals.mood"].startswith("unknown field")


def test_ids_roles_and_required_fields_are_checked() -> None:
    bad_id = task("a")
    bad_id["id"] = "Bad ID"
    bad_role = task("b", role="wizard")
    missing = task("c")
    del missing["acceptance_criteria"]
    dup = task("b")
    errors = _errors(plan(bad_id, bad_role, missing, dup))
    assert "^[a-z][a-z0-9_-]{0,63}$" in errors["tasks[0].id"]
    assert errors["tasks[1].role"].startswith("unknown role 'wizard'")
    assert errors["tasks[2].acceptance_criteria"] == "required field is missing"
    assert errors["tasks[3].id"] == "duplicate task ID 'b' (first at tasks[1])"


def test_control_characters_in_task_text_are_refused() -> None:
    errors = _errors(plan(task("a", text="look \x1b[2J here"), task("b", text="nul\x00")))
    assert errors["tasks[0].task"] == "contains an ESC (terminal control) character"
    assert errors["tasks[1].task"] == "contains a NUL character"


def test_duplicate_normalized_task_text_needs_intentional_redundancy() -> None:
    a = task("a", text="Review  the Parser")
    b = task("b", text="review the parser")
    assert "duplicates tasks[0].task" in _errors(plan(a, b))["tasks[1].task"]
    b2 = copy.deepcopy(b)
    b2["intentional_redundancy"] = True
    assert validate_plan(plan(a, b2))[1] == []


def test_acceptance_criteria_must_be_a_non_empty_list_of_strings() -> None:
    empty = task("a")
    empty["acceptance_criteria"] = []
    blank = task("b")
    blank["acceptance_criteria"] = ["ok", "  "]
    errors = _errors(plan(empty, blank))
    assert errors["tasks[0].acceptance_criteria"] == "must hold 1-64 items (has 0)"
    assert errors["tasks[1].acceptance_criteria[1]"] == "must be a non-empty string"


def test_not_an_object_and_bad_weights_are_refused() -> None:
    assert _errors([1, 2]) == {"plan": "must be a JSON object with objective and tasks"}
    doc = plan(task("a"))
    doc["weights"] = {"complexity": -1}
    assert "non-negative" in _errors(doc)["weights"]
    doc["weights"] = "fast"
    assert "unknown weight profile" in _errors(doc)["weights"]


def test_every_error_of_one_plan_is_reported_at_once() -> None:
    doc = plan(*[task(f"t{i}") for i in range(13)], objective="")
    doc["tasks"][0]["shell"] = "sh"
    doc["tasks"][1]["dependencies"] = ["nope"]
    errors = _errors(doc)
    assert {"objective", "tasks", "tasks[0].shell", "tasks[1].dependencies[0]"} <= set(errors)
