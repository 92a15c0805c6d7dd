"""One launch, start to finish: knowledge router -> compression decision -> client -> teardown.

Only `os`, `sys`, `time` and ivoai's import-light modules are loaded before the client starts on
the common path (`--direct` or no compression configured, no knowledge source): the session
record, telemetry and everything that needs pathlib, json or dataclasses are written right after
the spawn, while the client starts up. The knowledge router, the config reader and the providers'
preflights are imported only when they are used.

Failure isolation (seed 002): an optional layer that fails *before* the client starts is reported
and the official client runs Direct; a `--knowledge-source` the user named that does not exist is a
usage error. Once the client has started, its exit status is ivoai's, and a failure (the proxy
died) ends that session and is reported; ivoai never starts a second one silently.
"""

from __future__ import annotations

import os
import sys
import time

from ivoai.client.agents.argv import LaunchArgs
from ivoai.client.agents.childenv import client_env
from ivoai.client.agents.errors import ExecutorNotFoundError, LaunchError, SessionEndedError
from ivoai.client.agents.executors import EXECUTORS, ExecutorSpec, discover, managed_bin_dir
from ivoai.client.agents.process import Outcome, Supervisor, stop_process
from ivoai.client.sessions.ids import new_session_id
from ivoai.common.errors import IvoaiError, UsageError
from ivoai.common.lightio import xdg_root
from ivoai.common.limits import SESSION_RECORD_DEFER_SECONDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from ivoai.client.agents.session_extras import SessionExtras
    from ivoai.client.compression.caveman import CavemanProxy
    from ivoai.client.compression.decision import CompressionSetting, Decision

INSTALL_HINTS = {
    "codex": "npm install -g @openai/codex",
    "claude": "npm install -g @anthropic-ai/claude-code",
    "opencode": "npm install -g opencode-ai",
}


def _note(message: str) -> None:
    sys.stderr.write(f"ivoai: {message}\n")
    sys.stderr.flush()


class _Session:
    """Mutable state of one launch, torn down in `close()` in reverse order of creation."""

    def __init__(self, args: LaunchArgs, spec: ExecutorSpec, env: Mapping[str, str]) -> None:
        self.args = args
        self.spec = spec
        self.env = env
        self.id = new_session_id()
        self.state_root = xdg_root("XDG_STATE_HOME", ".local/state", env)
        self.router: Any = None
        self.sources: list[Any] = []
        self.proxy: CavemanProxy | None = None
        self.runtime: str | None = None
        self.codex_home_created_by_us: str | None = None
        self.helper_exit: int | None = None
        self.client_origin: str | None = None  # "managed" (ivoai's pinned install) or "path" (issue 17)
        self.extension: Any = None  # `ivoai auto` (orchestration._auto.AutoExtension); see run_launch
        self.wrap_port: int | None = None  # headroom's detached wrap proxy, stopped after the client

    def runtime_dir(self) -> str:
        """`$XDG_STATE_HOME/ivoai/run/<session-id>` (0700), created on first use."""
        if self.runtime is None:
            from ivoai.common.lightio import open_private_dirs

            os.close(open_private_dirs(self.state_root, "run", self.id))
            self.runtime = os.path.join(self.state_root, "run", self.id)
            _sweep_stale(self.state_root, self.id)
        return self.runtime

    def close(self) -> None:
        """Stop the proxy, close the router, remove the runtime; each step runs even if one fails."""
        try:
            if self.proxy is not None:
                proxy, self.proxy = self.proxy, None
                stop_process(proxy.pid, group=True)
        finally:
            try:
                if self.router is not None:
                    router, self.router = self.router, None
                    router.close()
            finally:
                self._remove_runtime()

    def _remove_runtime(self) -> None:
        if self.runtime is not None:
            import shutil

            shutil.rmtree(self.runtime, ignore_errors=True)
            self.runtime = None
        if self.codex_home_created_by_us is not None:
            try:  # noqa: SIM105 - contextlib is not loaded on the launch path
                os.rmdir(self.codex_home_created_by_us)  # only succeeds while it is still empty
            except OSError:
                pass


def _sweep_stale(state_root: str, keep: str) -> None:
    """Clean up after sessions whose ivoai process died (SIGKILL, crash): their proxy and runtime."""
    try:
        from ivoai.client.sessions.control import sweep_stale
        from ivoai.client.sessions.records import SessionStore

        for line in sweep_stale(SessionStore(), keep=keep):
            _note(line)
    except (IvoaiError, OSError) as exc:
        _note(f"warning: stale session runtimes not cleaned ({getattr(exc, 'message', exc)})")


def _start_knowledge(session: _Session) -> None:
    from ivoai.client.agents.session_extras import attach_wanted

    args, spec = session.args, session.spec
    if not attach_wanted(
        spec, off=args.no_knowledge, named=args.selectors, what="knowledge sources", env=session.env
    ):
        return
    try:
        from ivoai.client.knowledge import router as router_mod
    except ImportError as exc:
        if args.selectors:
            raise LaunchError(f"knowledge routing is not available in this build ({exc.name})") from None
        return
    try:
        if not args.selectors and not router_mod.enabled_sources():
            return
        session.router = router_mod.start_session_router(args.selectors)
    except UsageError:
        raise  # an unknown or disabled --knowledge-source the user named
    except IvoaiError as exc:
        if args.selectors:
            raise
        _note(f"warning: knowledge sources not attached ({exc.message}); starting {spec.binary} without them")
        return
    session.sources = list(session.router.sources)


def _authoritative_count(sources: list[Any]) -> int:
    return sum(
        1
        for s in sources
        if getattr(s, "authoritative", True) and set(getattr(s, "kinds", ())) & {"memory", "context"}
    )


def _requested_setting(session: _Session) -> CompressionSetting:
    from ivoai.client.compression.decision import CompressionSetting

    if session.args.direct:
        return CompressionSetting("direct", "flag")
    from ivoai.client.compression.settings import resolve_setting

    config = os.path.join(xdg_root("XDG_CONFIG_HOME", ".config", session.env), "config.toml")
    if not os.path.exists(config):
        return resolve_setting({})
    try:
        from ivoai.client.config.fast import read_config_fast

        return resolve_setting(read_config_fast())
    except IvoaiError as exc:
        _note(f"warning: {exc.message}; running {session.spec.binary} without compression")
        return CompressionSetting("direct", "config_invalid")


def _decide(
    session: _Session, setting: CompressionSetting, sup: Supervisor
) -> tuple[Decision, list[str], dict[str, str], str | None]:
    """The decision plus extra client args, extra env, and a replacement executable (headroom)."""
    from ivoai.client.compression import decision as d

    spec = session.spec
    provider, final = d.choose(
        setting, supported=spec.compression, authoritative_sources=_authoritative_count(session.sources)
    )
    if final is not None:
        return final, [], {}, None
    from ivoai.client.compression.errors import PreflightError

    assert provider is not None
    try:
        if provider == "caveman":
            return _start_caveman(session, setting, sup)
        from ivoai.client.compression import headroom

        binary = headroom.preflight(spec.name, session.env)
        env = {**headroom.ENV, **headroom.WRAP_PROXY_ENV}
        return d.after_preflight(setting, provider, None), [], env, binary.path
    except PreflightError as exc:
        _note(f"{provider} unavailable ({exc.code}); starting the official {spec.binary} directly")
        return d.after_preflight(setting, provider, exc.code), [], {}, None


def _start_caveman(
    session: _Session, setting: CompressionSetting, sup: Supervisor
) -> tuple[Decision, list[str], dict[str, str], str | None]:
    from ivoai.client.compression import caveman
    from ivoai.client.compression.decision import after_preflight
    from ivoai.client.compression.errors import PreflightError

    binary = caveman.preflight(session.env)
    if binary.test_pin:
        _note(f"warning: {caveman.TEST_PIN_ENV} replaces the pinned caveman-proxy digest (test hook)")
    try:
        home, config = caveman.make_runtime(session.runtime_dir())
        port = caveman.free_loopback_port()
        caveman.write_config(config, port)
    except (IvoaiError, OSError) as exc:
        _note(f"warning: caveman runtime not created ({getattr(exc, 'message', exc)})")
        raise PreflightError("caveman runtime could not be created", code="caveman_runtime_failed") from None
    log = os.path.join(home, "proxy.log")
    try:
        pid = sup.spawn(
            binary.path,
            caveman.proxy_argv(binary, port),
            caveman.proxy_env(session.env, home, config),
            own_group=True,
            stdin_devnull=True,
            output_path=log,
        )
    except OSError:
        raise PreflightError("caveman-proxy could not be started", code="caveman_spawn_failed") from None
    session.proxy = caveman.CavemanProxy(pid, port, home)
    try:
        caveman.wait_ready(port, pid)
    except PreflightError:
        stop_process(pid, group=True)
        session.proxy = None
        caveman.remove_runtime(session.runtime_dir())
        raise
    if session.spec.name == "codex":
        return after_preflight(setting, "caveman", None), caveman.codex_config_args(session.proxy), {}, None
    return after_preflight(setting, "caveman", None), [], caveman.claude_env(session.proxy), None


def _knowledge_args(session: _Session) -> tuple[list[str], dict[str, str]]:
    from ivoai.client.agents import mcp_render

    # An extension (`ivoai auto`) brings its own instructions, which include the research order.
    instruction = session.extension.instructions if session.extension is not None else None
    if session.router is None:
        if instruction is None:
            return [], {}
        if session.spec.mcp_style == "codex-flags":
            return mcp_render.codex_instruction_args(_codex_instruction(session, instruction)), {}
        return ["--append-system-prompt", instruction], {}
    instruction = instruction or mcp_render.RESEARCH_ORDER_INSTRUCTION
    if session.spec.mcp_style == "codex-flags":
        from ivoai.client.knowledge.router import READ_TOOLS, STATUS_TOOL

        args = mcp_render.codex_mcp_args(session.router.url, {*READ_TOOLS, STATUS_TOOL})
        args += mcp_render.codex_instruction_args(_codex_instruction(session, instruction))
        return args, {mcp_render.TOKEN_ENV: session.router.token}
    import json

    from ivoai.common.fsio import PRIVATE_FILE_MODE

    path = os.path.join(session.runtime_dir(), "mcp.json")
    doc = mcp_render.claude_mcp_document(session.router.url, session.router.token)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    return [f"--mcp-config={path}", "--append-system-prompt", instruction], {}


def _codex_instruction(session: _Session, ivoai_text: str) -> str:
    """ivoai's text after the user's own `developer_instructions` (a `-c` override would replace them)."""
    from ivoai.client.agents.codex_instructions import merged_instructions

    return merged_instructions(ivoai_text, session.env, session.args.client_args)


def _session_extras(session: _Session, claude_settings: Mapping[str, Any] | None = None) -> SessionExtras:
    from ivoai.client.agents.session_extras import session_extras

    return session_extras(
        session.spec,
        session.args,
        router=session.router,
        sources=session.sources,
        env=session.env,
        runtime_dir=session.runtime_dir,
        note=_note,
        claude_settings=claude_settings,
    )


def _skills(session: _Session) -> Any:
    """Issue 20: the `--skill` attachment (see ivoai.client.skills.attach), or None without `--skill`."""
    if not session.args.skills:
        return None
    from ivoai.client.skills.attach import prepare

    return prepare(session.spec.name, session.args.skills, session.runtime_dir())


def _with_skills(session: _Session, knowledge_args: list[str], skills: Any) -> list[str]:
    """`knowledge_args` plus the `--skill` attachment.

    Codex keeps one `developer_instructions` string: with a router the skill list extends ivoai's
    research-order instruction (already merged with the user's own value); without one it is merged
    with the user's own value here, so `--skill` never replaces what the user configured.
    """
    from ivoai.client.skills.attach import merge_args

    prefix = "developer_instructions="
    has_instruction = any(a.startswith(prefix) for a in knowledge_args)
    if skills.instruction is None or has_instruction or session.spec.mcp_style != "codex-flags":
        return merge_args(knowledge_args, skills)
    from ivoai.client.agents import mcp_render
    from ivoai.client.agents.codex_instructions import merged_instructions

    text = merged_instructions(skills.instruction, session.env, session.args.client_args)
    return [*knowledge_args, *mcp_render.codex_instruction_args(text)]


def _codex_home(env: Mapping[str, str]) -> str:
    value = env.get("CODEX_HOME", "")
    return value if value and os.path.isabs(value) else os.path.join(os.path.expanduser("~"), ".codex")


def _check_cancelled(sup: Supervisor) -> None:
    if sup.pending_cancel():
        raise KeyboardInterrupt


def run_launch(
    args: LaunchArgs,
    env: Mapping[str, str] | None = None,
    on_spawned: Callable[[int], None] | None = None,
    extension: Any = None,
) -> int:
    """Launch the official client for `args`; return its exit status (128+N for signal N).

    `extension` (`ivoai auto`) adds to the session: `instructions` (replacing the research-order
    instruction), `client_args(session_id, runtime_dir, router) -> (args, env)`, `started(pid)`
    right after the client's exec (issue 16: its supervisor), `record_fields()` for the session
    record, and `finish(record)` before the final record is written.

    Raises:
        ExecutorNotFoundError: the client is not installed.
        UsageError: an unknown or disabled `--knowledge-source`.
        LaunchError: the client could not be executed.
    """
    env = os.environ if env is None else env
    spec = EXECUTORS[args.executor]
    exe_path, origin = _find_client(spec, env)
    session = _Session(args, spec, env)
    session.client_origin = origin
    session.extension = extension
    started = time.time()
    with Supervisor() as sup:  # block signals before the router thread exists
        try:
            decision, path, argv, child_env = _prepare(session, sup, exe_path)
            pid = _spawn(session, sup, path, argv, child_env, on_spawned)
            # Built now, while the client starts (off the exit path); published only if it still
            # runs SESSION_RECORD_DEFER_SECONDS later, else written once, ended.
            record = _bookkeeping(session, decision, pid, started)
            outcome = _supervise(session, sup, pid, record)
            _record_end(session, record, decision, outcome)
        finally:
            if session.wrap_port is not None:  # headroom leaves its detached proxy running for 15 minutes
                from ivoai.client.compression import headroom

                headroom.stop_wrap_proxy(session.wrap_port, session.id)
            session.close()
    return _exit_status(session, outcome)


def _find_client(spec: ExecutorSpec, env: Mapping[str, str]) -> tuple[str, str]:
    """(path, "managed"|"path") of the installed client.

    Raises:
        ExecutorNotFoundError: it is not installed.
    """
    found = discover(spec.binary, env)
    if found is None:
        raise ExecutorNotFoundError(
            f"{spec.binary} is not installed (not on PATH nor in {managed_bin_dir(env)}); "
            f"install it with `{INSTALL_HINTS[spec.name]}`"
        )
    return found


def _prepare(
    session: _Session, sup: Supervisor, exe_path: str
) -> tuple[Decision, str, list[str], dict[str, str]]:
    """Every optional layer in order (skills, knowledge, compression, extension, extras), then the
    client's decision, executable, argv and environment."""
    skills = _skills(session)  # issue 20: `--skill` resolved and copied before anything starts
    _start_knowledge(session)
    _check_cancelled(sup)
    setting = _requested_setting(session)
    decision, provider_args, provider_env, wrapper = _decide(session, setting, sup)
    _check_cancelled(sup)
    client_args, extra_env = _client_args(session, skills, provider_args, provider_env)
    path, argv = _command(session, exe_path, wrapper, client_args, extra_env)
    child_env, stripped = client_env(session.env, extra_env)
    if stripped:
        _note(
            f"not passing {', '.join(stripped)} to {session.spec.binary}: ivoai launches subscription "
            "logins, never pay-as-you-go keys"
        )
    return decision, path, argv, child_env


def _client_args(
    session: _Session, skills: Any, provider_args: list[str], provider_env: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The client's arguments and the variables ivoai adds to its environment."""
    knowledge_args, knowledge_env = _knowledge_args(session)
    ext_args: list[str] = []
    ext_env: dict[str, str] = {}
    ext_settings = None
    if session.extension is not None:
        ext_args, ext_env = session.extension.client_args(session.id, session.runtime_dir(), session.router)
        ext_settings = getattr(session.extension, "claude_settings", None)
    # issue 18: user MCP servers + memory hooks, process-local; Claude's one --settings file
    # carries the hooks and `ivoai auto`'s statusLine together.
    extras = _session_extras(session, claude_settings=ext_settings)
    if skills is not None:
        knowledge_args = _with_skills(session, knowledge_args, skills)
    extra_env = {"IVOAI_SESSION_ID": session.id, **knowledge_env, **extras.env, **provider_env}
    extra_env.update(ext_env)
    client_args = [*knowledge_args, *ext_args, *extras.args, *provider_args, *session.args.client_args]
    return client_args, extra_env


def _command(
    session: _Session, exe_path: str, wrapper: str | None, client_args: list[str], extra_env: dict[str, str]
) -> tuple[str, list[str]]:
    """(executable, argv): the client itself, or `headroom wrap EXECUTOR` (which finds it on PATH)."""
    if wrapper is None:
        return exe_path, [exe_path, *client_args]
    from ivoai.client.compression import headroom
    from ivoai.client.compression.caveman import free_loopback_port

    extra_env["PATH"] = os.path.dirname(exe_path) + os.pathsep + session.env.get("PATH", "")
    if session.spec.name == "codex" and not os.path.exists(_codex_home(session.env)):
        session.codex_home_created_by_us = _codex_home(session.env)
    session.wrap_port = free_loopback_port()
    binary = headroom.HeadroomBinary(wrapper, "")
    return wrapper, headroom.wrap_argv(binary, session.spec.name, session.wrap_port, client_args)


def _spawn(
    session: _Session,
    sup: Supervisor,
    path: str,
    argv: list[str],
    child_env: dict[str, str],
    on_spawned: Callable[[int], None] | None,
) -> int:
    """Start the client; tell the caller and the extension its PID.

    Raises:
        LaunchError: it could not be executed.
    """
    try:
        pid = sup.spawn(path, argv, child_env)
    except OSError as exc:
        raise LaunchError(f"could not start {path}: {exc.strerror or exc}") from None
    if on_spawned is not None:
        on_spawned(pid)
    if session.extension is not None and hasattr(session.extension, "started"):
        session.extension.started(pid)  # issue 16: `ivoai auto`'s supervisor watches the primary
    return pid


def _supervise(session: _Session, sup: Supervisor, pid: int, record: dict[str, Any] | None) -> Outcome:
    """Wait for the client (and watch the proxy); publish the running record if it runs long enough."""
    helper = session.proxy.pid if session.proxy is not None else None

    def helper_died(code: int) -> None:
        session.helper_exit = code

    def write_running_record() -> None:
        _publish(session, record, "written")

    outcome = sup.supervise(
        pid,
        helper_pid=helper,
        on_helper_death=helper_died,
        deferred=write_running_record,
        defer_seconds=SESSION_RECORD_DEFER_SECONDS,
    )
    if helper is not None and outcome.helper_exit is not None:
        session.proxy = None  # reaped by the supervisor
    return outcome


def _exit_status(session: _Session, outcome: Outcome) -> int:
    """The client's exit status; a dead proxy ended the session, which is said once."""
    if outcome.reason == "helper_died":
        err = SessionEndedError(
            f"the caveman proxy exited (status {outcome.helper_exit}) while {session.spec.binary} was "
            f"running; session {session.id} was ended and is not restarted"
        )
        _note(f"error: {err.message}")
        return outcome.exit_code or 1
    return outcome.exit_code


def _telemetry_due(decision: Decision) -> bool:
    """A compression event exists only when a provider was involved (requested, bypassed or fell back)."""
    return decision.requested != "direct" or decision.bypass or decision.fallback


def _bookkeeping(session: _Session, decision: Decision, pid: int, started: float) -> dict[str, Any] | None:
    """Build the session record and write the decision's telemetry event; never raises."""
    try:
        return _record_start(session, decision, pid, started)
    except Exception as exc:  # noqa: BLE001 - once the client runs, bookkeeping never abandons it
        _note(f"warning: session bookkeeping failed ({type(exc).__name__})")
        return None


def _record_start(session: _Session, decision: Decision, pid: int, started: float) -> dict[str, Any]:
    """The (unpublished) session record; writes the decision's telemetry event when one is due."""
    from ivoai.client.sessions.procinfo import start_marker

    result = "bypassed" if decision.bypass else "fallback" if decision.fallback else "started"
    event: dict[str, Any] = {
        "executor": session.spec.name,
        "requested": decision.requested,
        "effective": decision.effective,
        "result": result,
        "reason": decision.reason,
        "bypass": decision.bypass,
        "fallback": decision.fallback,
        "authoritative_sources": decision.authoritative_sources,
        "payload_type": "session",
        "latency_ms": int((time.time() - started) * 1000),
    }
    if decision.bypass:
        event["fidelity"] = "exact_required"  # fidelity.classify("memory_response"); pinned by a test
    if _telemetry_due(decision):
        from ivoai.client.compression.telemetry import Telemetry

        Telemetry(session.state_root).record(session_id=session.id, **event)
    from ivoai.client.sessions.records import SessionRecord

    me = os.getpid()
    helper = session.proxy.pid if session.proxy is not None else None
    record = SessionRecord(
        id=session.id,
        executor=session.spec.name,
        pid=me,
        pid_start=start_marker(me),
        client_pid=pid,
        client_start=start_marker(pid),
        helper_pid=helper,
        helper_start=start_marker(helper) if helper is not None else None,
        started_at=started,
        requested_provider=decision.requested,
        effective_provider=decision.effective,
        provider_source=decision.source,
        bypass=decision.bypass,
        bypass_reason=decision.reason,
        fallback=decision.fallback,
        authoritative_sources=decision.authoritative_sources,
        knowledge_sources=[str(getattr(s, "id", "")) for s in session.sources],
        last_compression=event,
        client_origin=session.client_origin,  # which executable ran: ivoai's managed pin or PATH
    ).to_json()
    if session.extension is not None:
        record.update(session.extension.record_fields())
    return record


def _publish(session: _Session, record: dict[str, Any] | None, what: str) -> bool:
    """Write `record`; a failure is one warning line, never an exception."""
    if record is None:
        return False
    from ivoai.client.sessions.publish import publish_record

    try:
        publish_record(session.state_root, record)
    except (IvoaiError, OSError, ValueError) as exc:
        _note(f"warning: session record not {what} ({getattr(exc, 'message', exc)})")
        return False
    return True


def _record_end(
    session: _Session, record: dict[str, Any] | None, decision: Decision, outcome: Outcome
) -> None:
    """Mark the record ended (exit code, reason); prune old ended records only when there are many."""
    if _telemetry_due(decision) or outcome.reason == "helper_died":
        from ivoai.client.compression.telemetry import Telemetry

        Telemetry(session.state_root).record(
            session_id=session.id,
            executor=session.spec.name,
            effective=decision.effective,
            requested=decision.requested,
            result="failed" if outcome.reason == "helper_died" else "ended",
            reason=outcome.reason,
            payload_type="session",
        )
    if record is None:
        return
    record.update(state="ended", ended_at=time.time(), exit_code=outcome.exit_code, end_reason=outcome.reason)
    if session.extension is not None:
        try:
            session.extension.finish(record)
        except (IvoaiError, OSError, ValueError) as exc:
            _note(f"warning: plan metadata not recorded ({getattr(exc, 'message', exc)})")
    if _publish(session, record, "updated"):
        _prune_if_crowded(session.state_root)


def _prune_if_crowded(state_root: str) -> None:
    """Loading every record to prune is costly: only do it when the directory holds many files."""
    from ivoai.client.sessions.publish import SESSIONS_DIR
    from ivoai.common.limits import SESSION_ENDED_KEEP

    try:
        count = len(os.listdir(os.path.join(state_root, SESSIONS_DIR)))
    except OSError:
        return
    if count <= SESSION_ENDED_KEEP + SESSION_ENDED_KEEP // 4:
        return
    try:
        from ivoai.client.sessions.records import SessionStore

        SessionStore().prune_ended()
    except (IvoaiError, OSError) as exc:
        _note(f"warning: old session records not pruned ({getattr(exc, 'message', exc)})")
