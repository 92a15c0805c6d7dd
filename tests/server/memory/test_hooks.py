"""Hook intake: idempotency, redaction, bounds, deterministic session pages, repo-root projects."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ivoai.common.errors import TooLargeError, ValidationError
from ivoai.server.datadir import ServerDataDir
from ivoai.server.memory import service as service_module
from ivoai.server.memory.hooks import (
    HookEvent,
    project_from_checkout,
    project_from_git_common_dir,
    resolve_project,
)
from ivoai.server.memory.service import MemoryService

API_KEY = "sk-proj-" + "Q7w" * 16
SESSION = "0b7e1f6c-5d2a-4c1b-9f3e-2a6d8c4b1e90"


def event(key: str, kind: str = "user_prompt", **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "idempotency_key": key,
        "event": kind,
        "session_id": SESSION,
        "agent": "claude",
        "git_common_dir": "/home/dev/src/Billing-Service/.git",
        "at": "2025-06-01T09:00:00Z",
    }
    return {**base, **fields}


def test_the_same_event_posted_twice_is_applied_once(service: MemoryService) -> None:
    first = service.hook_event(event("k1", prompt="add retries to the uploader"))
    again = service.hook_event(event("k1", prompt="add retries to the uploader"))
    assert (first.status, again.status) == ("applied", "duplicate")
    page = service.memory_read_page("default", "billing-service", first.path or "")
    assert page.version == 1 and page.body.count("add retries to the uploader") == 1
    status = service.memory_status()
    assert (status.hook_events, status.sessions) == (1, 1)


def test_a_retried_batch_is_applied_once(service: MemoryService) -> None:
    batch = [event(f"k{i}", "tool_use", tool_name="Edit", files=[f"src/f{i}.py"]) for i in range(5)]
    assert service.hook_batch(batch).applied == 5
    retry = service.hook_batch({"events": batch})
    assert (retry.applied, retry.duplicates) == (0, 5)
    body = service.memory_recent("default", "billing-service", 1).pages[0]
    assert body.version == 1


def test_an_api_key_in_a_hook_payload_is_redacted_before_it_is_stored(
    service: MemoryService, data_dir: ServerDataDir
) -> None:
    result = service.hook_event(
        event(
            "k1",
            prompt=f"use OPENAI key {API_KEY} for the test",
            files=[f"/tmp/{API_KEY}.txt"],
            message=f"Authorization: Bearer {API_KEY}",
        )
    )
    assert result.status == "applied" and "openai_key" in result.redacted
    body = service.memory_read_page("default", "billing-service", result.path or "").body
    assert API_KEY not in body and "[REDACTED]" in body
    service.close()
    for name in os.listdir(data_dir.memory):
        assert API_KEY.encode() not in (data_dir.memory / name).read_bytes(), name


def test_the_session_page_summarizes_prompts_tools_and_files(service: MemoryService) -> None:
    service.hook_batch(
        [
            event("a", "session_start", at="2025-06-01T08:59:00Z"),
            event("b", "user_prompt", prompt="Fix the\nflaky upload test"),
            event("c", "tool_use", tool_name="Edit", files=["src/upload.py"], at="2025-06-01T09:01:00Z"),
            event("d", "tool_use", tool_name="Bash", at="2025-06-01T09:02:00Z"),
            event(
                "e",
                "tool_use",
                tool_name="Edit",
                files=["tests/test_upload.py", "src/upload.py"],
                at="2025-06-01T09:03:00Z",
            ),
            event("f", "session_end", message="done", at="2025-06-01T09:04:00Z"),
        ]
    )
    page = service.memory_read_page("default", "billing-service", f"sessions/2025-06-01/{SESSION}.md")
    assert page.kind == "session" and "session" in page.tags and "claude" in page.tags
    body = page.body
    assert "1. Fix the flaky upload test" in body
    assert body.index("`Edit` × 2") < body.index("`Bash` × 1")
    assert "- `src/upload.py`\n- `tests/test_upload.py`" in body
    assert "- started: 2025-06-01T08:59:00Z" in body and "- ended: yes" in body
    assert "- events: 6" in body


def test_the_session_page_does_not_depend_on_arrival_order(data_dir: ServerDataDir, tmp_path: Path) -> None:
    events = [
        event(
            f"k{i:02d}", "tool_use", tool_name=f"T{i % 3}", files=[f"f{i}"], at=f"2025-06-01T09:{i:02d}:00Z"
        )
        for i in range(12)
    ]
    events.insert(0, event("start", "session_start", at="2025-06-01T08:00:00Z"))
    shuffled = list(events[1:])
    random.Random(7).shuffle(shuffled)
    bodies = []
    for name, order in (("a", events), ("b", [events[0], *shuffled])):
        with MemoryService.open(ServerDataDir(tmp_path / name).ensure()) as svc:
            for ev in order:
                svc.hook_event(ev)
            bodies.append(
                svc.memory_read_page("default", "billing-service", f"sessions/2025-06-01/{SESSION}.md").body
            )
    assert bodies[0] == bodies[1]


def test_a_bad_event_in_a_batch_is_rejected_alone(service: MemoryService) -> None:
    result = service.hook_batch(
        [
            event("good", prompt="ok"),
            event("bad", kind="explode"),
            event("worse", session_id="../../etc"),
            event("named", project="Not Valid"),
            {"no": "key"},
        ]
    )
    assert [r.status for r in result.results] == ["applied", "rejected", "rejected", "rejected", "rejected"]
    assert result.results[1].error_code == "memory_invalid" and "'event'" in (result.results[1].error or "")
    assert result.results[3].error_code == "memory_invalid_name"
    assert (result.applied, result.rejected) == (1, 4)


def test_batches_are_bounded(service: MemoryService) -> None:
    with pytest.raises(ValidationError, match="1 to 100"):
        service.hook_batch([event(f"k{i}") for i in range(101)])
    with pytest.raises(ValidationError, match="1 to 100"):
        service.hook_batch([])
    with pytest.raises(ValidationError, match="must be a list"):
        service.hook_batch({"events": "nope"})


def test_an_oversized_event_is_refused_naming_the_limit(service: MemoryService) -> None:
    with pytest.raises(TooLargeError, match="65536 bytes"):
        service.hook_event(event("big", message="x" * 70_000))
    assert service.memory_status().hook_events == 0


def test_a_long_prompt_is_cut_with_a_marker_not_rejected(service: MemoryService) -> None:
    parsed = HookEvent.model_validate(event("long", prompt="word " * 2000))
    assert parsed.prompt is not None and len(parsed.prompt) == 4000 and parsed.prompt.endswith("[truncated]")


def test_unknown_fields_are_refused(service: MemoryService) -> None:
    with pytest.raises(ValidationError, match="'surprise'"):
        service.hook_event(event("k", surprise=1))


def test_events_beyond_the_session_limit_are_counted_and_stay_idempotent(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service_module, "MEMORY_SESSION_MAX_EVENTS", 3)
    for i in range(5):
        service.hook_event(event(f"k{i}", prompt=f"prompt {i}"))
    assert service.hook_event(event("k4", prompt="prompt 4")).status == "duplicate"
    body = service.memory_read_page("default", "billing-service", f"sessions/2025-06-01/{SESSION}.md").body
    assert "prompt 2" in body and "prompt 3" not in body
    assert "- events: 5 (2 beyond the per-session limit not kept)" in body


def test_session_page_history_is_bounded(service: MemoryService, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service_module, "MEMORY_SESSION_HISTORY_MAX_VERSIONS", 2)
    for i in range(6):
        service.hook_event(event(f"k{i}", prompt=f"p{i}"))
    path = f"sessions/2025-06-01/{SESSION}.md"
    assert service.memory_read_page("default", "billing-service", path).version == 6
    assert service.memory_read_page("default", "billing-service", path, version=4).version == 4
    with pytest.raises(Exception, match="no readable version 3"):
        service.memory_read_page("default", "billing-service", path, version=3)


@pytest.mark.parametrize(
    "common_dir",
    [
        "/home/dev/src/Billing-Service/.git",
        "/mnt/c/Users/dev/src/Billing-Service/.git",
        "C:\\Users\\dev\\src\\Billing-Service\\.git",
        "/home/dev/src/Billing-Service/.git/worktrees/feature-x",
        "/srv/git/Billing-Service.git",
        "/home/dev/src/Billing-Service/.git/",
    ],
)
def test_every_spelling_of_one_repository_maps_to_its_main_name(common_dir: str) -> None:
    assert project_from_git_common_dir(common_dir) == "billing-service"


def test_an_explicit_project_wins_and_a_bare_cwd_falls_back_to_default() -> None:
    assert resolve_project(HookEvent.model_validate(event("k", project="explicit"))) == "explicit"
    bare = event("k", cwd="/home/dev/src/Billing-Service/pkg/sub")
    del bare["git_common_dir"]
    assert resolve_project(HookEvent.model_validate(bare)) == "default"
    rooted = {**bare, "repo_root": "/home/dev/src/Billing-Service"}
    assert resolve_project(HookEvent.model_validate(rooted)) == "billing-service"


def _git(cwd: Path, *args: str) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=30, check=True
    )
    return out.stdout.strip()


def test_subdirectories_and_linked_worktrees_of_a_real_repository_share_one_project(
    service: MemoryService, tmp_path: Path
) -> None:
    main = tmp_path / "Shop_API"
    (main / "pkg" / "deep").mkdir(parents=True)
    _git(main, "init", "-q")
    (main / "README").write_text("x")
    _git(main, "add", "README")
    _git(main, "commit", "-q", "-m", "init")
    worktree = tmp_path / "elsewhere" / "feature-branch"
    _git(main, "worktree", "add", "-q", "-b", "feature", str(worktree))
    (worktree / "sub").mkdir()
    places = [main, main / "pkg" / "deep", worktree, worktree / "sub"]
    assert {project_from_checkout(p) for p in places} == {"shop_api"}
    assert project_from_checkout(tmp_path) is None
    projects = set()
    for i, place in enumerate(places):
        common = _git(place, "rev-parse", "--path-format=absolute", "--git-common-dir")
        result = service.hook_event(event(f"wt{i}", git_common_dir=common, cwd=str(place)))
        projects.add(result.project)
    assert projects == {"shop_api"}


def test_an_event_stamped_in_the_future_gets_the_server_time(service: MemoryService) -> None:
    result = service.hook_event(event("future", at="2999-01-01T00:00:00Z"))
    assert result.path is not None and not result.path.startswith("sessions/2999")


def test_a_time_without_a_zone_is_taken_as_utc(service: MemoryService) -> None:
    result = service.hook_event(event("naive", at="2025-06-01T23:30:00"))
    assert result.path == f"sessions/2025-06-01/{SESSION}.md"
    body = service.memory_read_page("default", "billing-service", result.path).body
    assert "- started: 2025-06-01T23:30:00Z" in body
