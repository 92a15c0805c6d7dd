"""Environments for child processes: the interactive client's and the probes' (import-light).

Interactive clients keep the user's environment (the vendor CLIs need it) minus pay-as-you-go
provider keys: ivoai launches subscription logins only, and a set `ANTHROPIC_API_KEY` silently
overrides Claude's subscription login (likewise `OPENAI_API_KEY`/`CODEX_API_KEY` for Codex), so
ivoai strips them from the child rather than risk a metered session the user did not ask for.
Probes get an allowlisted minimal environment.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# Provider credentials that switch an official client (or a proxy) to metered API billing.
PAYG_ENV_VARS = frozenset(
    {
        "OPENAI_API_KEY",
        "OPENAI_ADMIN_KEY",
        "CODEX_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "OPENROUTER_API_KEY",
        "GROQ_API_KEY",
        "MISTRAL_API_KEY",
        "XAI_API_KEY",
        "DEEPSEEK_API_KEY",
        "TOGETHER_API_KEY",
        "FIREWORKS_API_KEY",
        "AWS_BEARER_TOKEN_BEDROCK",
    }
)

# ivoai's own variables that must not leak into a child (tokens are injected explicitly): a stale
# value from a parent ivoai session would point the child at that session's router or tokens.
_IVOAI_PRIVATE_PREFIX = ("IVOAI_KNOWLEDGE_TOKEN", "IVOAI_MCP_TOKEN_", "IVOAI_MEMORY_HOOK_")

# The minimal environment a probe (`--version`, auth status) may see.
PROBE_ENV_ALLOWLIST = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "CODEX_HOME",
    "CLAUDE_CONFIG_DIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
)


def client_env(
    parent: Mapping[str, str], extra: Mapping[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """The interactive child's environment and the names of PAYG variables removed from it."""
    env: dict[str, str] = {}
    stripped: list[str] = []
    for key, value in parent.items():
        if key in PAYG_ENV_VARS:
            stripped.append(key)
        elif not key.startswith(_IVOAI_PRIVATE_PREFIX):
            env[key] = value
    if extra:
        env.update(extra)
    stripped.sort()
    return env, stripped


def probe_env(parent: Mapping[str, str]) -> dict[str, str]:
    """An allowlisted minimal environment for probe subprocesses (never a PAYG key)."""
    env = {key: parent[key] for key in PROBE_ENV_ALLOWLIST if key in parent}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["NO_COLOR"] = "1"
    return env
