"""Ruflo as AUTO's optional lifecycle coordinator, behind a safe-profile gate (`auto.coordinator = ruflo`).

Ruflo (npm `ruflo`, pinned 3.38.12 in the components manifest) is a provider-free, ephemeral
lifecycle coordinator here: it holds a hierarchical swarm and opaque tasks for the session's
primary and workers. It never runs a model, never stores memory, never sees task text, briefs,
worker output, credentials or environments: every description it receives is an opaque ID.

**How it runs** (every command): the real `ruflo` CLI with `<runtime>/ruflo` (0700, removed with
the session) as both its working directory and its HOME (its state, pidfiles, update stamp and
policy files stay there; TMPDIR too), stdin closed, stdout to a private file (Ruflo exits before a
pipe drains, which cuts JSON at 64 KiB), a timeout, its own process group, and a **clean
environment**: PATH, locale and:

    RUFLO_PROVIDER=ivoai-disabled      CLAUDE_FLOW_MEMORY_BACKEND=memory
    CLAUDE_FLOW_AUTO_UPDATE=false      RUFLO_DAEMON_AUTOSTART=0   RUFLO_DAEMON_AI_WORKERS=0
    RUFLO_FUNNEL=0                     CLAUDE_FLOW_MCP_TOOLS=<the allowlist>   NO_COLOR=1

(no pay-as-you-go key can reach it: nothing of the user's environment is passed). Checked in the
3.38.12 sources: the auto-update check, the daemon auto-start and the funnel telemetry each stop on
those variables; `claude-flow.config.json` in its working directory is its project config.

**The safe profile** ivoai writes as that config: no auto-spawned agents and no providers, the
in-process `memory` backend without an index, MCP auto-start off with the tool list restricted to
the reviewed allowlist, daemon auto-start and AI workers off, hooks off.

**The gate** (before the primary starts; any failure leaves the session on the native
coordinator, with the reason in the session record):

1. `ruflo --version` answers `ruflo v3.38.12` (the reviewed version);
2. `ruflo config get --format json` reports the safe profile back, key for key (provider
   execution and durable memory off);
3. `ruflo mcp tools --format json` lists every allowlisted tool in its reviewed category, and
   the allowlist holds no tool that executes a provider;
4. `mcp exec -t swarm_init` (hierarchical) returns a swarm ID of Ruflo's form, which
   `swarm_status` reports back (verifiable);
5. `mcp exec -t task_create` registers the primary as an opaque task (`ivoai-primary <random
   ID>`), which `task_status` reports back.

Only `mcp exec` of an allowlisted tool is ever run after the gate (`Ruflo.tool` refuses others).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ivoai.client.agents.childenv import PAYG_ENV_VARS
from ivoai.client.agents.executors import discover
from ivoai.client.orchestration._errors import OrchestrationError
from ivoai.common.ids import random_id
from ivoai.common.limits import RUFLO_COMMAND_TIMEOUT_SECONDS, RUFLO_OUTPUT_MAX_BYTES

RUFLO_VERSION = "3.38.12"  # the reviewed pin (components/manifest.toml)
_VERSION = re.compile(r"ruflo v(\S+)")
_SWARM_ID = re.compile(r"^swarm-\d+-[a-z0-9]+$")
_TASK_ID = re.compile(r"^task-\d+-[a-z0-9]+$")

# The reviewed allowlist: lifecycle bookkeeping only (tool -> its category in Ruflo's catalogue).
SAFE_TOOLS: Mapping[str, str] = {
    "swarm_init": "swarm",
    "swarm_status": "swarm",
    "swarm_shutdown": "swarm",
    "task_create": "task",
    "task_status": "task",
    "task_update": "task",
    "task_complete": "task",
    "task_cancel": "task",
}
# Tools that run a model or a provider (never allowed, whatever the allowlist says).
PROVIDER_TOOLS = frozenset({"agent_execute", "agent_spawn", "hooks_route", "providers_test"})

SAFE_PROFILE: dict[str, Any] = {
    "version": "3.5",
    "agents": {"autoSpawn": False, "providers": []},
    "memory": {"backend": "memory", "enableHNSW": False},
    "mcp": {"autoStart": False, "tools": sorted(SAFE_TOOLS)},
    "daemon": {"autostart": False, "aiWorkers": {"enabled": False}},
    "hooks": {"enabled": False, "autoExecute": False},
}
CONFIG_FILE = "claude-flow.config.json"


class RufloGateError(OrchestrationError):
    """A gate check failed (the session falls back to the native coordinator)."""

    code = "ruflo_gate_failed"


def _flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in doc.items():
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            out.update(_flatten(value, name))
        else:
            out[name] = value
    return out


def ruflo_env(home: str, parent: Mapping[str, str]) -> dict[str, str]:
    """The clean environment of every Ruflo command (nothing of the user's but PATH and locale)."""
    env = {
        "PATH": parent.get("PATH", "/usr/bin:/bin"),
        "HOME": home,
        "TMPDIR": os.path.join(home, "tmp"),
        "LANG": parent.get("LANG", "C.UTF-8"),
        "NO_COLOR": "1",
        "RUFLO_PROVIDER": "ivoai-disabled",
        "CLAUDE_FLOW_MEMORY_BACKEND": "memory",
        "CLAUDE_FLOW_AUTO_UPDATE": "false",
        "RUFLO_DAEMON_AUTOSTART": "0",
        "RUFLO_DAEMON_AI_WORKERS": "0",
        "RUFLO_FUNNEL": "0",
        "CLAUDE_FLOW_MCP_TOOLS": ",".join(sorted(SAFE_TOOLS)),
    }
    assert not PAYG_ENV_VARS & set(env)
    return env


def json_tail(text: str) -> Any:
    """The JSON value Ruflo prints after its human lines (`--format json` mixes both)."""
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"(?m)^[\[{]", text)]
    for start in starts:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if not text[end:].strip():
            return value
    raise RufloGateError("ruflo printed no JSON answer")


@dataclass
class Ruflo:
    """One session's Ruflo: the binary, its private home, and every command run (argv only)."""

    binary: str
    home: str
    parent_env: Mapping[str, str] = field(default_factory=dict)
    commands: list[list[str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, *args: str) -> tuple[int, str]:
        """Run one command; (exit code, stdout). A timeout or spawn failure is a RufloGateError."""
        out_path = os.path.join(self.home, "tmp", f"out-{random_id('o', 8)}.txt")
        with self._lock:
            self.commands.append(list(args))
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            proc = subprocess.Popen(
                [self.binary, *args],
                cwd=self.home,
                env=ruflo_env(self.home, self.parent_env),
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=subprocess.DEVNULL,
                process_group=0,
                close_fds=True,
            )
        except OSError as exc:
            raise RufloGateError(f"ruflo could not be started ({exc.strerror or exc})") from None
        finally:
            os.close(fd)
        try:
            code = proc.wait(RUFLO_COMMAND_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # anything it left in its group
            proc.wait()
        try:
            with open(out_path, "rb") as fh:
                data = fh.read(RUFLO_OUTPUT_MAX_BYTES + 1)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(out_path)
        if code is None:
            raise RufloGateError(
                f"`ruflo {args[0]}` did not finish within {RUFLO_COMMAND_TIMEOUT_SECONDS:g} s"
            )
        if len(data) > RUFLO_OUTPUT_MAX_BYTES:
            raise RufloGateError(f"`ruflo {args[0]}` printed more than {RUFLO_OUTPUT_MAX_BYTES} bytes")
        return code, data.decode("utf-8", "replace")

    def tool(self, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """`ruflo mcp exec` of an allowlisted tool; its `result` object.

        Raises:
            RufloGateError: a tool outside the allowlist, a failed command or an unexpected answer.
        """
        if name not in SAFE_TOOLS or name in PROVIDER_TOOLS:
            raise RufloGateError(f"ruflo tool {name!r} is outside ivoai's safe profile")
        code, out = self.run("mcp", "exec", "-t", name, "-p", json.dumps(dict(params)), "--format", "json")
        if code != 0:
            raise RufloGateError(f"ruflo {name} failed (exit {code})")
        doc = json_tail(out)
        result = doc.get("result") if isinstance(doc, dict) else None
        if not isinstance(result, dict):
            raise RufloGateError(f"ruflo {name} answered without a result object")
        return result


@dataclass
class GateResult:
    """The coordinator a session got, and why; the IDs Ruflo gave (opaque) when it passed."""

    coordinator: str  # ruflo | native
    reason: str
    version: str | None = None
    swarm_id: str | None = None
    task_id: str | None = None
    primary_ref: str | None = None  # the opaque name the primary has in Ruflo
    seconds: float = 0.0
    checks: list[str] = field(default_factory=list)
    ruflo: Ruflo | None = None

    def to_dict(self) -> dict[str, Any]:
        """Session-record form (IDs and reasons only)."""
        return {
            "coordinator": self.coordinator,
            "reason": self.reason,
            "version": self.version,
            "swarm_id": self.swarm_id,
            "task_id": self.task_id,
            "primary_ref": self.primary_ref,
            "seconds": round(self.seconds, 3),
            "checks": list(self.checks),
        }


def _check_version(ruflo: Ruflo) -> str:
    code, out = ruflo.run("--version")
    match = _VERSION.search(out)
    if code != 0 or match is None:
        raise RufloGateError("`ruflo --version` did not answer with a version")
    if match.group(1) != RUFLO_VERSION:
        raise RufloGateError(f"ruflo {match.group(1)} is not the reviewed {RUFLO_VERSION}")
    return match.group(1)


def _check_profile(ruflo: Ruflo) -> None:
    code, out = ruflo.run("config", "get", "--format", "json")
    shown = json_tail(out) if code == 0 else None
    if not isinstance(shown, dict):
        raise RufloGateError("`ruflo config get` did not report its configuration")
    for key, value in _flatten(SAFE_PROFILE).items():
        if shown.get(key) != value:
            raise RufloGateError(f"ruflo does not report the safe profile: {key} is {shown.get(key)!r}")


def _check_tools(ruflo: Ruflo) -> None:
    code, out = ruflo.run("mcp", "tools", "--format", "json")
    listed = json_tail(out) if code == 0 else None
    if not isinstance(listed, list):
        raise RufloGateError("`ruflo mcp tools` did not list its tools")
    catalogue = {str(t.get("name")): str(t.get("category")) for t in listed if isinstance(t, dict)}
    for name, category in SAFE_TOOLS.items():
        if catalogue.get(name) != category:
            raise RufloGateError(f"ruflo's catalogue has no {category} tool {name} (allowlist review needed)")
    if set(SAFE_TOOLS) & PROVIDER_TOOLS:
        raise RufloGateError("the allowlist holds a provider-executing tool")


def run_gate(runtime_dir: str, env: Mapping[str, str], *, max_agents: int = 4) -> GateResult:
    """Run the gate in `<runtime_dir>/ruflo`; never raises (a failure is a native result)."""
    started = time.monotonic()
    found = discover("ruflo", env)
    if found is None:
        return GateResult("native", "ruflo is not installed (`ivoai setup` installs the pinned one)")
    home = os.path.join(runtime_dir, "ruflo")
    result = GateResult("native", "")
    try:
        os.makedirs(os.path.join(home, "tmp"), mode=0o700)
        os.chmod(home, 0o700)
        config = os.path.join(home, CONFIG_FILE)
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(SAFE_PROFILE, fh)
        ruflo = Ruflo(found[0], home, dict(env))
        result.ruflo = ruflo
        with ThreadPoolExecutor(max_workers=3) as pool:
            version_f = pool.submit(_check_version, ruflo)
            profile_f = pool.submit(_check_profile, ruflo)
            tools_f = pool.submit(_check_tools, ruflo)
            result.version = version_f.result()
            result.checks.append(f"version {result.version}")
            profile_f.result()
            result.checks.append("safe profile reported back (provider execution and durable memory off)")
            tools_f.result()
            result.checks.append(f"tool allowlist present ({len(SAFE_TOOLS)} tools)")
            ref = random_id("ivoai", 12)
            swarm_f = pool.submit(
                ruflo.tool,
                "swarm_init",
                {"topology": "hierarchical", "maxAgents": max_agents, "strategy": "specialized"},
            )
            task_f = pool.submit(
                ruflo.tool, "task_create", {"type": "coordination", "description": f"ivoai-primary {ref}"}
            )
            swarm, task = swarm_f.result(), task_f.result()
            swarm_id, task_id = str(swarm.get("swarmId") or ""), str(task.get("taskId") or "")
            if swarm.get("success") is not True or not _SWARM_ID.match(swarm_id):
                raise RufloGateError("swarm_init returned no swarm ID")
            if swarm.get("topology") != "hierarchical":
                raise RufloGateError("swarm_init did not make a hierarchical swarm")
            if not _TASK_ID.match(task_id):
                raise RufloGateError("task_create returned no task ID")
            status_f = pool.submit(ruflo.tool, "swarm_status", {})
            task_status_f = pool.submit(ruflo.tool, "task_status", {"taskId": task_id})
            status, registered = status_f.result(), task_status_f.result()
            if status.get("swarmId") != swarm_id:
                raise RufloGateError("swarm_status does not report the swarm swarm_init returned")
            if registered.get("taskId") != task_id or registered.get("description") != f"ivoai-primary {ref}":
                raise RufloGateError("task_status does not report the primary's task")
            result.checks.append("hierarchical swarm verified; opaque primary task registered")
        result.coordinator, result.reason = "ruflo", "safe-profile gate passed"
        result.swarm_id, result.task_id, result.primary_ref = swarm_id, task_id, ref
    except (RufloGateError, OSError) as exc:
        result.coordinator = "native"
        result.reason = f"ruflo gate failed: {getattr(exc, 'message', None) or exc}"
    result.seconds = time.monotonic() - started
    return result


def close_coordinator(gate: GateResult) -> None:
    """End the primary's task and shut the swarm down (best effort, bounded)."""
    if gate.coordinator != "ruflo" or gate.ruflo is None or gate.task_id is None:
        return
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [
            pool.submit(gate.ruflo.tool, "task_complete", {"taskId": gate.task_id}),
            pool.submit(gate.ruflo.tool, "swarm_shutdown", {}),
        ]
        for future in futures:
            with contextlib.suppress(RufloGateError, OSError):
                future.result()


class RufloLifecycle:
    """Mirrors worker lifecycles as opaque Ruflo tasks (`ivoai-worker wrk_…`), in the orchestrator.

    Calls run one at a time on a background thread (Ruflo's task store is a JSON file that two
    concurrent writers could tear), so a worker never waits for Ruflo. The first failure stops the
    mirroring for the session and is recorded; the native coordinator keeps running either way.
    """

    def __init__(self, ruflo: Ruflo) -> None:
        import queue

        self.ruflo = ruflo
        self.tasks: dict[str, str] = {}  # worker ID -> Ruflo task ID
        self.failure: str | None = None
        self._queue: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="ivoai-ruflo", daemon=True)
        self._thread.start()

    def started(self, worker_id: str) -> None:
        """A worker started (its opaque ID is all Ruflo gets)."""
        self._queue.put(("start", worker_id))

    def ended(self, worker_id: str, state: str) -> None:
        """A worker ended (`succeeded` completes its task, anything else cancels it)."""
        self._queue.put((state, worker_id))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self.failure is not None:
                continue
            what, worker = item
            try:
                if what == "start":
                    made = self.ruflo.tool(
                        "task_create", {"type": "coordination", "description": f"ivoai-worker {worker}"}
                    )
                    self.tasks[worker] = str(made.get("taskId"))
                elif worker in self.tasks and what == "succeeded":
                    self.ruflo.tool("task_complete", {"taskId": self.tasks[worker]})
                elif worker in self.tasks:
                    self.ruflo.tool("task_cancel", {"taskId": self.tasks[worker], "reason": what[:32]})
            except (RufloGateError, OSError) as exc:
                self.failure = getattr(exc, "message", None) or str(exc)

    def close(self, timeout: float = RUFLO_COMMAND_TIMEOUT_SECONDS) -> None:
        """Finish what is queued (bounded), then stop."""
        self._queue.put(None)
        self._thread.join(timeout)

    @classmethod
    def from_runtime(cls, doc: Mapping[str, Any], env: Mapping[str, str]) -> RufloLifecycle | None:
        """The lifecycle of a session whose gate passed (its runtime document names Ruflo)."""
        ruflo = doc.get("ruflo") if doc.get("coordinator") == "ruflo" else None
        if (
            not isinstance(ruflo, dict)
            or not isinstance(ruflo.get("binary"), str)
            or not isinstance(ruflo.get("home"), str)
        ):
            return None
        return cls(Ruflo(ruflo["binary"], ruflo["home"], dict(env)))
