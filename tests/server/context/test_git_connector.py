"""The git connector: tracked files only, repository hooks and fsmonitor never run, links never followed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ivoai.server.context.errors import InvalidConnectorError
from ivoai.server.context.service import ContextService
from ivoai.server.context.sources import git_env, git_ls_files

from .conftest import write_tree


def _git(repo: Path, *args: str) -> None:
    env = {
        **git_env(),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", *args],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )


def _hostile_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A checkout whose fsmonitor program and every hook would create `marker` if git ran them."""
    repo = write_tree(
        tmp_path / "repo",
        {"src/app.py": "def handler(event):\n    return event\n", "README.md": "Payment service runbook.\n"},
    )
    marker = tmp_path / "marker"
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "init")
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\necho 0\n")
    script.chmod(0o755)
    hooks = repo / ".git" / "hooks"
    for hook in (
        "post-checkout",
        "post-index-change",
        "pre-commit",
        "reference-transaction",
        "fsmonitor-watchman",
    ):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / hook).chmod(0o755)
    _git(repo, "config", "core.fsmonitor", str(script))
    os.symlink("/etc/hostname", repo / "link")
    _git(repo, "add", "link")
    _git(repo, "commit", "-q", "-m", "link")
    (repo / "untracked.txt").write_text("not tracked")
    return repo, marker


def test_plain_git_would_run_the_repository_fsmonitor_program(tmp_path: Path) -> None:
    """Control for the test below: the planted program is real and git runs it when not told otherwise."""
    repo, marker = _hostile_repo(tmp_path)
    assert not marker.exists()
    subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True, timeout=60)
    assert marker.exists()


def test_git_enumeration_runs_no_hook_and_no_fsmonitor(tmp_path: Path) -> None:
    repo, marker = _hostile_repo(tmp_path)
    paths = git_ls_files(str(repo))
    assert sorted(paths) == [b"README.md", b"link", b"src/app.py"]
    assert not marker.exists()


def test_git_connector_ingests_tracked_files_only_and_refuses_tracked_symlinks(
    tmp_path: Path, svc: ContextService
) -> None:
    repo, marker = _hostile_repo(tmp_path)
    svc.add_connector("repo", "git", str(repo))
    report = svc.ingest("repo")
    assert not marker.exists()
    c = report.connectors[0]
    assert (c.status, c.added) == ("ok", 2)
    assert ("repo", "link", "symlink (never followed)") in svc.skipped("repo")
    paths = {d.path for d in svc.context_recent(10).documents}
    assert paths == {"README.md", "src/app.py"}
    assert not marker.exists()


def test_a_directory_that_is_not_a_checkout_is_refused_as_git_connector(
    tmp_path: Path, svc: ContextService
) -> None:
    plain = write_tree(tmp_path / "plain", {"a.md": "x"})
    with pytest.raises(InvalidConnectorError, match="not a usable git checkout"):
        svc.add_connector("plain", "git", str(plain))
    assert svc.list_connectors() == []
