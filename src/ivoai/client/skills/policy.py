"""Deny-by-default skill policy: ALLOW, DENY or REQUIRE_APPROVAL, with every reason.

Pure function of (what the index extracted, facts of the stored tree, what the user decided). The
rules are fixed here; nothing written in a skill can change them:

1. A claim of authority is denied and cannot be approved: shell or command execution, destructive
   or privileged operations, disabling the sandbox or changing permissions, hooks (commands run on
   client events), pre-approving a shell tool, claiming orchestrator authority (spawning or
   steering agents, approving, changing policy), credentials, and a third-party skill using the
   `ivoai-` name prefix reserved for ivoai's own skills.
2. Anything ivoai cannot classify is denied: an unknown capability or an unknown pre-approved tool.
3. The effective risk is the highest of: the risk the skill declares (LOW when it declares none),
   or the user's own `--risk` for it instead; and the floors ivoai derives from what the skill
   contains and claims (writing files, network, bundled scripts, switching models or forking
   agents). A skill can raise its risk, never lower a floor.
4. CRITICAL is denied; HIGH requires the user's approval of that exact stored tree (`ivoai skills
   enable NAME --approve`, keyed by its SHA-256, so an update needs a new approval); LOW and
   MODERATE are allowed. Context limits (the executor, the worker's capabilities and its tier's
   risk ceiling) are applied by the resolver on top.
"""

from __future__ import annotations

from typing import NamedTuple

from ivoai.client.skills.model import BUILTIN_PREFIX, Decision, Risk, SkillMeta, UserPolicy

# Capabilities a skill may declare, with the risk floor each one implies.
CAPABILITY_FLOORS: dict[str, Risk] = {
    "read": Risk.LOW,  # reads files of the workspace
    "search": Risk.LOW,  # searches the workspace
    "mcp": Risk.LOW,  # calls MCP tools the session already has
    "memory": Risk.LOW,  # ivoai memory tools
    "context": Risk.LOW,  # ivoai context (RAG) tools
    "write": Risk.MODERATE,  # edits workspace files
    "network": Risk.MODERATE,  # fetches from the network
    "web": Risk.MODERATE,
}

# Claims that are never allowed, by category (the category is the reason users see).
FORBIDDEN_CAPABILITIES: dict[str, str] = {
    **dict.fromkeys(
        (
            "shell",
            "bash",
            "sh",
            "exec",
            "execute",
            "command",
            "commands",
            "run",
            "scripts",
            "subprocess",
            "terminal",
        ),
        "shell",
    ),
    **dict.fromkeys(("destructive", "delete", "rm", "wipe", "format", "force-push"), "destructive"),
    **dict.fromkeys(("privileged", "sudo", "root", "admin", "system", "install"), "privileged"),
    **dict.fromkeys(
        (
            "sandbox-disable",
            "no-sandbox",
            "unsandboxed",
            "danger-full-access",
            "bypass-permissions",
            "dangerously-skip-permissions",
            "permissions",
        ),
        "sandbox-disabling",
    ),
    **dict.fromkeys(
        (
            "orchestrator",
            "orchestrate",
            "orchestration",
            "authority",
            "delegate",
            "spawn",
            "spawn-agents",
            "approve",
            "approval",
            "policy",
            "primary",
            "scheduler",
        ),
        "orchestrator authority",
    ),
    **dict.fromkeys(("credentials", "secrets", "keychain", "tokens"), "credentials"),
}

# Claude Code tool names a skill may pre-approve (`allowed-tools`), by capability.
_TOOL_CAPABILITY: dict[str, str] = {
    **dict.fromkeys(("read", "grep", "glob", "ls", "todowrite", "todoread", "skill"), "read"),
    **dict.fromkeys(("edit", "write", "multiedit", "notebookedit"), "write"),
    **dict.fromkeys(("webfetch", "websearch"), "network"),
}
_FORBIDDEN_TOOLS: dict[str, str] = {
    **dict.fromkeys(
        ("bash", "bashoutput", "killshell", "killbash", "shell", "powershell", "exec", "computer"), "shell"
    ),
    **dict.fromkeys(("task", "agent", "exitplanmode"), "orchestrator authority"),
}

# Front-matter keys (other than ivoai's) whose mere presence changes what a client would do.
FORBIDDEN_KEYS: dict[str, str] = {
    "hooks": "hooks (commands run on client events)",
    "permission-mode": "permission changes",
    "permissionmode": "permission changes",
    "permissions": "permission changes",
    "sandbox": "sandbox changes",
    "sandbox-mode": "sandbox changes",
    "approval-policy": "approval changes",
    "dangerously-skip-permissions": "permission changes",
    "orchestrator": "orchestrator authority",
    "authority": "orchestrator authority",
    "mcp-servers": "MCP server registration (runs programs)",
    "mcpservers": "MCP server registration (runs programs)",
}
# Keys that raise the risk floor: the skill changes who runs or with which model.
HIGH_KEYS: dict[str, str] = {
    "model": "switches the model (the scheduler owns model choice)",
    "effort": "changes the reasoning effort",
    "context": "runs in a forked agent context",
    "agent": "runs as another agent",
}
ORCHESTRATOR_ROLES = frozenset({"primary", "orchestrator", "planner", "scheduler", "supervisor"})


class PolicyResult(NamedTuple):
    """The decision, the effective risk (None when denied before it mattered) and every reason."""

    decision: Decision
    risk: Risk | None
    reasons: tuple[str, ...]
    approved: bool = False  # REQUIRE_APPROVAL that the user approved for this exact tree

    @property
    def usable(self) -> bool:
        """ALLOW, or REQUIRE_APPROVAL with the user's approval of this exact tree."""
        return self.decision is Decision.ALLOW or (
            self.decision is Decision.REQUIRE_APPROVAL and self.approved
        )

    def to_json(self) -> dict[str, object]:
        return {
            "decision": self.decision.value,
            "risk": self.risk.label if self.risk is not None else None,
            "approved": self.approved,
            "reasons": list(self.reasons),
        }


def _norm(key: str) -> str:
    return key.lower().replace("_", "-").removeprefix("metadata.")


_RISK_BY_NAME = {r.name: r for r in Risk}


def _tool_base(tool: str) -> str:
    return tool.split("(", 1)[0].strip().lower()


def evaluate(
    meta: SkillMeta,
    *,
    digest: str | None = None,
    scripts: tuple[str, ...] = (),
    user: UserPolicy | None = None,
) -> PolicyResult:
    """Decide on one skill; pure and deterministic (reasons in a fixed order)."""
    user = user or UserPolicy()
    denials: list[str] = []
    if meta.name.startswith(BUILTIN_PREFIX) and not user.builtin:
        denials.append(
            f"the name prefix `{BUILTIN_PREFIX}` is reserved for ivoai's own skills (impersonation)"
        )
    for cap in meta.capabilities:
        category = FORBIDDEN_CAPABILITIES.get(cap)
        if category is not None:
            denials.append(f"claims `{cap}`: {category} is never allowed")
        elif cap not in CAPABILITY_FLOORS:
            denials.append(f"unknown capability `{cap}` (unknown claims are denied)")
    for tool in meta.allowed_tools:
        tool_name = _tool_base(tool)
        if tool_name in _FORBIDDEN_TOOLS:
            denials.append(f"pre-approves the tool `{tool}`: {_FORBIDDEN_TOOLS[tool_name]} is never allowed")
        elif tool_name.startswith("mcp__"):
            continue
        elif tool_name not in _TOOL_CAPABILITY:
            denials.append(f"pre-approves the unknown tool `{tool}` (unknown claims are denied)")
    keys = [(key, _norm(key)) for key in meta.other_keys] if meta.other_keys else []
    for key, norm in keys:
        why = FORBIDDEN_KEYS.get(norm)
        if why is not None:
            denials.append(f"declares `{key}`: {why} are never allowed")
    if meta.roles or meta.exclusive_role:
        for role in (*meta.roles, *((meta.exclusive_role,) if meta.exclusive_role else ())):
            if role.lower() in ORCHESTRATOR_ROLES:
                denials.append(f"claims the role `{role}`: orchestrator authority is never allowed")
    if denials:
        return PolicyResult(Decision.DENY, None, tuple(denials))

    reasons: list[str] = []
    declared = _RISK_BY_NAME.get(meta.risk) if meta.risk else None
    if user.builtin and declared is not None:
        base = declared
        reasons.append(f"built in: risk {base.name} set by ivoai")
    elif user.risk is not None:
        base = user.risk
        reasons.append(f"risk {base.name} set by you")
    elif declared is not None:
        base = declared
        reasons.append(f"declares risk {base.name}")
    else:
        base = Risk.LOW
        reasons.append("declares no risk (LOW unless a floor applies)")
    risk = base
    for cap in meta.capabilities:
        floor = CAPABILITY_FLOORS[cap]
        if floor > risk:
            reasons.append(f"capability `{cap}` raises the risk to {floor.name}")
            risk = floor
    for tool in meta.allowed_tools:
        capability = _TOOL_CAPABILITY.get(_tool_base(tool), "mcp")
        floor = CAPABILITY_FLOORS[capability]
        if floor > risk:
            reasons.append(f"pre-approving `{tool}` raises the risk to {floor.name}")
            risk = floor
    if scripts and risk < Risk.MODERATE:
        reasons.append(f"bundles {len(scripts)} script file(s) (e.g. {scripts[0]}): MODERATE")
        risk = Risk.MODERATE
    for key, norm in keys:
        why = HIGH_KEYS.get(norm)
        if why is not None and risk < Risk.HIGH:
            reasons.append(f"`{key}` {why}: HIGH")
            risk = Risk.HIGH
    if risk is Risk.CRITICAL:
        return PolicyResult(Decision.DENY, risk, (*reasons, "CRITICAL risk is denied"))
    if risk is Risk.HIGH:
        approved = digest is not None and digest in user.approved_digests
        note = (
            "approved by you for this exact tree"
            if approved
            else (f"HIGH risk requires your approval: ivoai skills enable {meta.name} --approve")
        )
        return PolicyResult(Decision.REQUIRE_APPROVAL, risk, (*reasons, note), approved=approved)
    return PolicyResult(Decision.ALLOW, risk, tuple(reasons))
