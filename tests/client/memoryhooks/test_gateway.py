"""The hook runner and flusher against a real gateway (the server app over a real loopback socket).

Every hook here is a real `python -m ivoai memory hook EVENT` process fed on stdin, as Codex and
Claude Code run it; the flusher is either the detached one those processes start or
`ivoai memory hooks flush`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ivoai.client.config.secrets import SecretsStore
from ivoai.client.knowledge.router import start_session_router
from ivoai.client.memoryhooks import spool
from ivoai.client.memoryhooks.flusher import Flusher, _lock_fd, _records, _try_lock, flush_now
from ivoai.client.memoryhooks.install import lost_events
from ivoai.client.memoryhooks.locations import spool_dir
from ivoai.client.memoryhooks.runner import run_hook as run_hook_in_process
from ivoai.common.paths import XdgPaths
from tests.client.memoryhooks.support import (
    Gateway,
    run_hook,
    start_gateway,
    stored_events,
    wait_until,
)
from tests.conftest import run_ivoai


@pytest.fixture
def gateway(tmp_path: Path, xdg: XdgPaths) -> Iterator[Gateway]:
    gw = start_gateway(tmp_path)
    gw.enroll(xdg)
    try:
        yield gw
    finally:
        gw.stop()


def _prompt(session: str, text: str, cwd: str = "/") -> str:
    return json.dumps(
        {"session_id": session, "cwd": cwd, "hook_event_name": "UserPromptSubmit", "prompt": text}
    )


def _spool_records() -> list[dict[str, object] | None]:
    fd = spool.open_spool(os.path.dirname(os.path.dirname(spool_dir())))
    try:
        out: list[dict[str, object] | None] = []
        for name in [*spool.segments(fd), spool.ACTIVE]:
            data = spool.read_segment(fd, name) or b""
            out += [record for _end, record in _records(data, 0)]
        return out
    finally:
        os.close(fd)


def test_events_arrive_once_even_when_their_batch_is_sent_again(gateway: Gateway, xdg: XdgPaths) -> None:
    for i in range(3):
        done = run_hook("UserPromptSubmit", _prompt("s-once", f"prompt number {i}"))
        assert (done.returncode, done.stdout) == (0, b"")
    flush_now(xdg)  # waits for the flusher the hooks started, then sends whatever is left
    wait_until(lambda: len(stored_events(gateway)) == 3, what="three events")
    # Replay the same events (a batch resent after an uncertain outcome): stored once.
    sent = [e for e in stored_events(gateway)]
    root = xdg.state
    fd = spool.open_spool(str(root))
    try:
        lines = b"".join(
            json.dumps(
                {"v": 1, "dest": None, "event": {k: v for k, v in e.items() if k != "_project"}}
            ).encode()
            + b"\n"
            for e in sent
        )
        os.write(os.open(spool.ACTIVE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600, dir_fd=fd), lines)
    finally:
        os.close(fd)
    report = flush_now(xdg)
    assert (report.sent, report.duplicates, report.error) == (0, 3, None)
    assert len(stored_events(gateway)) == 3
    assert {e["prompt"] for e in stored_events(gateway)} == {f"prompt number {i}" for i in range(3)}


def test_server_down_hooks_exit_zero_and_the_spool_flushes_after_restart(
    gateway: Gateway, xdg: XdgPaths
) -> None:
    gateway.stop()
    for i in range(3):
        done = run_hook("UserPromptSubmit", _prompt("s-down", f"while down {i}"))
        assert (done.returncode, done.stdout) == (0, b"")
    state_file = xdg.state / "memoryhooks" / "state.json"
    wait_until(
        lambda: (
            state_file.exists()
            and (json.loads(state_file.read_text()).get("last_error") or {}).get("code") == "unreachable"
        ),
        what="the background flusher to record the outage",
    )
    assert len([r for r in _spool_records() if r]) == 3  # nothing lost
    gateway.start()
    run_hook("Stop", json.dumps({"session_id": "s-down", "last_assistant_message": "back"}))
    # The background flusher retries after its backoff: no command needed once the server is back.
    wait_until(lambda: len(stored_events(gateway)) == 4, timeout=90, what="the spool to flush after restart")
    wait_until(lambda: json.loads(state_file.read_text())["last_error"] is None, what="the error to clear")
    assert not [r for r in _spool_records() if r]


def test_a_refused_credential_keeps_the_events_and_status_shows_the_error(
    gateway: Gateway, xdg: XdgPaths
) -> None:
    store = SecretsStore(xdg)
    good = store.get(gateway.profile_id)
    assert good
    store.put(gateway.profile_id, "ivc_" + "w" * 40)
    done = run_hook("UserPromptSubmit", _prompt("s-cred", "with a wrong credential"))
    assert (done.returncode, done.stdout) == (0, b"")
    report = flush_now(xdg)
    assert report.error_code == "credential_refused"
    assert "ivc_" not in (report.error or "")
    status = run_ivoai("memory", "hooks", "status", "--client", "claude", "--no-probe", "--json")
    assert status.returncode == 0, status.stderr
    [row] = json.loads(status.stdout)["clients"]
    assert row["last_error"]["code"] == "credential_refused"
    assert row["spool"]["pending_events"] == 1
    assert "w" * 40 not in status.stdout
    store.put(gateway.profile_id, good)
    assert flush_now(xdg).sent == 1
    assert [e["prompt"] for e in stored_events(gateway)] == ["with a wrong credential"]


def test_sixty_four_hook_processes_at_once_all_arrive(gateway: Gateway, xdg: XdgPaths) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "ivoai", "memory", "hook", "PostToolUse", "--client", "codex"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(64)
    ]
    payloads = [
        json.dumps(
            {"session_id": "s-64", "tool_name": "Edit", "tool_input": {"file_path": f"/src/f{i}.py"}}
        ).encode()
        for i in range(64)
    ]
    results = [p.communicate(payload, timeout=120) for p, payload in zip(procs, payloads, strict=True)]
    assert [p.returncode for p in procs] == [0] * 64
    assert all(out == b"" for out, _err in results)
    flush_now(xdg)
    # Every event is either stored once or counted as lost (its process ran out of budget on an
    # overloaded machine before it could spool): never silently missing, never torn or doubled.
    lost = lost_events()
    wait_until(lambda: len(stored_events(gateway)) == 64 - lost, what=f"{64 - lost} events")
    files = [f for e in stored_events(gateway) for f in e["files"]]
    assert len(set(files)) == len(files) == 64 - lost
    assert set(files) <= {f"/src/f{i}.py" for i in range(64)}
    assert lost <= 16, f"{lost} of 64 hooks ran out of budget"
    state = json.loads((xdg.state / "memoryhooks" / "state.json").read_text())
    assert state.get("corrupt_lines", 0) == 0


def test_a_writer_killed_mid_append_leaves_a_readable_spool(gateway: Gateway, xdg: XdgPaths) -> None:
    gateway.stop()  # keep everything in the spool while writers are killed
    # The exact state a SIGKILL during write(2) leaves: a record cut off without its newline.
    fd = spool.open_spool(str(xdg.state))
    try:
        torn = json.dumps({"v": 1, "dest": None, "event": {"idempotency_key": "torn"}}).encode()[:40]
        out = os.open(spool.ACTIVE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600, dir_fd=fd)
        os.write(out, torn)
        os.close(out)
    finally:
        os.close(fd)
    # And real kills: hook processes with large payloads killed at staggered moments.
    big = json.dumps({"session_id": "s-kill", "prompt": "x" * (900 * 1024)}).encode()
    victims = []
    for i in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-m", "ivoai", "memory", "hook", "UserPromptSubmit", "--client", "claude"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        writer = threading.Thread(target=_feed, args=(proc, big), daemon=True)
        writer.start()
        victims.append((proc, writer, 0.02 * i))
    for proc, _writer, delay in victims:
        threading.Timer(delay, lambda p=proc: p.poll() is None and p.send_signal(signal.SIGKILL)).start()
    for proc, writer, _delay in victims:
        proc.wait(60)
        writer.join(60)
    for i in range(3):
        assert run_hook("UserPromptSubmit", _prompt("s-kill", f"after the kills {i}")).returncode == 0
    records = _spool_records()
    complete = [r for r in records if r is not None]
    assert records.count(None) >= 1  # the torn line is there, and only skipped
    gateway.start()
    assert flush_now(xdg).error is None  # (a woken background flusher may have sent them first)
    wait_until(lambda: len(stored_events(gateway)) == len(complete), what="every complete record")
    state = json.loads((xdg.state / "memoryhooks" / "state.json").read_text())
    assert state["corrupt_lines"] >= 1 and state["last_error"] is None
    events = stored_events(gateway)
    assert {f"after the kills {i}" for i in range(3)} <= {e.get("prompt") for e in events}
    assert not [r for r in _spool_records() if r]


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(OSError):  # killed meanwhile: EPIPE
        proc.stdin.write(data)
    with contextlib.suppress(OSError):
        proc.stdin.close()


def test_control_bytes_invalid_utf8_and_100_mib_payloads_are_captured_safely(
    gateway: Gateway, xdg: XdgPaths
) -> None:
    controls = b'{"session_id": "s-bytes", "prompt": "bell\x07 nul\\u0000 esc\x1b[31m red \\ud800 end"}'
    invalid = b'{"session_id": "s-bytes", "prompt": "caf\xe9 \xff\xfe latin-1 bytes"}'
    huge = b'{"session_id": "s-huge", "cwd": "/", "prompt": "' + b"y" * (100 * 1024 * 1024) + b'"}'
    for payload in (controls, invalid, huge, b"\x00\x01 not json at all", b"[1, 2, 3]"):
        done = run_hook("UserPromptSubmit", payload, timeout=120)
        assert (done.returncode, done.stdout) == (0, b"")
    report = flush_now(xdg)
    assert report.error is None and report.rejected == 0
    events = {str(e.get("prompt") or e.get("message")): e for e in stored_events(gateway)}
    assert len(events) == 5
    texts = list(events)
    assert "bell nul esc[31m red ? end" in texts
    assert "caf\ufffd \ufffd\ufffd latin-1 bytes" in texts
    [huge_event] = [e for e in events.values() if e["session_id"] == "s-huge"]
    assert "truncated" in huge_event["message"]
    assert huge_event["prompt"].endswith("…[truncated]") and len(huge_event["prompt"]) <= 4000
    assert all(not any(ord(c) < 32 and c not in "\t\n" for c in t) for t in texts)
    assert {e["message"] for e in events.values() if "not valid JSON" in (e.get("message") or "")}
    assert {e["message"] for e in events.values() if "not a JSON object" in (e.get("message") or "")}


def test_a_hook_whose_stdin_never_closes_ends_with_status_zero_by_its_budget(gateway: Gateway) -> None:
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ivoai", "memory", "hook", "Stop", "--client", "codex"],
            stdin=read_end,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        os.write(write_end, b'{"session_id": "s-stuck"')  # and never more, never closed
        out, _err = proc.communicate(timeout=60)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert (proc.returncode, out) == (0, b"")


def test_secrets_in_a_prompt_never_reach_the_spool_or_the_server(gateway: Gateway, xdg: XdgPaths) -> None:
    gateway.stop()
    key = "sk-ant-" + "A1b2C3d4" * 4
    assert run_hook("UserPromptSubmit", _prompt("s-secret", f"use {key} please")).returncode == 0
    raw = b"".join(p.read_bytes() for p in Path(spool_dir()).glob("*.ndjson"))
    assert key.encode() not in raw and b"[REDACTED]" in raw
    gateway.start()
    flush_now(xdg)
    [event] = stored_events(gateway)
    assert key not in json.dumps(event)


def test_a_subdirectory_and_a_linked_worktree_land_in_the_main_repositorys_project(
    gateway: Gateway, xdg: XdgPaths, tmp_path: Path
) -> None:
    main = tmp_path / "Shop_API"
    (main / "pkg").mkdir(parents=True)
    git_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (
        ["init", "-q"],
        ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x"],
        ["worktree", "add", "-q", str(tmp_path / "wt")],
    ):
        subprocess.run(["git", *args], cwd=main, env=git_env, check=True, capture_output=True, timeout=60)
    for cwd in (main / "pkg", tmp_path / "wt"):
        assert run_hook("UserPromptSubmit", _prompt("s-proj", f"from {cwd.name}", str(cwd))).returncode == 0
    flush_now(xdg)
    wait_until(lambda: len(stored_events(gateway)) == 2, what="two events")
    assert {e["_project"] for e in stored_events(gateway)} == {"shop_api"}


def _capture_in_process(env: dict[str, str], payload: str) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, payload.encode())
    os.close(write_end)
    try:
        assert run_hook_in_process(["UserPromptSubmit", "--client", "codex"], env=env, stdin_fd=read_end) == 0
    finally:
        os.close(read_end)


def test_batches_go_through_the_session_router_and_directly_once_it_is_gone(
    gateway: Gateway, xdg: XdgPaths
) -> None:
    router = start_session_router(paths=xdg)
    env = dict(
        os.environ,
        IVOAI_MEMORY_HOOK_SOURCE="mem",
        IVOAI_MEMORY_HOOK_ROUTER=router.url.rsplit("/", 1)[0],
        IVOAI_KNOWLEDGE_TOKEN_HOOKS=router.token,
    )
    lock = _lock_fd(str(xdg.state))  # hold the flush lock: no background flusher races this test
    try:
        assert _try_lock(lock)
        for i in range(2):
            _capture_in_process(env, _prompt("s-router", f"routed {i}"))
        routed = Flusher(xdg, env).run()
        assert (routed.sent, routed.via_router, routed.via_direct, routed.error) == (2, 2, 0, None)
        router.close()  # the session ended; its spooled events still carry its destination
        _capture_in_process(env, _prompt("s-router", "after the session"))
        direct = Flusher(xdg, env).run()
        assert (direct.sent, direct.via_router, direct.via_direct) == (1, 0, 1)
    finally:
        os.close(lock)
        router.close()
    assert sorted(str(e["prompt"]) for e in stored_events(gateway)) == [
        "after the session",
        "routed 0",
        "routed 1",
    ]


def test_the_router_refuses_hook_batches_without_its_capability(gateway: Gateway, xdg: XdgPaths) -> None:
    import httpx2

    with start_session_router(paths=xdg) as router:
        base = router.url.rsplit("/", 1)[0]
        body = {"events": [{"idempotency_key": "k1", "event": "stop", "session_id": "s"}]}
        refused = httpx2.post(
            base + "/v1/memory/hook/batch", json=body, headers={"authorization": "Bearer nope"}
        )
        unknown = httpx2.post(
            base + "/v1/memory/hook/batch?knowledge_source=elsewhere",
            json=body,
            headers={"authorization": f"Bearer {router.token}"},
        )
        accepted = httpx2.post(
            base + "/v1/memory/hook/batch", json=body, headers={"authorization": f"Bearer {router.token}"}
        )
    assert (refused.status_code, unknown.status_code, accepted.status_code) == (401, 404, 200)
    assert accepted.json()["applied"] == 1
