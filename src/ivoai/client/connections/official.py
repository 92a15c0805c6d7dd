"""Official logins, delegated: `codex login` / `codex login status`, `claude auth status|login`.

ivoai never reads, copies, proxies or logs the credentials these clients own: it only runs their
documented commands with structured argv and looks at the exit status (and, for Claude, the
`loggedIn` field of the JSON that `claude auth status` prints). Status probes run with a minimal
environment and a bounded timeout; the browser login runs in the foreground with the user's
terminal, and only when there is a terminal to run it on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from ivoai.client.agents.childenv import client_env
from ivoai.client.connections.errors import LoginError, OfficialClientMissingError
from ivoai.common.limits import PROBE_TIMEOUT_SECONDS
from ivoai.common.net import PROXY_ENV_VARS
from ivoai.common.redact import redact

Provider = Literal["chatgpt", "claude"]

# Variables a status probe may see: enough to find the client's own config and run Node.
_PROBE_ENV_ALLOW = (
    "HOME",
    "PATH",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TMPDIR",
    "SHELL",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
    "CODEX_HOME",
    "CLAUDE_CONFIG_DIR",
    "NO_COLOR",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    *PROXY_ENV_VARS,
)
LOGIN_TIMEOUT_SECONDS = 15 * 60.0  # a browser login waits on a human; bounded so nothing hangs forever


@dataclass(frozen=True)
class LoginStatus:
    """What the official status command said, reduced to facts ivoai may keep."""

    provider: Provider
    binary: str
    logged_in: bool
    detail: str  # a short, redacted, credential-free summary
    ran_login: bool = False


def probe_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The minimal environment for a status probe."""
    src = os.environ if environ is None else environ
    return {k: src[k] for k in _PROBE_ENV_ALLOW if k in src}


def interactive_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The user's environment for an interactive login: the environment a launched session gets.

    The same pay-as-you-go variables are removed (`agents.childenv.PAYG_ENV_VARS`), including
    `CLAUDE_CODE_OAUTH_TOKEN`: a login that quietly reused a token from the environment would
    record nothing for the sessions ivoai launches later, which never see that variable.
    """
    return client_env(os.environ if environ is None else environ)[0]


def find_binary(name: str) -> str:
    """Absolute path of the official client on PATH.

    Raises:
        OfficialClientMissingError: it is not installed.
    """
    path = shutil.which(name)
    if path is None:
        raise OfficialClientMissingError(f"`{name}` was not found on PATH; install the official client first")
    return path


def _run_probe(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            env=probe_env(),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise LoginError(f"`{' '.join(argv[1:])}` did not answer within {PROBE_TIMEOUT_SECONDS:g}s") from None
    except OSError as exc:
        raise OfficialClientMissingError(f"could not run {argv[0]}: {exc.strerror}") from None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return redact(line.strip())[:200]
    return ""


def codex_status(binary: str | None = None) -> LoginStatus:
    """Run `codex login status`; exit 0 means logged in."""
    exe = binary or find_binary("codex")
    proc = _run_probe([exe, "login", "status"])
    detail = _first_line(proc.stdout) or _first_line(proc.stderr) or f"exit status {proc.returncode}"
    return LoginStatus("chatgpt", exe, proc.returncode == 0, detail)


def claude_status(binary: str | None = None) -> LoginStatus:
    """Run `claude auth status`; trust `loggedIn` from its JSON, else the exit status."""
    exe = binary or find_binary("claude")
    proc = _run_probe([exe, "auth", "status"])
    logged_in = proc.returncode == 0
    detail = f"exit status {proc.returncode}"
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("loggedIn"), bool):
        logged_in = bool(data["loggedIn"]) and proc.returncode == 0
        method = data.get("authMethod")
        detail = "logged in" if logged_in else "not logged in"
        if isinstance(method, str) and method.isidentifier():
            detail += f" (auth method: {method})"
    else:
        detail = _first_line(proc.stdout) or _first_line(proc.stderr) or detail
    return LoginStatus("claude", exe, logged_in, detail)


def _run_login(argv: list[str]) -> int:
    try:
        return subprocess.run(
            argv, env=interactive_env(), timeout=LOGIN_TIMEOUT_SECONDS, check=False
        ).returncode
    except subprocess.TimeoutExpired:
        raise LoginError(f"`{' '.join(argv[1:])}` did not finish within {LOGIN_TIMEOUT_SECONDS:g}s") from None


_SPECS: dict[Provider, tuple[str, Callable[[str | None], LoginStatus], list[str], str]] = {
    "chatgpt": ("codex", codex_status, ["login"], "codex logout"),
    "claude": ("claude", claude_status, ["auth", "login"], "claude auth logout"),
}


def logout_hint(provider: Provider) -> str:
    return _SPECS[provider][3]


def connect(provider: Provider, *, check_only: bool = False, interactive: bool | None = None) -> LoginStatus:
    """Check the official login; when absent and a terminal is available, log in officially, check again.

    Raises:
        OfficialClientMissingError: the official client is not installed.
        LoginError: not logged in afterwards (or no terminal to log in on).
    """
    name, status_fn, login_args, _ = _SPECS[provider]
    exe = find_binary(name)
    status = status_fn(exe)
    if status.logged_in:
        return status
    if check_only:
        raise LoginError(
            f"{provider}: not logged in ({status.detail}); run `ivoai connect {provider}` to log in"
        )
    if interactive is None:
        interactive = sys.stdin.isatty() and sys.stdout.isatty()
    if not interactive:
        raise LoginError(
            f"{provider}: not logged in ({status.detail}); the official browser login needs a terminal: "
            f"run `ivoai connect {provider}` interactively"
        )
    code = _run_login([exe, *login_args])
    status = status_fn(exe)
    if not status.logged_in:
        raise LoginError(
            f"{provider}: still not logged in after `{name} {' '.join(login_args)}` "
            f"(exit status {code}; {status.detail})"
        )
    return LoginStatus(provider, exe, True, status.detail, ran_login=True)
