"""Parse `ivoai codex|claude|opencode [options] [-- ARGS]` by hand (options: see USAGE).

Import-light on purpose (no argparse, typing, dataclasses or re): this runs before the official
client starts, and every millisecond here is added to every launch.
"""

from __future__ import annotations

from ivoai.client.agents.errors import LaunchUsageError
from ivoai.common.limits import (
    LAUNCH_KNOWLEDGE_SOURCES_MAX,
    LAUNCH_SELECTOR_MAX_CHARS,
    LAUNCH_USER_MCP_MAX,
    SKILL_NAME_MAX_CHARS,
    SKILLS_PER_SESSION_MAX,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping

    from ivoai.common.errors import UsageError

    ValueOptions = Mapping[str, tuple[Callable[[str], str], str]]

EXECUTOR_NAMES = ("codex", "claude", "opencode")

USAGE = """\
usage: ivoai {codex|claude|opencode} [--direct] [--knowledge-source S]... [--mcp NAME]...
                                    [--skill NAME]... [-- ARGS...]

Launch the official client in this terminal with ivoai's process-local knowledge router and the
configured compression provider (compression.provider: caveman, headroom or direct).

options:
  --direct                 run the official client without a compression provider
  --knowledge-source S     route only this knowledge source (alias or ID; repeatable);
                           without it every enabled source is routed
  --no-knowledge           route no knowledge source for this session
  --mcp NAME               attach only this user MCP server (`ivoai connect mcp add`; repeatable);
                           without it every enabled one is attached
  --no-user-mcp            attach no user MCP server
  --no-memory-hooks        do not add ivoai's memory hooks to this session
  --skill NAME             attach this skill (and its dependencies) for this session only
                           (repeatable; claude and codex; see `ivoai skills list`)
  -h, --help               show this help
  --                       everything after it goes to the client unchanged

The client's exit status is ivoai's exit status (128+N when a signal N ended it).
"""


class LaunchArgs:
    """The parsed launch command line."""

    __slots__ = (
        "client_args",
        "direct",
        "executor",
        "help",
        "mcp_names",
        "no_knowledge",
        "no_memory_hooks",
        "no_user_mcp",
        "selectors",
        "skills",
    )

    def __init__(
        self,
        executor: str,
        *,
        direct: bool = False,
        selectors: tuple[str, ...] = (),
        no_knowledge: bool = False,
        client_args: tuple[str, ...] = (),
        help: bool = False,
        mcp_names: tuple[str, ...] = (),
        no_user_mcp: bool = False,
        no_memory_hooks: bool = False,
        skills: tuple[str, ...] = (),
    ) -> None:
        self.executor = executor
        self.mcp_names = mcp_names
        self.no_user_mcp = no_user_mcp
        self.no_memory_hooks = no_memory_hooks
        self.direct = direct
        self.selectors = selectors
        self.no_knowledge = no_knowledge
        self.client_args = client_args
        self.help = help
        self.skills = skills  # issue 20: `--skill NAME`, resolved and attached by ivoai.client.skills.attach

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LaunchArgs):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"LaunchArgs({fields})"


def _check_selector(value: str) -> str:
    if not value or value.startswith("-"):
        raise LaunchUsageError("--knowledge-source needs a source alias or ID (e.g. --knowledge-source team)")
    if len(value) > LAUNCH_SELECTOR_MAX_CHARS:
        raise LaunchUsageError(f"--knowledge-source value exceeds {LAUNCH_SELECTOR_MAX_CHARS} characters")
    if not value.isprintable():
        raise LaunchUsageError("--knowledge-source value contains control characters")
    return value


def _check_mcp_name(value: str) -> str:
    if not value or value.startswith("-"):
        raise LaunchUsageError("--mcp needs the name of a user MCP server (see `ivoai connect mcp list`)")
    if len(value) > LAUNCH_SELECTOR_MAX_CHARS or not value.isprintable():
        raise LaunchUsageError(
            f"--mcp value must be printable and at most {LAUNCH_SELECTOR_MAX_CHARS} characters"
        )
    return value


def _check_skill(value: str) -> str:
    """A skill name's shape only (lowercase letters, digits, hyphens); the registry decides the rest."""
    allowed = all(c.isascii() and (c.isdigit() or c.islower() or c == "-") for c in value)
    hyphens_inside = not (value.startswith("-") or value.endswith("-") or "--" in value)
    if not value or len(value) > SKILL_NAME_MAX_CHARS or not allowed or not hyphens_inside:
        raise LaunchUsageError(
            f"--skill needs a skill name (lowercase letters, digits, hyphens; at most {SKILL_NAME_MAX_CHARS})"
        )
    return value


# Options that take a value (`--opt VALUE` or `--opt=VALUE`): its check, and what a missing one lacks.
_VALUE_OPTIONS = {
    "--knowledge-source": (_check_selector, "a value"),
    "--mcp": (_check_mcp_name, "a value"),
    "--skill": (_check_skill, "a skill name"),
}


_FLAGS = frozenset({"--direct", "--no-knowledge", "-h", "--help", "--no-user-mcp", "--no-memory-hooks"})


def scan_options(
    args: list[str],
    start: int,
    flags: Collection[str],
    value_options: ValueOptions,
    unknown: Callable[[str], UsageError],
) -> tuple[set[str], dict[str, list[str]], int]:
    """ivoai's own options at the front of `args[start:]`, up to `--` or the first positional.

    Returns the flags seen, each value option's checked values in order (`--opt VALUE` or
    `--opt=VALUE`; `value_options` maps it to its check and what a missing value lacks), and the
    index where the client's own arguments start.

    Raises:
        LaunchUsageError: a value option without its value. `unknown(arg)`: an unknown option.
    """
    seen: set[str] = set()
    values: dict[str, list[str]] = {name: [] for name in value_options}
    i = start
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return seen, values, i + 1
        name, eq, value = arg.partition("=")
        if arg in flags:
            seen.add(arg)
        elif name in value_options:
            check, missing = value_options[name]
            if not eq:
                if i + 1 >= len(args):
                    raise LaunchUsageError(f"{name} needs {missing}")
                i += 1
                value = args[i]
            values[name].append(check(value))
        elif arg.startswith("-"):
            raise unknown(arg)
        else:
            break  # first positional: it and everything after it belong to the client
        i += 1
    return seen, values, i


def check_knowledge(selectors: list[str], no_knowledge: bool) -> tuple[str, ...]:
    """The distinct `--knowledge-source` values, within their limit and not beside `--no-knowledge`."""
    if len(selectors) > LAUNCH_KNOWLEDGE_SOURCES_MAX:
        raise LaunchUsageError(f"too many --knowledge-source values (limit {LAUNCH_KNOWLEDGE_SOURCES_MAX})")
    if no_knowledge and selectors:
        raise LaunchUsageError("--no-knowledge and --knowledge-source exclude each other")
    return tuple(dict.fromkeys(selectors))


def parse_launch_args(args: list[str]) -> LaunchArgs:
    """Parse `args` (args[0] is the executor name); the first positional starts the client's arguments.

    Raises:
        LaunchUsageError: an unknown ivoai option, a missing value, or too many selectors.
    """
    if not args or args[0] not in EXECUTOR_NAMES:
        raise LaunchUsageError(f"expected one of: {', '.join(EXECUTOR_NAMES)}")
    executor = args[0]

    def unknown(arg: str) -> LaunchUsageError:
        return LaunchUsageError(
            f"unknown option {arg!r} for `ivoai {executor}`; put the client's own options after `--` "
            f"(ivoai {executor} -- {arg})"
        )

    seen, values, i = scan_options(args, 1, _FLAGS, _VALUE_OPTIONS, unknown)
    mcp_names, skills = values["--mcp"], values["--skill"]
    no_user_mcp, no_knowledge = "--no-user-mcp" in seen, "--no-knowledge" in seen
    selectors = check_knowledge(values["--knowledge-source"], no_knowledge)
    if len(skills) > SKILLS_PER_SESSION_MAX:
        raise LaunchUsageError(f"too many --skill values (limit {SKILLS_PER_SESSION_MAX})")
    if len(mcp_names) > LAUNCH_USER_MCP_MAX:
        raise LaunchUsageError(f"too many --mcp values (limit {LAUNCH_USER_MCP_MAX})")
    if no_user_mcp and mcp_names:
        raise LaunchUsageError("--no-user-mcp and --mcp exclude each other")
    return LaunchArgs(
        executor,
        direct="--direct" in seen,
        selectors=selectors,
        no_knowledge=no_knowledge,
        client_args=tuple(args[i:]),
        help=bool(seen & {"-h", "--help"}),
        mcp_names=tuple(dict.fromkeys(mcp_names)),
        no_user_mcp=no_user_mcp,
        no_memory_hooks="--no-memory-hooks" in seen,
        skills=tuple(dict.fromkeys(skills)),
    )
