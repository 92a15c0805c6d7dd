"""The orchestrator stdio MCP server, driven by the real MCP SDK client (a process, as Codex/Claude run it).

The workers it starts are the logged-in codex stand-in (codex_standin.py), so the whole path runs:
plan approval, dependency-ordered spawns, real worker processes, the ArtifactStore, results.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import mcp.types as t
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from ivoai.client.orchestration._state import read_state
from ivoai.common.paths import XdgPaths
from tests.client.orchestration.plans import plan, task
from tests.client.orchestration.support import codex_standin, fixture

pytestmark = pytest.mark.anyio
SESSION = "ses_" + "b" * 32
ANSWER = json.dumps(
    {"summary": "found 2 defects", "findings": ["a", "b"], "state_delta": {"next_steps": ["fix a"]}}
)
SECRET_TASK_TEXT = "Inspect the tokenizer edge cases around unicode escapes"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _standin(xdg: XdgPaths, **exec_spec: Any) -> Path:
    events = [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 5}},
    ]
    return codex_standin(
        xdg,
        {
            "account": fixture("codex_account_chatgpt.json"),
            "rate_limits": fixture("codex_rate_limits_legacy.json"),
            "model_list": fixture("codex_model_list.json"),
            "exec": {"events": events, "last_message": ANSWER, **exec_spec},
        },
    )


def _runtime(xdg: XdgPaths, tmp_path: Path, *, approve: bool = False, workers: int = 2) -> Path:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    (tmp_path / "repo").mkdir()
    doc = {
        "session_id": SESSION,
        "planner": "codex",
        "workdir": str(tmp_path / "repo"),
        "approve": approve,
        "workers": workers,
        "knowledge": None,
        "env": {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ},
        "xdg": {
            v: os.environ[v] for v in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")
        },
    }
    path = run / "orchestrator.json"
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    return path


@contextlib.asynccontextmanager
async def _client(runtime: Path, **kwargs: Any) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ivoai.client.orchestration.mcp_server", "--runtime", str(runtime)],
        env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write, **kwargs) as session:
        await session.initialize()
        yield session


async def _call(session: ClientSession, name: str, **args: Any) -> dict[str, Any]:
    result = await session.call_tool(name, args)
    assert result.structured_content is not None
    text = result.content[0].text  # type: ignore[union-attr]
    doc = dict(result.structured_content)
    if name.startswith("orchestration_artifact_read") and not result.is_error:
        doc["content"] = text  # the exact bytes travel once, as the text block
    else:
        assert json.loads(text) == result.structured_content
    doc["_is_error"] = result.is_error
    return doc


def _plan() -> dict[str, Any]:
    hot = {
        "complexity": 70,
        "risk": 60,
        "verification_need": 70,
        "context_breadth": 60,
        "parallel_value": 90,
        "latency_sensitivity": 20,
    }
    return plan(
        task("scan", text=SECRET_TASK_TEXT, sig=hot),
        task("deep", deps=["scan"], role="review", sig=hot),
        task(
            "tiny",
            complexity=5,
            risk=5,
            reasoning_depth=5,
            context_breadth=5,
            verification_need=5,
            parallel_value=5,
        ),
    )


BRIEF: dict[str, Any] = {
    "objective": "Review the tokenizer and report defects with file names",
    "acceptance_criteria": ["each finding names a file"],
    "research": {"memory": "done", "context": "unavailable"},
}


async def test_the_tools_are_listed_with_read_only_annotations(xdg: XdgPaths, tmp_path: Path) -> None:
    _standin(xdg)
    async with _client(_runtime(xdg, tmp_path)) as s:
        listed = {tool.name: tool for tool in (await s.list_tools()).tools}
    assert set(listed) >= {
        "orchestration_bootstrap",
        "orchestration_capabilities",
        "orchestration_plan",
        "orchestration_spawn",
        "orchestration_spawn_batch",
        "orchestration_wait",
        "orchestration_result",
        "orchestration_escalate",
        "orchestration_cancel",
        "orchestration_artifact_read",
        "orchestration_artifact_read_range",
    }
    assert (
        listed["orchestration_wait"].annotations is not None
        and listed["orchestration_wait"].annotations.read_only_hint
    )
    assert listed["orchestration_plan"].annotations is not None
    assert listed["orchestration_plan"].annotations.read_only_hint is False


async def test_a_whole_plan_runs_delegated_tasks_in_dependency_order(xdg: XdgPaths, tmp_path: Path) -> None:
    home = _standin(xdg)
    async with _client(_runtime(xdg, tmp_path)) as s:
        vague = await _call(
            s,
            "orchestration_bootstrap",
            objective="make it better",
            research={"memory": "done", "context": "done"},
        )
        assert vague["state"] == "waiting_for_refinement" and vague["gate"]["questions"]
        ready = await _call(s, "orchestration_bootstrap", **BRIEF)
        assert ready["state"] == "ready" and len(ready["brief"]["sha256"]) == 64
        caps = await _call(s, "orchestration_capabilities")
        codex = next(v for v in caps["vendors"] if v["vendor"] == "codex")
        assert codex["auth"] == "authenticated" and any(m["tier"] == "max" for m in codex["models"])
        assert caps["limits"]["max_tasks"] == 12 and caps["limits"]["workers_hard_cap"] == 3
        assert caps["limits"]["task_bytes"] == 32 * 1024
        assert caps["roles"] == {
            "research": "light",
            "documentation": "light",
            "implementation": "balanced",
            "review": "strong",
            "security": "strong",
            "ops": "strong",
            "synthesis": "strong",
        }
        planned = await _call(s, "orchestration_plan", plan=_plan())
        assert planned["valid"] and planned["plan_state"] == "approved"
        assert planned["approval"] == "client_tool_prompt"  # this client offers no elicitation
        by_id = {x["id"]: x for x in planned["tasks"]}
        assert by_id["tiny"]["delegated"] is False and by_id["scan"]["delegated"] is True
        spawned = await _call(s, "orchestration_spawn_batch")
        states = {x["task_id"]: x["state"] for x in spawned["spawned"]}
        assert (
            states["scan"] == "queued" and states["deep"] == "waiting_dependencies" and "tiny" not in states
        )
        refused = await _call(s, "orchestration_spawn", task_id="tiny")
        assert refused["_is_error"] and "stays with the primary" in refused["error"]["message"]
        waited = await _call(s, "orchestration_wait", task_ids=["scan"], mode="all", timeout_seconds=60)
        assert not waited["timed_out"] and waited["workers"][0]["state"] == "succeeded"
        for _ in range(30):  # deep starts when scan succeeded
            state = (await _call(s, "orchestration_wait", mode="all", timeout_seconds=5))["tasks"]["deep"]
            if state == "succeeded":
                break
        assert state == "succeeded"
        result = await _call(s, "orchestration_result", task_id="scan")
        assert (
            result["ready"] and result["status"] == "succeeded" and result["result"]["findings"] == ["a", "b"]
        )
        assert result["result"]["trust"] == "untrusted" and len(json.dumps(result)) <= 64 * 1024
        out = next(r for r in result["result"]["refs"] if r["role"] == "output")
        whole = await _call(s, "orchestration_artifact_read", ref=out["ref"]["id"])
        assert whole["content"] == ANSWER and whole["encoding"] == "utf-8"
        created, expires = (datetime.fromisoformat(whole["ref"][k]) for k in ("created_at", "expires_at"))
        assert (expires - created).total_seconds() == 7 * 24 * 3600  # kept for a long session
        part = await _call(s, "orchestration_artifact_read_range", ref=out["ref"]["id"], offset=2, length=7)
        assert part["content"] == ANSWER[2:9]
        other = await _call(s, "orchestration_artifact_read", ref="art_" + "0" * 32)
        assert other["_is_error"] and other["error"]["code"] == "artifact_not_found"
    runs = [r for r in (home / "ivoai-standin-requests.jsonl").read_text().splitlines() if "exec_argv" in r]
    assert len(runs) == 2
    meta = read_state(SESSION, xdg)
    assert meta is not None and meta["plan"]["state"] == "approved"
    assert {x["id"]: x["state"] for x in meta["plan"]["tasks"]} == {
        "scan": "succeeded",
        "deep": "succeeded",
        "tiny": "kept_by_primary",
    }
    text = json.dumps(meta)
    assert SECRET_TASK_TEXT not in text and "found 2 defects" not in text and BRIEF["objective"] not in text
    assert meta["metrics"]["context"]["prefix_sha256"] and meta["metrics"]["artifacts"]["stored"] >= 4


async def test_invalid_plans_and_arguments_are_answered_with_their_fields(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    _standin(xdg)
    async with _client(_runtime(xdg, tmp_path)) as s:
        doc = plan(*[task(f"t{i}") for i in range(13)])
        bad = await _call(s, "orchestration_plan", plan=doc)
        assert (
            bad["valid"] is False
            and {"field": "tasks", "message": "must hold 1-12 tasks (has 13)"} in bad["errors"]
        )
        no_plan = await _call(s, "orchestration_spawn", task_id="t1")
        assert no_plan["_is_error"] and "no approved plan" in no_plan["error"]["message"]
        wait = await _call(s, "orchestration_wait", timeout_seconds=301)
        assert wait["_is_error"] and wait["error"]["code"] == "invalid_arguments"
        assert "timeout_seconds" in wait["error"]["message"]
        esc = await _call(s, "orchestration_escalate", task_id="t1", reason="no")
        assert esc["_is_error"] and "reason" in esc["error"]["message"]
        big = await _call(
            s, "orchestration_artifact_read_range", ref="art_" + "1" * 32, offset=0, length=2 * 1024 * 1024
        )
        assert big["_is_error"] and "length" in big["error"]["message"]


async def test_elicitation_lets_the_user_accept_or_decline_the_plan(xdg: XdgPaths, tmp_path: Path) -> None:
    _standin(xdg)
    answers = ["decline", "accept"]
    asked: list[str] = []

    async def elicit(ctx: Any, params: t.ElicitRequestParams) -> t.ElicitResult:
        asked.append(params.message)
        action = answers.pop(0)
        return t.ElicitResult(action=action, content={"approve": True} if action == "accept" else None)  # type: ignore[arg-type]

    async with _client(_runtime(xdg, tmp_path), elicitation_callback=elicit) as s:
        declined = await _call(s, "orchestration_plan", plan=_plan())
        assert declined["plan_state"] == "rejected" and declined["approval"] == "rejected"
        assert (await _call(s, "orchestration_spawn", task_id="scan"))["_is_error"]
        accepted = await _call(s, "orchestration_plan", plan=_plan())
        assert accepted["plan_state"] == "approved" and accepted["approval"] == "elicitation"
    assert "scan [research, tier strong" in asked[0] and "kept by the primary" in asked[0]


async def test_cancel_and_escalate_through_the_tools(xdg: XdgPaths, tmp_path: Path) -> None:
    _standin(xdg, hold=True)
    async with _client(_runtime(xdg, tmp_path, approve=True)) as s:
        planned = await _call(s, "orchestration_plan", plan=_plan())
        assert planned["approval"] == "yes_flag"
        spawned = await _call(s, "orchestration_spawn", task_id="scan")
        worker = spawned["worker_id"]
        running = await _call(s, "orchestration_escalate", task_id="scan", reason="needs deeper review")
        assert running["_is_error"] and "cancel it before escalating" in running["error"]["message"]
        cancelled = await _call(s, "orchestration_cancel", worker_id=worker)
        assert cancelled["worker_id"] == worker
        done = await _call(s, "orchestration_wait", worker_ids=[worker], mode="all", timeout_seconds=60)
        assert done["workers"][0]["state"] == "cancelled"
        esc = await _call(
            s, "orchestration_escalate", task_id="scan", reason="the parser is security relevant"
        )
        assert (esc["previous_tier"], esc["tier"]) == ("strong", "max") and esc["state"] == "pending"
        assert esc["profile"]["model"] == "gpt-6.2-astra"
    meta = read_state(SESSION, xdg)
    assert meta is not None
    scan = next(x for x in meta["plan"]["tasks"] if x["id"] == "scan")
    assert scan["escalations"][0]["reason"] == "the parser is security relevant"


def test_sigterm_to_the_server_cancels_its_workers_and_reaps_their_groups(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    import signal
    import subprocess

    from mcp.types import LATEST_PROTOCOL_VERSION

    from tests.client.orchestration.workers import alive, wait_for

    home = _standin(xdg, hold=True, spawn_child=True)
    runtime = _runtime(xdg, tmp_path, approve=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ivoai.client.orchestration.mcp_server", "--runtime", str(runtime)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def rpc(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n")
        proc.stdin.flush()
        while True:
            msg = json.loads(proc.stdout.readline())
            if msg.get("id") == rid:
                return dict(msg["result"])

    try:
        rpc(
            1,
            "initialize",
            {
                "protocolVersion": LATEST_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        rpc(2, "tools/call", {"name": "orchestration_plan", "arguments": {"plan": _plan()}})
        rpc(3, "tools/call", {"name": "orchestration_spawn", "arguments": {"task_id": "scan"}})
        log = home / "ivoai-standin-requests.jsonl"
        wait_for(lambda: log.exists() and "grandchild" in log.read_text())
        grandchild = next(
            json.loads(x)["grandchild"] for x in log.read_text().splitlines() if "grandchild" in x
        )
        assert alive(grandchild)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 128 + signal.SIGTERM
        assert not alive(grandchild)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    meta = read_state(SESSION, xdg)
    assert meta is not None and meta["workers"][0]["state"] == "cancelled"
