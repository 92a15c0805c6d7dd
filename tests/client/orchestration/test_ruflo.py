"""The Ruflo safe-profile gate with the real `ruflo` 3.38.12 from npm (tools/ruflo, see scripts/test).

Where a test needs a Ruflo that misbehaves (an unreviewed version, a tampered config report), a
small script stands in for it or wraps the real binary; its docstring-like comment says which.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ivoai.client.orchestration._daemons import find_ruflo_daemons
from ivoai.client.orchestration._ruflo import SAFE_PROFILE, SAFE_TOOLS, RufloLifecycle, run_gate
from ivoai.common.paths import XdgPaths
from tests.client.orchestration.workers import wait_for
from tests.conftest import tool_path

INSTALL_HINT = (
    "the real ruflo is not installed for the tests: scripts/test installs it "
    "(cd tools/ruflo && npm ci --omit=optional --ignore-scripts), or set IVOAI_TEST_RUFLO"
)


def ruflo_binary() -> Path:
    """The real ruflo; a missing one fails the test with the install hint (never skipped)."""
    path = tool_path("ruflo")
    assert path.exists(), INSTALL_HINT
    return path


def _on_path(xdg: XdgPaths, script: str, name: str = "ruflo") -> Path:
    """Put an executable script where ivoai looks first (its managed bin directory)."""
    bindir = xdg.data / "bin"
    bindir.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = bindir / name
    target.write_text(script)
    target.chmod(0o755)
    return target


def logging_shim(xdg: XdgPaths, log: Path) -> Path:
    """Records every Ruflo invocation (argv, environment, stdin), then runs the real ruflo."""
    real = ruflo_binary()
    return _on_path(
        xdg,
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"with open({str(log)!r}, 'a') as fh:\n"
        "    doc = {'argv': sys.argv[1:], 'env': dict(os.environ), 'cwd': os.getcwd()}\n"
        "    fh.write(json.dumps(doc) + '\\n')\n"
        f"os.execv({str(real)!r}, [{str(real)!r}, *sys.argv[1:]])\n",
    )


def _runtime(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    return run


def test_the_gate_passes_with_the_real_ruflo_and_registers_an_opaque_primary(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    log = tmp_path / "ruflo.jsonl"
    logging_shim(xdg, log)
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-should-never-reach-ruflo-1234567890"}
    gate = run_gate(str(_runtime(tmp_path)), env)
    assert gate.coordinator == "ruflo", gate.reason
    assert gate.version == "3.38.12" and gate.swarm_id and gate.swarm_id.startswith("swarm-")
    assert gate.task_id and gate.task_id.startswith("task-") and gate.primary_ref
    home = tmp_path / "run" / "ruflo"
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert json.loads((home / "claude-flow.config.json").read_text()) == SAFE_PROFILE
    calls = [json.loads(x) for x in log.read_text().splitlines()]
    for call in calls:
        assert call["cwd"] == str(home) and call["env"]["HOME"] == str(home)
        assert call["env"]["RUFLO_PROVIDER"] == "ivoai-disabled"
        assert call["env"]["CLAUDE_FLOW_MEMORY_BACKEND"] == "memory"
        assert "OPENAI_API_KEY" not in call["env"] and "ANTHROPIC_API_KEY" not in call["env"]
    executed = [c["argv"][3] for c in calls if c["argv"][:2] == ["mcp", "exec"]]
    assert set(executed) <= set(SAFE_TOOLS) and "swarm_init" in executed and "task_create" in executed
    assert not (home / ".claude-flow" / "daemon.pid").exists()  # no daemon was started
    tasks = json.loads((home / ".claude-flow" / "tasks" / "store.json").read_text())["tasks"]
    assert [t["description"] for t in tasks.values()] == [f"ivoai-primary {gate.primary_ref}"]


def test_a_missing_ruflo_leaves_the_session_native_with_the_reason(xdg: XdgPaths, tmp_path: Path) -> None:
    gate = run_gate(str(_runtime(tmp_path)), {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert gate.coordinator == "native" and "ruflo is not installed" in gate.reason


def test_an_unreviewed_ruflo_version_fails_the_gate(xdg: XdgPaths, tmp_path: Path) -> None:
    # Stands in for another Ruflo release: answers --version only.
    _on_path(xdg, "#!/bin/sh\n[ \"$1\" = --version ] && echo 'ruflo v3.40.0' && exit 0\necho '{}'\n")
    gate = run_gate(str(_runtime(tmp_path)), dict(os.environ))
    assert gate.coordinator == "native" and "ruflo 3.40.0 is not the reviewed 3.38.12" in gate.reason


def test_a_ruflo_that_does_not_report_the_safe_profile_fails_the_gate(xdg: XdgPaths, tmp_path: Path) -> None:
    # Wraps the real ruflo but reports durable memory (as a tampered install or a config override would).
    real = ruflo_binary()
    _on_path(
        xdg,
        f"#!{sys.executable}\n"
        "import os, subprocess, sys\n"
        f"out = subprocess.run([{str(real)!r}, *sys.argv[1:]], capture_output=True, text=True).stdout\n"
        "if sys.argv[1:3] == ['config', 'get']:\n"
        '    out = out.replace(\'"memory.backend": "memory"\', \'"memory.backend": "hybrid"\')\n'
        "sys.stdout.write(out)\n",
    )
    gate = run_gate(str(_runtime(tmp_path)), dict(os.environ))
    assert gate.coordinator == "native"
    assert "ruflo does not report the safe profile: memory.backend is 'hybrid'" in gate.reason


def test_worker_lifecycles_reach_ruflo_as_opaque_ids_only(xdg: XdgPaths, tmp_path: Path) -> None:
    log = tmp_path / "ruflo.jsonl"
    logging_shim(xdg, log)
    runtime = _runtime(tmp_path)
    gate = run_gate(str(runtime), dict(os.environ))
    assert gate.coordinator == "ruflo", gate.reason
    doc = {
        "coordinator": "ruflo",
        "ruflo": {"binary": str(xdg.data / "bin" / "ruflo"), "home": str(runtime / "ruflo")},
    }
    lifecycle = RufloLifecycle.from_runtime(doc, dict(os.environ))
    assert lifecycle is not None
    lifecycle.started("wrk_0123456789abcdef")
    lifecycle.ended("wrk_0123456789abcdef", "succeeded")
    lifecycle.started("wrk_fedcba9876543210")
    lifecycle.ended("wrk_fedcba9876543210", "cancelled")
    lifecycle.close()
    assert lifecycle.failure is None
    tasks = json.loads((runtime / "ruflo" / ".claude-flow" / "tasks" / "store.json").read_text())["tasks"]
    states = {t["description"]: t["status"] for t in tasks.values()}
    assert states["ivoai-worker wrk_0123456789abcdef"] == "completed"
    assert states["ivoai-worker wrk_fedcba9876543210"] == "cancelled"


def test_doctor_reports_a_stray_ruflo_daemon(xdg: XdgPaths, tmp_path: Path) -> None:
    """A real Ruflo daemon left running inside an ivoai session runtime is reported, not touched."""
    workspace = xdg.state / "run" / ("ses_" + "4" * 32)
    workspace.mkdir(parents=True, mode=0o700)
    env = {"PATH": os.environ["PATH"], "HOME": str(workspace), "NO_COLOR": "1", "RUFLO_FUNNEL": "0",
           "CLAUDE_FLOW_AUTO_UPDATE": "false"}  # fmt: skip
    daemon = subprocess.Popen(
        [str(ruflo_binary()), "daemon", "start", "--foreground"], cwd=workspace, env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, process_group=0,
    )  # fmt: skip
    try:
        wait_for(lambda: any(d.pid == daemon.pid for d in find_ruflo_daemons(xdg)))
        [found] = [d for d in find_ruflo_daemons(xdg) if d.pid == daemon.pid]
        assert found.in_ivoai_runtime and found.workspace == str(workspace)
        result = subprocess.run(
            [sys.executable, "-m", "ivoai", "doctor", "--json"], capture_output=True, text=True, timeout=120,
            env=dict(os.environ), check=False,
        )  # fmt: skip
        [row] = [c for c in json.loads(result.stdout)["components"] if c["component"] == "ruflo-daemons"]
        assert row["health"]["state"] == "degraded"
        assert f"stray Ruflo daemon(s) inside ivoai session runtimes (pid {daemon.pid}" in row["reason"]
        assert daemon.poll() is None  # doctor only reports
    finally:
        os.killpg(daemon.pid, 9)
        daemon.wait()


@pytest.mark.parametrize("tool", ["agent_execute", "memory_store"])
def test_tools_outside_the_safe_profile_are_refused(xdg: XdgPaths, tmp_path: Path, tool: str) -> None:
    from ivoai.client.orchestration._ruflo import Ruflo, RufloGateError

    ruflo = Ruflo(str(ruflo_binary()), str(tmp_path))
    with pytest.raises(RufloGateError, match="outside ivoai's safe profile"):
        ruflo.tool(tool, {})
    assert ruflo.commands == []  # refused before anything ran


SECRET_TASK = "Audit the payroll export for the Hamburg subsidiary"
SECRET_OBJECTIVE = "Review the payroll exporter and list defects by file"


def test_an_auto_session_on_ruflo_never_gives_it_task_text_briefs_or_output(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    from ivoai.client.config.store import set_key
    from tests.cli.test_auto_failover import LOGGED_IN, _claude, _records, _repo
    from tests.client.orchestration.plans import plan, task
    from tests.client.orchestration.support import codex_standin, fixture

    hot = {"complexity": 70, "risk": 60, "verification_need": 70, "context_breadth": 60, "parallel_value": 90,
           "latency_sensitivity": 20}  # fmt: skip
    answer = json.dumps({"summary": "WORKER-ANSWER-7431", "findings": ["f"], "state_delta": {}})
    events = [{"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"},
              {"type": "turn.completed", "usage": {"input_tokens": 3, "output_tokens": 2}}]  # fmt: skip
    calls = [
        ["orchestration_bootstrap", {"objective": SECRET_OBJECTIVE,
                                     "acceptance_criteria": ["each defect names a file"],
                                     "research": {"memory": "done", "context": "done"}}],
        ["orchestration_plan", {"plan": plan(task("scan", sig=hot, text=SECRET_TASK))}],
        ["orchestration_spawn_batch", {}],
        ["orchestration_wait", {"mode": "all", "timeout_seconds": 120}],
        ["orchestration_result", {"task_id": "scan"}],
    ]  # fmt: skip
    codex_standin(
        xdg,
        {**LOGGED_IN, "rate_limits": fixture("codex_rate_limits_legacy.json"),
         "exec": {"events": events, "last_message": answer}, "primary": {"calls": calls}},
    )  # fmt: skip
    _claude(xdg)
    log = tmp_path / "ruflo.jsonl"
    logging_shim(xdg, log)
    set_key("auto.coordinator", "ruflo", xdg)
    repo = _repo(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "ivoai", "auto", "--yes"], cwd=repo, capture_output=True, text=True,
        timeout=300,
        env={**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-never-for-ruflo-123456"}, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [record] = _records(xdg)
    assert record["auto"]["coordinator"]["coordinator"] == "ruflo", record["auto"]["coordinator"]
    assert record["auto"]["plan"]["tasks"][0]["state"] == "succeeded"
    recorded = log.read_text()
    for secret in (
        SECRET_TASK,
        SECRET_OBJECTIVE,
        "WORKER-ANSWER-7431",
        "sk-ant-test",
        "each defect names a file",
    ):
        assert secret not in recorded
    descriptions = [
        json.loads(c["argv"][5])["description"]
        for c in map(json.loads, recorded.splitlines())
        if c["argv"][:4] == ["mcp", "exec", "-t", "task_create"]
    ]
    worker = record["auto"]["workers"][0]["worker_id"]
    assert descriptions == [
        f"ivoai-primary {record['auto']['coordinator']['primary_ref']}",
        f"ivoai-worker {worker}",
    ]


def test_an_auto_session_falls_back_to_native_when_the_gate_fails(xdg: XdgPaths, tmp_path: Path) -> None:
    from ivoai.client.config.store import set_key
    from tests.cli.test_auto_failover import LOGGED_IN, _claude, _records, _repo
    from tests.client.orchestration.support import codex_standin, fixture

    codex_standin(xdg, {**LOGGED_IN, "rate_limits": fixture("codex_rate_limits_legacy.json")})
    _claude(xdg)
    _on_path(xdg, "#!/bin/sh\necho 'ruflo v2.0.0'\n")  # stands in for an old, unreviewed Ruflo
    set_key("auto.coordinator", "ruflo", xdg)
    repo = _repo(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "ivoai", "auto", "--yes"], cwd=repo, capture_output=True, text=True,
        timeout=300,
        env=dict(os.environ), check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (
        "ruflo gate failed: ruflo 2.0.0 is not the reviewed 3.38.12; using the native coordinator"
        in result.stderr
    )
    [record] = _records(xdg)
    assert record["auto"]["coordinator"]["coordinator"] == "native"
    assert (
        record["auto"]["coordinator"]["reason"]
        == "ruflo gate failed: ruflo 2.0.0 is not the reviewed 3.38.12"
    )
