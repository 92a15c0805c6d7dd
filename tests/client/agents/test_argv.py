"""The hand-written launch argv parser."""

from __future__ import annotations

import pytest

from ivoai.client.agents.argv import LaunchArgs, parse_launch_args
from ivoai.client.agents.errors import LaunchUsageError
from ivoai.common.limits import LAUNCH_KNOWLEDGE_SOURCES_MAX, LAUNCH_SELECTOR_MAX_CHARS


def test_options_before_double_dash_are_ivoais_and_the_rest_goes_to_the_client() -> None:
    parsed = parse_launch_args(
        ["codex", "--direct", "--knowledge-source", "team", "--", "--version", "--direct"]
    )
    assert parsed == LaunchArgs(
        "codex", direct=True, selectors=("team",), client_args=("--version", "--direct")
    )


def test_first_positional_starts_the_client_arguments() -> None:
    parsed = parse_launch_args(["claude", "--knowledge-source=docs", "fix the bug", "--model", "x"])
    assert parsed.selectors == ("docs",)
    assert parsed.client_args == ("fix the bug", "--model", "x")
    assert parsed.direct is False


def test_repeated_selectors_are_kept_once_in_order() -> None:
    parsed = parse_launch_args(
        ["codex", "--knowledge-source", "b", "--knowledge-source", "a", "--knowledge-source", "b"]
    )
    assert parsed.selectors == ("b", "a")


def test_unknown_option_is_a_usage_error_that_suggests_double_dash() -> None:
    with pytest.raises(LaunchUsageError, match=r"ivoai codex -- --model") as info:
        parse_launch_args(["codex", "--model", "o3"])
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["codex", "--knowledge-source"], "needs a value"),
        (["codex", "--knowledge-source", "--direct"], "needs a source alias"),
        (
            ["codex", "--knowledge-source", "x" * (LAUNCH_SELECTOR_MAX_CHARS + 1)],
            str(LAUNCH_SELECTOR_MAX_CHARS),
        ),
        (["codex", "--knowledge-source", "a\nb"], "control characters"),
        (["codex", "--no-knowledge", "--knowledge-source", "a"], "exclude each other"),
        (["vim"], "expected one of"),
    ],
)
def test_invalid_launch_arguments_name_the_option_and_limit(argv: list[str], message: str) -> None:
    with pytest.raises(LaunchUsageError, match=message):
        parse_launch_args(argv)


def test_selector_count_is_bounded() -> None:
    argv = ["codex"]
    for i in range(LAUNCH_KNOWLEDGE_SOURCES_MAX + 1):
        argv += ["--knowledge-source", f"s{i}"]
    with pytest.raises(LaunchUsageError, match=f"limit {LAUNCH_KNOWLEDGE_SOURCES_MAX}"):
        parse_launch_args(argv)


def test_help_flag_is_recognised_only_before_double_dash() -> None:
    assert parse_launch_args(["opencode", "-h"]).help is True
    assert parse_launch_args(["opencode", "--", "-h"]).help is False


def test_skills_are_ivoai_options_kept_once_in_order() -> None:
    parsed = parse_launch_args(["claude", "--skill", "b", "--skill=a", "--skill", "b", "--", "--skill", "x"])
    assert parsed.skills == ("b", "a")
    assert parsed.client_args == ("--skill", "x")


@pytest.mark.parametrize("bad", ["", "Caps", "../x", "a" * 65, "--direct"])
def test_a_skill_value_must_look_like_a_skill_name(bad: str) -> None:
    with pytest.raises(LaunchUsageError, match="--skill needs a skill name"):
        parse_launch_args(["codex", "--skill", bad])
