"""Client identity: host by default, project only after an explicit `project init`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ivoai.client.identity import (
    MARKER_NAME,
    NotInGitRepoError,
    ProjectMarkerError,
    derive_project_id,
    find_git_root,
    host_identity,
    normalize_hostname,
    project_init,
    resolve_identity,
)
from ivoai.common.errors import UnsafePathError
from tests.conftest import CliRunner


def _git_init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True, timeout=30, capture_output=True)
    return path


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("MyBox.Example.COM.", "mybox.example.com"),
        ("  dev_box 01 ", "dev-box-01"),
        ("büro", "xn--bro-hoa"),
        ("--..--", "localhost"),
        ("", "localhost"),
        ("a" * 300, "a" * 253),
    ],
)
def test_hostnames_are_normalized(raw: str, expected: str) -> None:
    assert normalize_hostname(raw) == expected


def test_outside_a_project_identity_is_the_host_whatever_the_directory(tmp_path: Path) -> None:
    a = resolve_identity(tmp_path, hostname="Box")
    b = resolve_identity(Path("/"), hostname="Box")
    assert a.value == b.value == "host:box"
    assert a.kind == "host"


def test_entering_a_git_repository_without_the_marker_changes_nothing(tmp_path: Path) -> None:
    repo = _git_init(tmp_path / "repo")
    (repo / "sub").mkdir()
    ident = resolve_identity(repo / "sub", hostname="box")
    assert ident.value == "host:box"
    assert ident.git_root == str(repo)
    assert not (repo / MARKER_NAME).exists()


def test_project_init_writes_a_deterministic_marker_at_the_git_root(tmp_path: Path) -> None:
    repo = _git_init(tmp_path / "repo")
    (repo / "a" / "b").mkdir(parents=True)
    result = project_init(repo / "a" / "b")
    assert result.created is True
    marker = repo / MARKER_NAME
    assert marker.is_file()
    assert result.identity.value == f"project:{derive_project_id(repo)}"
    assert derive_project_id(repo) == derive_project_id(Path(str(repo) + "/"))
    assert resolve_identity(repo / "a").value == result.identity.value
    again = project_init(repo)
    assert again.created is False
    assert again.identity.value == result.identity.value


def test_different_roots_get_different_project_ids(tmp_path: Path) -> None:
    assert derive_project_id(tmp_path / "one") != derive_project_id(tmp_path / "two")


def test_project_init_outside_git_fails_with_a_clear_message(tmp_path: Path) -> None:
    with pytest.raises(NotInGitRepoError, match="not inside a git work tree"):
        project_init(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_worktree_style_git_file_marks_the_root(tmp_path: Path) -> None:
    (tmp_path / "wt").mkdir()
    (tmp_path / "wt" / ".git").write_text("gitdir: /elsewhere\n")
    assert find_git_root(tmp_path / "wt") == tmp_path / "wt"


def test_a_symlinked_marker_is_refused(tmp_path: Path) -> None:
    repo = _git_init(tmp_path / "repo")
    (tmp_path / "target.toml").write_text('schema = 1\n[project]\nid = "proj_' + "0" * 32 + '"\n')
    os.symlink(tmp_path / "target.toml", repo / MARKER_NAME)
    with pytest.raises(UnsafePathError, match="symlink"):
        resolve_identity(repo)
    with pytest.raises(UnsafePathError, match="symlink"):
        project_init(repo)


def test_a_malformed_marker_is_reported_with_its_path(tmp_path: Path) -> None:
    repo = _git_init(tmp_path / "repo")
    (repo / MARKER_NAME).write_text('schema = 1\n[project]\nid = "../../etc"\n')
    with pytest.raises(ProjectMarkerError) as info:
        resolve_identity(repo)
    assert str(repo / MARKER_NAME) in str(info.value)


def test_a_committed_marker_keeps_its_id_in_another_checkout(tmp_path: Path) -> None:
    first = _git_init(tmp_path / "first")
    project_init(first)
    second = _git_init(tmp_path / "second")
    (second / MARKER_NAME).write_bytes((first / MARKER_NAME).read_bytes())
    ident = resolve_identity(second)
    assert ident.project_id == derive_project_id(first)
    assert ident.as_dict()["marker_matches_root"] is False


def test_host_identity_uses_the_real_hostname() -> None:
    assert host_identity().startswith("host:")
    assert host_identity() == host_identity()


def test_project_cli_init_and_status_json(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _git_init(tmp_path / "repo")
    monkeypatch.chdir(repo)
    before = cli("project", "status", "--json")
    assert before.code == 0
    assert json.loads(before.out)["kind"] == "host"
    created = cli("project", "init", "--json")
    assert created.code == 0, created.err
    doc = json.loads(created.out)
    assert doc["created"] is True
    assert doc["identity"] == f"project:{derive_project_id(repo)}"
    after = json.loads(cli("project", "status", "--json").out)
    assert after["identity"] == doc["identity"]
    assert after["marker"] == str(repo / MARKER_NAME)


def test_project_cli_init_outside_git_exits_1_with_one_line(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("project", "init")
    assert result.code == 1
    assert result.err.startswith("ivoai: error: ")
    assert "not inside a git work tree" in result.err
    assert result.err.count("\n") == 1
