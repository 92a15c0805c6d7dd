"""Issue 20 wiring: an AUTO worker receives exactly the skills selected for its role and tier.

The real `codex exec` and `claude -p` run as workers against the scripted model service on
loopback (model_stub.py); what they send to the model is what the test inspects.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ivoai.client.orchestration._scoring import Tier
from ivoai.client.orchestration._worker import WorkerControl, run_worker
from ivoai.client.skills.service import SkillService, make_source
from ivoai.client.workingcontext import WorkerStatus
from ivoai.common.paths import XdgPaths
from tests.client.orchestration.model_stub import model_stub
from tests.client.orchestration.support import real_clients_on_path
from tests.client.orchestration.workers import git_tree, spec, worker_io
from tests.client.skills.helpers import write_skill

ANSWER = json.dumps({"summary": "ok", "findings": [], "state_delta": {}})


def _catalog(tmp_path: Path) -> None:
    root = tmp_path / "skills-src"
    write_skill(root, "zq-reviewer", "roles: [review]\ncapabilities: [read]\n")
    write_skill(root, "zq-researcher", "roles: [research]\n")
    write_skill(root, "zq-editor", "roles: [review]\ncapabilities: [write]\n")
    SkillService().add(make_source(str(root)))


def _sent(requests: list[dict[str, object]]) -> str:
    return json.dumps([r["body"] for r in requests])


@pytest.mark.parametrize("vendor", ["codex", "claude"])
def test_a_review_worker_gets_only_its_selected_skill(
    xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vendor: str
) -> None:
    real_clients_on_path(monkeypatch)
    _catalog(tmp_path)
    tree = git_tree(tmp_path / "repo")
    with model_stub(default_text=ANSWER) as stub:
        extra = {"extra_args": stub.codex_args(), "extra_env": stub.codex_env()} if vendor == "codex" else {
            "extra_env": stub.claude_env()}  # fmt: skip
        model = {} if vendor == "codex" else {"model": "sonnet"}
        s = spec(tree, vendor=vendor, role="review", tier=Tier.STRONG, **model, **extra)
        report = run_worker(s, worker_io(xdg, tmp_path), WorkerControl())
    assert report.status is WorkerStatus.SUCCEEDED, report.result.errors
    assert report.skills == ["zq-reviewer"] and report.to_dict()["skills"] == ["zq-reviewer"]
    sent = _sent(stub.requests)
    assert "zq-reviewer" in sent and "The zq-reviewer skill" in sent
    assert "zq-researcher" not in sent and "zq-editor" not in sent  # other roles, a write capability
    assert not (tmp_path / "spool" / "wrk_1").exists()  # the copies went with the worker's spool
    if vendor == "claude":  # the Skill tool came along; still no tool that writes or runs commands
        request = next(r for r in stub.requests if r["body"].get("tools"))
        tools = {t["name"] for t in request["body"].get("tools", [])}
        assert "Skill" in tools and tools <= {"Read", "Grep", "Glob", "Skill"}


def test_an_empty_registry_changes_nothing_and_a_role_less_worker_gets_no_skills(
    xdg: XdgPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ivoai.client.orchestration._worker import worker_skills

    tree = git_tree(tmp_path / "repo")
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    assert worker_skills(spec(tree, role="review"), spool) == ((), (), None)  # nothing registered
    _catalog(tmp_path)
    assert worker_skills(spec(tree), spool) == ((), (), None)  # no role: the primary's path, no broadcast
    args, names, warning = worker_skills(spec(tree, role="research", tier=Tier.LIGHT), spool)
    assert names == ("zq-researcher",) and warning is None and args[0] == "-c"
