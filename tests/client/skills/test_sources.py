"""Git sources (pinned commit, real git, nothing the repository controls runs) and archives (SHA-256)."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from ivoai.client.skills.archive import fetch_archive
from ivoai.client.skills.model import StagingRefused
from ivoai.client.skills.service import SkillService, make_source
from ivoai.common.errors import UsageError
from ivoai.common.paths import XdgPaths
from tests.client.skills.helpers import (
    commit_all,
    git,
    git_repo,
    serve,
    sha256,
    tar_bytes,
    write_skill,
    zip_bytes,
)

SKILL = b"---\nname: packed\ndescription: A packed skill\nversion: 3.1.0\n---\n# Body\n"


def _make_hostile(repo: Path, tmp_path: Path, marker: Path) -> None:
    """Config and hooks that write `marker` whenever git runs something the repository controls."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    script = f"#!/bin/sh\necho ran >> {marker}\n"
    for hook in ("post-checkout", "post-merge", "reference-transaction", "pre-push", "post-index-change"):
        (hooks / hook).write_text(script)
        os.chmod(hooks / hook, 0o755)
    (repo / ".git" / "hooks" / "post-checkout").write_text(script)
    os.chmod(repo / ".git" / "hooks" / "post-checkout", 0o755)
    git(repo, "config", "core.hooksPath", str(hooks))
    git(repo, "config", "core.fsmonitor", str(hooks / "post-checkout"))
    git(repo, "config", "uploadpack.packObjectsHook", str(hooks / "post-checkout"))
    git(repo, "config", "filter.evil.smudge", str(hooks / "post-checkout"))


def test_a_pinned_commit_is_staged_without_running_anything_the_repository_controls(
    xdg: XdgPaths, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    repo = git_repo(tmp_path / "repo")
    write_skill(repo / "skills", "first", "version: 1.0.0\n")
    (repo / ".gitattributes").write_text("* filter=evil\n")
    old = commit_all(repo, "v1")
    write_skill(repo / "skills", "first", "version: 2.0.0\n")
    commit_all(repo, "v2")
    _make_hostile(repo, tmp_path, marker)
    service = SkillService()
    report = service.add(make_source(str(repo), commit=old))
    assert [(a["name"], a["version"]) for a in report["added"]] == [
        ("first", "1.0.0")
    ]  # the pinned, older commit
    assert service.show("first")["source"]["commit"] == old
    assert not marker.exists()
    git(repo, "status")  # the trap is real: an ordinary git command in that repository springs it
    assert marker.exists()


def test_update_moves_a_git_skill_to_a_new_commit_and_requires_one(xdg: XdgPaths, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    write_skill(repo, "tracked", "version: 1.0.0\n")
    first = commit_all(repo)
    service = SkillService()
    service.add(make_source(str(repo), commit=first))
    with pytest.raises(UsageError, match="pass --commit"):
        service.update("tracked")
    write_skill(repo, "tracked", "version: 1.1.0\n")
    second = commit_all(repo)
    result = service.update("tracked", commit=second)
    assert result["changed"] and result["version"] == "1.1.0"
    assert service.show("tracked")["source"]["commit"] == second


@pytest.mark.parametrize(
    ("plant", "reason"),
    [
        (lambda r: (r / "s" / "link").symlink_to("/etc/passwd"), "s/link is a symlink in commit"),
        (
            lambda r: os.chmod(_write(r / "s" / "run.py", "print()"), 0o755),
            "s/run.py is executable (mode 0755)",
        ),
        (
            lambda r: commit_all(git_repo(r / "s" / "sub")),  # an embedded repository: a gitlink
            "s/sub is a submodule (submodules are never fetched)",
        ),
    ],
    ids=["symlink", "executable", "submodule"],
)
def test_hostile_commits_are_refused_whole(xdg: XdgPaths, tmp_path: Path, plant: object, reason: str) -> None:
    repo = git_repo(tmp_path / "repo")
    write_skill(repo, "s")
    plant(repo)  # type: ignore[operator]
    commit = commit_all(repo)
    service = SkillService()
    with pytest.raises(StagingRefused) as info:
        service.add(make_source(str(repo), commit=commit))
    assert reason in info.value.message
    assert service.candidates()[-1].name == "ivoai-memory-context"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("location", "commit", "message"),
    [
        ("ext::sh -c touch% /tmp/pwned", "a" * 40, "remote helpers"),
        ("--upload-pack=touch /tmp/pwned", "a" * 40, "invalid git repository location"),
        ("git://example.invalid/repo", "a" * 40, "git over git:// is refused"),
        ("https://user:secret@example.invalid/r.git", "a" * 40, "credentials in a URL are refused"),
        ("/tmp/repo", "main", "--commit must be a full commit ID"),
    ],
)
def test_unsafe_git_locations_and_unpinned_refs_are_refused(location: str, commit: str, message: str) -> None:
    with pytest.raises(StagingRefused, match=message):
        make_source(location, commit=commit)


def test_a_missing_commit_is_reported_from_git(xdg: XdgPaths, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    write_skill(repo, "s")
    commit_all(repo)
    with pytest.raises(StagingRefused, match="`git fetch` failed"):
        SkillService().add(make_source(str(repo), commit="b" * 40))


def test_an_archive_from_a_loopback_server_is_staged_after_its_sha256_matches(xdg: XdgPaths) -> None:
    data = tar_bytes(
        [("pkg", None, 0o755, tarfile.DIRTYPE), ("pkg/packed/SKILL.md", SKILL, 0o644, tarfile.REGTYPE),
         ("pkg/README.md", b"not a skill", 0o644, tarfile.REGTYPE)]
    )  # fmt: skip
    with serve({"/old.tgz": (302, {"Location": "/skills.tgz"}, b""), "/skills.tgz": (200, {}, data)}) as base:
        service = SkillService()
        with pytest.raises(StagingRefused, match="SHA-256 mismatch"):
            service.add(make_source(f"{base}/skills.tgz", sha256="0" * 64))
        assert [c.name for c in service.candidates()] == ["ivoai-memory-context"]
        report = service.add(make_source(f"{base}/old.tgz", sha256=sha256(data)))
    assert [(a["name"], a["version"], a["path"]) for a in report["added"]] == [
        ("packed", "3.1.0", "pkg/packed")
    ]


_TAR_SKILL = ("x/SKILL.md", SKILL, 0o644, tarfile.REGTYPE)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (tar_bytes([_TAR_SKILL, ("x/pw", None, 0o644, tarfile.SYMTYPE)]), "x/pw is a symlink"),
        (tar_bytes([_TAR_SKILL, ("x/hl", None, 0o644, tarfile.LNKTYPE)]), "x/hl is a hard link"),
        (tar_bytes([_TAR_SKILL, ("x/p", None, 0o644, tarfile.FIFOTYPE)]), "x/p is not a regular file"),
        (tar_bytes([("../../escape/SKILL.md", SKILL, 0o644, tarfile.REGTYPE)]), "(traversal)"),
        (tar_bytes([("/abs/SKILL.md", SKILL, 0o644, tarfile.REGTYPE)]), "absolute"),
        (tar_bytes([("x/SKILL.md", SKILL, 0o755, tarfile.REGTYPE)]), "x/SKILL.md is executable (mode 0755)"),
        (zip_bytes([("x/SKILL.md", SKILL, 0o100644), ("x/l", b"/etc/passwd", 0o120777)]), "x/l is a symlink"),
        (zip_bytes([("x/SKILL.md", SKILL, 0o100755)]), "x/SKILL.md is executable"),
        (zip_bytes([("x/../../SKILL.md", SKILL, 0o100644)]), "(traversal)"),
        (b"not an archive at all", "not a tar or zip archive"),
    ],
    ids=[
        "tar-symlink", "tar-hardlink", "tar-fifo", "tar-dotdot", "tar-absolute", "tar-exec",
        "zip-symlink", "zip-exec", "zip-dotdot", "garbage",
    ],
)  # fmt: skip
def test_hostile_archives_are_refused_whole(xdg: XdgPaths, tmp_path: Path, data: bytes, reason: str) -> None:
    archive = tmp_path / "skills.archive"
    archive.write_bytes(data)
    service = SkillService()
    with pytest.raises(StagingRefused) as info:
        service.add(make_source(str(archive), sha256=sha256(data)))
    assert reason in info.value.message
    assert not (xdg.state / "skills" / "objects").exists() or not os.listdir(xdg.state / "skills" / "objects")


def test_downloads_are_bounded_by_declared_and_streamed_size(tmp_path: Path) -> None:
    big = b"x" * 5000
    routes = {
        "/declared": (200, {"Content-Length": str(10**12)}, b""),
        "/streamed": (200, {"Content-Length": "omit"}, big),
        "/far": (302, {"Location": "http://example.invalid/x.tgz"}, b""),
    }
    with serve(routes) as base:
        with pytest.raises(StagingRefused, match="is 1000000000000 bytes; the limit is 4096"):
            fetch_archive(f"{base}/declared", "0" * 64, str(tmp_path / "a"), max_bytes=4096)
        with pytest.raises(StagingRefused, match="larger than 4096 bytes"):
            fetch_archive(f"{base}/streamed", sha256(big), str(tmp_path / "b"), max_bytes=4096)
        with pytest.raises(StagingRefused, match="https only"):
            fetch_archive(f"{base}/far", "0" * 64, str(tmp_path / "c"))
    assert not any(tmp_path.iterdir())  # nothing partial left behind


def test_plain_http_is_refused_except_on_loopback() -> None:
    with pytest.raises(StagingRefused, match="https only"):
        make_source("http://example.invalid/skills.tgz", sha256="0" * 64)


def test_an_archive_skill_updates_to_a_new_pinned_archive_and_rolls_back(xdg: XdgPaths) -> None:
    v1 = tar_bytes([("packed/SKILL.md", SKILL, 0o644, tarfile.REGTYPE)])
    v2 = zip_bytes([("packed/SKILL.md", SKILL.replace(b"3.1.0", b"3.2.0"), 0o100644)])
    with serve({"/v1.tgz": (200, {}, v1), "/v2.zip": (200, {}, v2)}) as base:
        service = SkillService()
        first = service.add(make_source(f"{base}/v1.tgz", sha256=sha256(v1)))["added"][0]["digest"]
        with pytest.raises(UsageError, match="pass --sha256"):
            service.update("packed")
        updated = service.update("packed", sha256=sha256(v2), location=f"{base}/v2.zip")
    assert updated["changed"] and updated["version"] == "3.2.0" and updated["previous"] == first
    assert service.show("packed")["source"]["sha256"] == sha256(v2)
    assert service.rollback("packed")["digest"] == first
