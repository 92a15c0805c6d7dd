"""Attaching skills to the real `claude` and `codex`: visible to the client, nothing global written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ivoai.client.agents import mcp_render
from ivoai.client.skills.attach import attach, merge_args, prepare, worker_attachment
from ivoai.client.skills.select import select_for_worker
from ivoai.client.skills.service import SkillService, make_source
from ivoai.common.errors import UsageError
from ivoai.common.paths import XdgPaths
from tests.client.skills.helpers import files_digest, model_stub, write_skill
from tests.conftest import run_ivoai, tool_path


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{tool_path('codex').parent}:/usr/bin:/bin"
    env.update(extra)
    return env


def _warm_up() -> None:
    """Each client writes its own state on a first run (with or without ivoai): let it, before comparing."""
    for args in (["claude", "plugin", "list", "--json"], ["codex", "debug", "prompt-input", "warm"]):
        subprocess.run(
            [str(tool_path(args[0])), *args[1:]], env=_env(), capture_output=True, timeout=120, check=False
        )


def _homes(home: Path) -> dict[str, str]:
    """Every file under ~/.claude and ~/.codex, except Codex's transient per-run shell snapshots.

    Codex writes `~/.codex/shell_snapshots/<id>.tmp-<n>` on every run and deletes it shortly after,
    whoever launched it; a file that exists only for a moment is not configuration.
    """
    files = {f".claude/{k}": v for k, v in files_digest(home / ".claude").items()}
    files.update({f".codex/{k}": v for k, v in files_digest(home / ".codex").items()})
    return {k: v for k, v in files.items() if not k.startswith(".codex/shell_snapshots/")}


def _populate(home: Path) -> None:
    (home / ".claude").mkdir(mode=0o700)
    (home / ".claude" / "settings.json").write_text('{"theme": "dark"}\n')
    (home / ".codex").mkdir(mode=0o700)
    (home / ".codex" / "config.toml").write_text('model = "o3"\n')


def _add(tmp_path: Path, *specs: tuple[str, str]) -> None:
    root = tmp_path / "skills-src"
    for name, extra in specs:
        write_skill(root, name, extra)
    SkillService().add(make_source(str(root)))


def _runtime_dirs(xdg: XdgPaths) -> list[str]:
    run = xdg.state / "run"
    return os.listdir(run) if run.exists() else []


def test_claude_lists_an_attached_skill_and_nothing_under_dot_claude_changes(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    home = Path.home()
    _populate(home)
    _add(tmp_path, ("hello", "version: 1.0.0\n"), ("other", ""))
    _warm_up()
    before = _homes(home)
    result = run_ivoai(
        "claude", "--direct", "--no-knowledge", "--skill", "hello", "--", "plugin", "details", "ivoai-skills",
        env=_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Skills (1)  hello" in result.stdout and "other" not in result.stdout
    assert _homes(home) == before
    assert _runtime_dirs(xdg) == []  # the session plugin went with the session


def test_codex_shows_an_attached_skill_in_its_model_input_and_nothing_under_dot_codex_changes(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    home = Path.home()
    _populate(home)
    _add(tmp_path, ("hello", ""), ("helper", "dependencies: [hello]\n"))
    _warm_up()
    before = _homes(home)
    result = run_ivoai(
        "codex", "--direct", "--skill", "helper", "--", "debug", "prompt-input", "hi", env=_env()
    )
    assert result.returncode == 0, result.stderr
    text = json.dumps(json.loads(result.stdout))
    assert "## Skills attached by ivoai" in text
    assert (
        "- hello: The hello skill (file: " in text and "- helper: The helper skill (file: " in text
    )  # dependency too
    assert text.index("- hello:") < text.index("- helper:")
    assert _homes(home) == before
    assert _runtime_dirs(xdg) == []


def test_a_skill_on_codex_without_knowledge_keeps_the_users_own_developer_instructions(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    home = Path.home()
    _populate(home)
    own = "Always answer the user in plain English, never in haiku."
    (home / ".codex" / "config.toml").write_text(f'model = "o3"\ndeveloper_instructions = "{own}"\n')
    _add(tmp_path, ("hello", ""))
    result = run_ivoai(
        "codex", "--direct", "--no-knowledge", "--skill", "hello", "--", "debug", "prompt-input", "hi",
        env=_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    text = json.dumps(json.loads(result.stdout))
    assert own in text and "- hello: The hello skill (file: " in text


def test_the_research_order_and_the_skill_list_reach_codex_as_one_instruction(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    _add(tmp_path, ("hello", ""))
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    candidates = [c for c in SkillService().candidates() if c.name == "hello"]
    ivoai_args = mcp_render.codex_instruction_args()
    merged = merge_args(ivoai_args, attach("codex", candidates, str(runtime)))
    assert sum(1 for a in merged if a.startswith("developer_instructions=")) == 1
    argv = [str(tool_path("codex")), *merged, "debug", "prompt-input", "hi"]
    shown = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=120, check=True)
    assert "consult shared memory first" in shown.stdout and "- hello: The hello skill" in shown.stdout


def test_a_skill_that_cannot_be_attached_stops_the_launch_before_the_client_starts(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    _add(tmp_path, ("sheller", "capabilities: [shell]\n"), ("ok", ""))
    denied = run_ivoai(
        "claude", "--direct", "--skill", "ok", "--skill", "sheller", "--", "--version", env=_env()
    )
    assert denied.returncode == 2 and denied.stdout == ""
    assert "--skill sheller cannot be attached (sheller: policy DENY: claims `shell`" in denied.stderr
    ok = next(c for c in SkillService().candidates() if c.name == "ok")
    (Path(ok.directory) / "SKILL.md").write_text("---\nname: ok\ndescription: changed on disk\n---\n")
    tampered = run_ivoai("claude", "--direct", "--skill", "ok", "--", "--version", env=_env())
    assert tampered.returncode == 1 and "no longer matches its digest" in tampered.stderr
    assert tampered.stdout == "" and _runtime_dirs(xdg) == []


def test_opencode_has_no_process_local_skill_mechanism(xdg: XdgPaths, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="opencode has no process-local skill mechanism"):
        prepare("opencode", ["ivoai-memory-context"], str(tmp_path))


def _workers_catalog(tmp_path: Path) -> None:
    _add(
        tmp_path,
        ("zq-reviewer", "roles: [review]\ncapabilities: [read]\n"),
        ("zq-researcher", "roles: [research]\n"),
        ("zq-sheller", "roles: [review]\ncapabilities: [shell]\n"),
        ("zq-editor", "roles: [review]\ncapabilities: [write]\n"),
    )


def test_worker_selection_follows_role_tier_executor_and_capabilities(xdg: XdgPaths, tmp_path: Path) -> None:
    _workers_catalog(tmp_path)
    result = select_for_worker("review", "BALANCED", "claude", ["read", "search"])
    assert [(c.name, c.directory) for c in result.selected] == [
        ("zq-reviewer", next(c.directory for c in SkillService().candidates() if c.name == "zq-reviewer"))
    ]
    assert {e.name: e.code for e in result.excluded} == {
        "zq-editor": "capability",
        "ivoai-memory-context": "capability",
        "zq-sheller": "denied",
    }
    with_knowledge = select_for_worker("research", "LIGHT", "codex", ["read", "mcp", "memory", "context"])
    assert [c.name for c in with_knowledge.selected] == ["ivoai-memory-context", "zq-researcher"]


def test_a_claude_print_worker_receives_only_its_selected_skills(xdg: XdgPaths, tmp_path: Path) -> None:
    _workers_catalog(tmp_path)
    runtime = tmp_path / "worker"
    runtime.mkdir(mode=0o700)
    attachment = worker_attachment(
        "claude", select_for_worker("review", "BALANCED", "claude", ["read"]), str(runtime)
    )
    with model_stub() as (base, bodies):
        subprocess.run(
            [str(tool_path("claude")), "-p", "--output-format", "json", *attachment.args, "review this"],
            env=_env(ANTHROPIC_BASE_URL=base, ANTHROPIC_AUTH_TOKEN="stub-token"),
            capture_output=True, timeout=120, check=False, cwd=tmp_path,
        )  # fmt: skip
    sent = b"".join(bodies).decode("utf-8", "replace")
    assert "ivoai-skills:zq-reviewer: The zq-reviewer skill" in sent
    assert "zq-researcher" not in sent and "zq-sheller" not in sent and "zq-editor" not in sent


def test_a_codex_exec_worker_receives_only_its_selected_skills(xdg: XdgPaths, tmp_path: Path) -> None:
    _workers_catalog(tmp_path)
    runtime = tmp_path / "worker"
    runtime.mkdir(mode=0o700)
    attachment = worker_attachment(
        "codex", select_for_worker("review", "STRONG", "codex", ["read"]), str(runtime)
    )
    provider = [
        "-c", "model_provider=stub", "-c", 'model_providers.stub.name="stub"',
        "-c", 'model_providers.stub.env_key="STUB_KEY"', "-c", 'model_providers.stub.wire_api="responses"',
    ]  # fmt: skip
    with model_stub() as (base, bodies):
        argv = [str(tool_path("codex")), "exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only"]
        argv += ["-m", "test-model", *provider, "-c", f'model_providers.stub.base_url="{base}/v1"']
        argv += [*attachment.args, "review this"]
        subprocess.run(
            argv, env=_env(STUB_KEY="stub-key"), capture_output=True, timeout=120, check=False, cwd=tmp_path
        )
    sent = b"".join(bodies).decode("utf-8", "replace")
    assert "- zq-reviewer: The zq-reviewer skill (file: " in sent
    assert "zq-researcher" not in sent and "zq-sheller" not in sent and "zq-editor" not in sent
