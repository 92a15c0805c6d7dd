"""Failover: from a confirmed hard limit of the primary to the alternate official TUI with a brief.

`ivoai auto` runs this between two launches (see `_auto.run_auto`), after the supervisor ended the
primary:

1. **Ceiling**: at most AUTO_MAX_FAILOVERS (2) consecutive failovers without a new checkpoint by
   a primary; the third is refused with the reset times (no ping-pong between two limited vendors).
2. **Re-probe the alternate** (fresh login and quota): a missing, logged-out or limited alternate
   stops the chain with both reset times; nothing is started silently.
3. **Work tree**: the bounded summary (`_worktree`; no file changes).
4. **Checkpoint by the supervisor** (the primary's last body, the summary, the failover facts).
5. **Brief** (`_handoff`, <= 8 KiB) from the last checkpoint and the summary.
6. **Claude -> Codex**: the Claude transcript is imported into a Codex conversation through the
   official `codex app-server` `externalAgentConfig/import` (a `SESSIONS` item with the transcript
   path), when the installed Codex's own schema (`codex app-server generate-json-schema`, checked
   once per Codex version and cached) has that request; the alternate then opens that conversation
   (`codex resume <thread> <brief>`). Codex -> Claude carries the brief only (there is no official
   importer in that direction).

The alternate gets the brief as its initial prompt and the orchestrator like any AUTO primary; the
user's client arguments after `--` belonged to the first client and are not passed to the other.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ivoai.client.agents.childenv import probe_env
from ivoai.client.agents.executors import discover
from ivoai.client.orchestration._appserver import RpcError, open_app_server
from ivoai.client.orchestration._checkpoint import (
    Checkpoint,
    CheckpointBody,
    CheckpointRefusedError,
    read_checkpoint,
    write_checkpoint,
)
from ivoai.client.orchestration._errors import AppServerError, OrchestrationError
from ivoai.client.orchestration._handoff import HandoffContext, build_brief
from ivoai.client.orchestration._signals import Conversation
from ivoai.client.orchestration._worktree import WorktreeSummary, summarize_worktree
from ivoai.common.errors import IvoaiError
from ivoai.common.fsio import atomic_write, read_private_file_or_none
from ivoai.common.limits import AUTO_IMPORT_TIMEOUT_SECONDS, AUTO_MAX_FAILOVERS, PROBE_TIMEOUT_SECONDS
from ivoai.common.paths import XdgPaths

IMPORT_METHOD = "externalAgentConfig/import"
IMPORT_DONE = "externalAgentConfig/import/completed"


class FailoverRefusedError(OrchestrationError):
    """The chain stops here (ceiling reached, or the alternate cannot take over); nothing started."""

    code = "failover_refused"


@dataclass
class Chain:
    """An AUTO chain: the first session and each failover's, with the consecutive-failover count."""

    sessions: list[str] = field(default_factory=list)
    consecutive: int = 0
    seen_seq: int | None = None  # the checkpoint seq at the last failover
    history: list[dict[str, Any]] = field(default_factory=list)
    lease: Any = None  # the chain's kernel lease (`_lease`), held while this process drives it

    @property
    def root(self) -> str | None:
        """The first session (the checkpoint's key), once started."""
        return self.sessions[0] if self.sessions else None

    def admit(self, checkpoint: Checkpoint | None, resets: Mapping[str, float | None]) -> None:
        """Count one more failover, or refuse the one beyond the ceiling.

        A checkpoint written by a primary since the last failover resets the count.

        Raises:
            FailoverRefusedError: AUTO_MAX_FAILOVERS consecutive failovers already happened.
        """
        if checkpoint is not None and checkpoint.source == "primary" and checkpoint.seq != self.seen_seq:
            self.consecutive = 0
        self.seen_seq = checkpoint.seq if checkpoint is not None else None
        if self.consecutive >= AUTO_MAX_FAILOVERS:
            times = (
                "; ".join(f"{v} resets at {_when(t)}" for v, t in sorted(resets.items()))
                or "reset times unknown"
            )
            raise FailoverRefusedError(
                f"stopped: a failover number {self.consecutive + 1} in a row without a new checkpoint is "
                "refused "
                f"(at most {AUTO_MAX_FAILOVERS}); {times}. Nothing was started. Continue after a reset with "
                f"`ivoai session resume {self.sessions[-1] if self.sessions else 'ID'}`"
            )
        self.consecutive += 1


def _when(ts: float | None) -> str:
    return "an unknown time" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


# -- Claude -> Codex transcript import ----------------------------------------------------------------


def _import_cache(paths: XdgPaths, version: str) -> Path:
    from ivoai.client.orchestration._catalogue import safe_version

    return paths.cache / "catalogues" / f"codex-{safe_version(version)}.import.json"


def schema_has_import(schema_dir: str) -> bool:
    """True when a `generate-json-schema` output has the import request with a `SESSIONS` item."""
    try:
        with open(os.path.join(schema_dir, "ClientRequest.json"), encoding="utf-8") as fh:
            requests = json.load(fh)
        with open(
            os.path.join(schema_dir, "v2", "ExternalAgentConfigImportParams.json"), encoding="utf-8"
        ) as fh:
            params = json.load(fh)
    except (OSError, ValueError):
        return False
    methods = {
        m
        for v in requests.get("oneOf", [])
        for m in (v.get("properties", {}).get("method", {}).get("enum") or [])
    }
    defs = params.get("definitions", {})
    kinds = defs.get("ExternalAgentConfigMigrationItemType", {}).get("enum") or []
    session = defs.get("SessionMigration", {}).get("required") or []
    return IMPORT_METHOD in methods and "SESSIONS" in kinds and {"cwd", "path"} <= set(session)


def import_supported(codex: str, version: str | None, env: Mapping[str, str], paths: XdgPaths) -> bool:
    """Whether this Codex can import a Claude transcript (its own schema says; cached per version)."""
    if version:
        with contextlib.suppress(IvoaiError, OSError, ValueError):
            raw = read_private_file_or_none(paths.cache / "catalogues", _import_cache(paths, version), 4096)
            if raw is not None:
                return bool(json.loads(raw).get("supported"))
    tmp = tempfile.mkdtemp(prefix="ivoai-codex-schema-")
    try:
        proc = subprocess.run(
            [codex, "app-server", "generate-json-schema", "--out", tmp],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            env=probe_env(env),
            check=False,
        )
        supported = proc.returncode == 0 and schema_has_import(tmp)
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if version:
        from ivoai.common.fsio import ensure_private_dir

        with contextlib.suppress(IvoaiError, OSError):
            ensure_private_dir(paths.cache / "catalogues")
            doc = {"version": version, "supported": supported, "checked_at": time.time()}
            atomic_write(paths.cache / "catalogues", _import_cache(paths, version), json.dumps(doc).encode())
    return supported


def claude_transcript(conversation: Conversation | None, env: Mapping[str, str]) -> str | None:
    """The Claude primary's transcript file: from its hook payload, else found by its session ID."""
    if conversation is None or conversation.vendor != "claude":
        return None
    if conversation.transcript and os.path.isfile(conversation.transcript):
        return conversation.transcript
    base = env.get("CLAUDE_CONFIG_DIR") or os.path.join(env.get("HOME", os.path.expanduser("~")), ".claude")
    found = glob.glob(
        os.path.join(glob.escape(base), "projects", "*", f"{glob.escape(conversation.id)}.jsonl")
    )
    return found[0] if len(found) == 1 else None


def import_request(transcript: str, workdir: str, title: str) -> dict[str, Any]:
    """`ExternalAgentConfigImportParams` with one `SESSIONS` item: the Claude transcript."""
    item = {
        "itemType": "SESSIONS",
        "description": f"ivoai failover: {title}",
        "cwd": workdir,
        "details": {"sessions": [{"cwd": workdir, "path": transcript, "title": title}]},
    }
    return {"migrationItems": [item], "source": "ivoai"}


@dataclass(frozen=True)
class ImportResult:
    """The Codex conversation a Claude transcript became (None: not imported, and why)."""

    thread: str | None
    reason: str
    seconds: float = 0.0


def import_claude_conversation(
    transcript: str, workdir: str, title: str, env: Mapping[str, str], paths: XdgPaths
) -> ImportResult:
    """Import a Claude transcript into a new Codex conversation (official app-server request)."""
    started = time.monotonic()
    found = discover("codex", env)
    if found is None:
        return ImportResult(None, "codex is not installed")
    try:
        with open_app_server(found[0], env, timeout=AUTO_IMPORT_TIMEOUT_SECONDS) as server:
            if not import_supported(found[0], server.version, env, paths):
                return ImportResult(None, f"codex {server.version or '?'} has no {IMPORT_METHOD}")
            answer = server.request(IMPORT_METHOD, import_request(transcript, workdir, title))
            import_id = answer.get("importId") if isinstance(answer, dict) else None
            done = server.wait_notification(IMPORT_DONE, {"importId": import_id} if import_id else None)
    except (AppServerError, RpcError) as exc:
        return ImportResult(None, f"the import failed ({str(exc)[:200]})", time.monotonic() - started)
    for result in done.get("params", {}).get("itemTypeResults") or []:
        for ok in result.get("successes") or []:
            target = ok.get("target")
            if isinstance(target, str) and target:
                return ImportResult(target, "imported", time.monotonic() - started)
        for bad in result.get("failures") or []:
            return ImportResult(None, f"codex refused the import ({str(bad.get('message'))[:200]})")
    return ImportResult(None, "codex reported no imported conversation", time.monotonic() - started)


# -- the plan --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FailoverPlan:
    """How the alternate starts."""

    to_vendor: str
    client_args: tuple[str, ...]
    brief: str
    summary: WorktreeSummary
    imported: ImportResult | None
    timings: Mapping[str, float]


def plan_failover(
    chain: Chain,
    *,
    from_vendor: str,
    to_vendor: str,
    reason: str,
    resets: Mapping[str, float | None],
    conversation: Conversation | None,
    workdir: str,
    tasks: Sequence[Mapping[str, Any]],
    env: Mapping[str, str],
    paths: XdgPaths,
) -> FailoverPlan:
    """Steps 3-6 (the caller admitted the failover and re-probed the alternate)."""
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    summary = summarize_worktree(workdir)
    timings["worktree"] = time.monotonic() - t0
    root = chain.root
    assert root is not None
    previous = read_checkpoint(root, paths)
    body = previous.body if previous is not None else CheckpointBody(objective="(no checkpoint was written)")
    facts = {
        "from": from_vendor,
        "to": to_vendor,
        "reason": reason[:512],
        "resets_at": resets.get(from_vendor),
    }
    tree = (
        {"branch": summary.branch, "head": summary.head, "changed": list(summary.changed_names)}
        if summary.git
        else None
    )
    for worktree in (tree, None):
        try:
            written = write_checkpoint(
                root, body, source="supervisor", session_id=chain.sessions[-1], vendor=from_vendor,
                worktree=worktree, failover=facts, paths=paths,
            )  # fmt: skip
            chain.seen_seq = written.seq
            break
        except (CheckpointRefusedError, IvoaiError, OSError):
            continue
    imported = None
    if from_vendor == "claude" and to_vendor == "codex":
        transcript = claude_transcript(conversation, env)
        if transcript is None:
            imported = ImportResult(None, "the Claude transcript was not found")
        else:
            imported = import_claude_conversation(transcript, workdir, f"chain {root}", env, paths)
        timings["import"] = imported.seconds
    t1 = time.monotonic()
    brief = build_brief(
        HandoffContext(
            root, from_vendor, to_vendor, reason, previous, summary, tasks, resets,
            imported=imported.thread if imported is not None and imported.thread else None,
        )
    )  # fmt: skip
    timings["brief"] = time.monotonic() - t1
    if imported is not None and imported.thread:
        args: tuple[str, ...] = ("resume", imported.thread, brief)
    else:
        args = (brief,)
    return FailoverPlan(to_vendor, args, brief, summary, imported, timings)
