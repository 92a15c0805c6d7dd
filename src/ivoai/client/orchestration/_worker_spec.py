"""What an advisory worker runs: argv and environment for the official clients (pure, no I/O).

Flags (checked against `codex exec --help` and `claude --help` of codex 0.171.0 / claude 2.1.197;
a test re-checks them against the installed binaries):

- Codex: `codex exec --json --ephemeral --sandbox read-only --skip-git-repo-check
  --ignore-user-config -C WORKDIR -o LAST_MESSAGE --output-schema SCHEMA -m MODEL
  -c model_reasoning_effort="EFFORT" -` (the prompt on stdin). `--ignore-user-config` drops the
  user's MCP servers and providers; the session's knowledge router is added back with its read
  tools only (`enabled_tools`, pre-approved), its token in an environment variable.
- Claude: `claude -p --output-format stream-json --verbose --no-session-persistence
  --strict-mcp-config --mcp-config FILE --tools Read,Grep,Glob --disallowedTools "Edit Write Bash
  NotebookEdit" --permission-mode dontAsk --model MODEL --effort EFFORT --max-turns N` (the prompt
  on stdin). Plan mode traps headless runs (AUTO.md), so the restricted tool set does the job;
  the knowledge read tools are pre-approved by name, nothing else is.

The environment is an allowlist (`childenv.PROBE_ENV_ALLOWLIST`: HOME, PATH, locale, XDG,
CODEX_HOME, CLAUDE_CONFIG_DIR, proxies and CA settings): never a pay-as-you-go key, never ivoai's
own variables except the knowledge token the worker needs. ivoai never sets a model endpoint or
a key for a client; `extra_args`/`extra_env` exist for tests that point the real clients at a
scripted model service on loopback, and nothing in ivoai's runtime sets them.

Skills (issue 20): a worker with a `role` gets exactly the skills the resolver and policy select
for its role, tier, client and capabilities (`skills.select.select_for_worker`), attached through
the client's own process-local mechanism (`skills.attach.worker_attachment`: a session-only Claude
plugin `--plugin-dir`, or Codex's developer instruction listing each copied `SKILL.md`); only the
selected skills are copied, into the worker's private spool, removed after the run. The session's
shared prompt prefix carries no per-worker skill list: it is byte-stable for every worker of the
session. An empty registry changes nothing. `skill_dirs` (`--add-dir`, read-only) remains for
directories given explicitly.

Auto-resume (issue 16, `auto.resume_after_reset = true`): a worker then keeps its vendor
conversation (`persist`: Codex without `--ephemeral`, its thread ID read from `thread.started`;
Claude without `--no-session-persistence`, with an ivoai-chosen `--session-id`), so that one a
confirmed limit stopped can be continued once after the reset (`resume_conversation`):
`codex exec resume THREAD --json ... -c sandbox_mode="read-only" -` (that subcommand has no
`--sandbox` nor `-C`: the sandbox is set through its config key and the work tree is the cwd) or
`claude -p --resume SESSION ...` with the same read-only tool set. Checked with `--help` of codex
0.171.0 and claude 2.1.197 (a test re-checks them against the installed binaries).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ivoai.client.agents.childenv import PAYG_ENV_VARS, probe_env
from ivoai.client.agents.mcp_render import codex_mcp_args, toml_string
from ivoai.client.orchestration._scoring import Tier
from ivoai.common.limits import (
    AUTO_WORKER_EVENTS_MAX_BYTES,
    AUTO_WORKER_OUTPUT_MAX_BYTES,
    AUTO_WORKER_TIMEOUT_DEFAULT_SECONDS,
    AUTO_WORKER_TURNS_DEFAULT,
)

KNOWLEDGE_SERVER = "ivoai-knowledge"
KNOWLEDGE_TOKEN_ENV = "IVOAI_KNOWLEDGE_TOKEN"
CLAUDE_READ_TOOLS = "Read,Grep,Glob"
CLAUDE_DENIED_TOOLS = "Edit Write Bash NotebookEdit"

# The final answer every worker is asked for (Codex enforces it with --output-schema).
RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["summary", "findings", "state_delta"],
    "properties": {
        "summary": {"type": "string"},
        "findings": {"type": "array", "items": {"type": "string"}},
        "state_delta": {
            "type": "object",
            "additionalProperties": False,
            "required": [
                "changed_files",
                "tests",
                "facts",
                "next_steps",
                "open_questions",
                "uncertain_effects",
            ],
            "properties": {
                "changed_files": {"type": "array", "items": {"type": "string"}},
                "tests": {"type": "string", "enum": ["passed", "failed", "not_run", "unknown"]},
                "facts": {"type": "array", "items": {"type": "string"}},
                "next_steps": {"type": "array", "items": {"type": "string"}},
                "open_questions": {"type": "array", "items": {"type": "string"}},
                "uncertain_effects": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
}


@dataclass(frozen=True)
class KnowledgeAccess:
    """The session's knowledge router as a worker sees it: URL, capability and the read tools."""

    url: str
    token: str = field(repr=False)
    read_tools: tuple[str, ...]


@dataclass(frozen=True)
class WorkerSpec:
    """Everything needed to run one advisory worker."""

    session_id: str
    task_id: str
    worker_id: str
    vendor: str
    model: str
    effort: str | None
    tier: Tier
    prompt: str = field(repr=False)
    workdir: str
    timeout_seconds: float = AUTO_WORKER_TIMEOUT_DEFAULT_SECONDS
    max_turns: int = AUTO_WORKER_TURNS_DEFAULT
    max_result_bytes: int = AUTO_WORKER_OUTPUT_MAX_BYTES
    max_event_bytes: int = AUTO_WORKER_EVENTS_MAX_BYTES
    knowledge: KnowledgeAccess | None = None
    skill_dirs: tuple[str, ...] = ()
    role: str | None = None  # the task's role: issue 20 selects the worker's skills by role and tier
    persist: bool = False  # keep the vendor conversation (auto-resume after a reset)
    conversation_id: str | None = None  # Claude: the --session-id ivoai chose (with persist)
    resume_conversation: str | None = None  # continue this conversation instead of starting one
    extra_args: tuple[str, ...] = ()
    extra_env: Mapping[str, str] = field(default_factory=dict, repr=False)


def codex_argv(
    spec: WorkerSpec, binary: str, last_message: str, schema: str, skill_args: tuple[str, ...] = ()
) -> list[str]:
    """`codex exec` (or `codex exec resume THREAD`) for one read-only worker (prompt on stdin)."""
    if spec.resume_conversation is not None:
        head = ["exec", "resume", spec.resume_conversation, "--json", "-c", 'sandbox_mode="read-only"']
    else:
        head = ["exec", "--json", *([] if spec.persist else ["--ephemeral"]), "--sandbox", "read-only"]
        head += ["-C", spec.workdir]
    argv = [
        binary,
        *head,
        "--skip-git-repo-check",
        "--ignore-user-config",
        "-o",
        last_message,
        "--output-schema",
        schema,
        "-m",
        spec.model,
    ]
    if spec.effort:
        argv += ["-c", f"model_reasoning_effort={toml_string(spec.effort)}"]
    if spec.knowledge is not None:
        tools = sorted(spec.knowledge.read_tools)
        argv += codex_mcp_args(
            spec.knowledge.url, tools, name=KNOWLEDGE_SERVER, token_env=KNOWLEDGE_TOKEN_ENV
        )
        argv += ["-c", f"mcp_servers.{KNOWLEDGE_SERVER}.enabled_tools={json.dumps(tools)}"]
    return [*argv, *skill_args, *spec.extra_args, "-"]


def claude_mcp_config(spec: WorkerSpec) -> dict[str, Any]:
    """The worker's only MCP configuration (`--strict-mcp-config`): the knowledge router or nothing."""
    if spec.knowledge is None:
        return {"mcpServers": {}}
    return {
        "mcpServers": {
            KNOWLEDGE_SERVER: {
                "type": "http",
                "url": spec.knowledge.url,
                "headers": {"Authorization": f"Bearer {spec.knowledge.token}"},
            }
        }
    }


def claude_argv(
    spec: WorkerSpec, binary: str, mcp_config: str, skill_args: tuple[str, ...] = ()
) -> list[str]:
    """`claude -p` for one read-only worker (prompt on stdin)."""
    if spec.resume_conversation is not None:
        session = ["--resume", spec.resume_conversation]
    elif spec.persist and spec.conversation_id:
        session = ["--session-id", spec.conversation_id]
    else:
        session = ["--no-session-persistence"]
    argv = [
        binary,
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        *session,
        "--strict-mcp-config",
        "--mcp-config",
        mcp_config,
        "--tools",
        # Claude offers attached skills through its Skill tool (it loads a SKILL.md: a read); a
        # worker without skills keeps the three read tools only.
        f"{CLAUDE_READ_TOOLS},Skill" if skill_args else CLAUDE_READ_TOOLS,
        "--disallowedTools",
        CLAUDE_DENIED_TOOLS,
        "--permission-mode",
        "dontAsk",
        "--model",
        spec.model,
        "--max-turns",
        str(spec.max_turns),
    ]
    if spec.effort:
        argv += ["--effort", spec.effort]
    if spec.knowledge is not None:
        allowed = ",".join(f"mcp__{KNOWLEDGE_SERVER}__{t}" for t in sorted(spec.knowledge.read_tools))
        argv += ["--allowedTools", allowed]
    for directory in spec.skill_dirs:
        argv += ["--add-dir", directory]
    return [*argv, *skill_args, *spec.extra_args]


def worker_env(parent: Mapping[str, str], spec: WorkerSpec) -> dict[str, str]:
    """The allowlisted minimal environment (plus the knowledge token for Codex)."""
    env = probe_env(parent)
    if spec.knowledge is not None and spec.vendor == "codex":
        env[KNOWLEDGE_TOKEN_ENV] = spec.knowledge.token
    env.update(spec.extra_env)
    for key in PAYG_ENV_VARS & set(env) - set(spec.extra_env):
        del env[key]
    return env
