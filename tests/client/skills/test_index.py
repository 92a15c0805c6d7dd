"""The metadata-only index: discovery without following links, per-skill quarantine, set checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ivoai.client.skills.index import check_set, index_directory
from ivoai.client.skills.model import SkillError


def write_skill(root: Path, name: str, extra: str = "", *, directory: str | None = None) -> Path:
    path = root / (directory or name)
    path.mkdir(parents=True, exist_ok=True)
    (path / "SKILL.md").write_text(f"---\nname: {name}\ndescription: The {name} skill\n{extra}---\n# Body\n")
    return path


def test_a_directory_with_skill_md_is_one_skill_and_its_subdirectories_belong_to_it(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "alpha")
    write_skill(tmp_path / "skills" / "alpha" / "templates", "inner")
    write_skill(tmp_path / "skills" / "group", "beta")
    write_skill(tmp_path / ".hidden", "gamma")
    result = index_directory(tmp_path)
    assert [(e.rel, e.meta.name) for e in result.entries] == [
        ("skills/alpha", "alpha"),
        ("skills/group/beta", "beta"),
    ]
    assert result.quarantined == []


def test_the_root_itself_can_be_the_skill(tmp_path: Path) -> None:
    write_skill(tmp_path, "solo", directory=".")
    result = index_directory(tmp_path)
    assert [(e.rel, e.meta.name) for e in result.entries] == [("", "solo")]


def test_symlinks_are_quarantined_never_followed(tmp_path: Path) -> None:
    real = write_skill(tmp_path / "elsewhere", "real")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "linked").symlink_to(real)
    (tmp_path / "src" / "passwd").mkdir()
    (tmp_path / "src" / "passwd" / "SKILL.md").symlink_to("/etc/passwd")
    result = index_directory(tmp_path / "src")
    assert result.entries == []
    reasons = {q.rel: q.reason for q in result.quarantined}
    assert reasons["linked"] == "a symlink (never followed)"
    assert "symlink" in reasons["passwd"]


def test_a_symlinked_root_is_refused(tmp_path: Path) -> None:
    write_skill(tmp_path, "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(SkillError, match="symlink or not a directory"):
        index_directory(tmp_path / "link")


def test_malformed_skills_are_quarantined_with_their_reason_and_the_others_indexed(tmp_path: Path) -> None:
    write_skill(tmp_path, "good")
    write_skill(tmp_path, "bad", "risk: banana\n")
    write_skill(tmp_path, "other-name", directory="mismatch")
    result = index_directory(tmp_path)
    assert [e.meta.name for e in result.entries] == ["good"]
    assert {q.rel: q.reason for q in result.quarantined} == {
        "bad": "field `risk`: 'banana' is not one of low, moderate, high, critical",
        "mismatch": "name `other-name` does not match its directory `mismatch`",
    }


def test_hardlinked_skill_file_is_quarantined(tmp_path: Path) -> None:
    write_skill(tmp_path, "one")
    (tmp_path / "two").mkdir()
    os.link(tmp_path / "one" / "SKILL.md", tmp_path / "two" / "SKILL.md")
    result = index_directory(tmp_path)
    assert {q.rel for q in result.quarantined} == {"one", "two"}
    assert all("hard-linked" in q.reason for q in result.quarantined)


def test_the_number_of_skills_per_source_is_bounded(tmp_path: Path) -> None:
    for i in range(5):
        write_skill(tmp_path, f"s{i}")
    result = index_directory(tmp_path, max_skills=3)
    assert len(result.entries) == 3
    assert [q.reason for q in result.quarantined] == ["more than 3 skills in one source"] * 2


def test_set_checks_quarantine_duplicates_missing_dependencies_and_cycles(tmp_path: Path) -> None:
    write_skill(tmp_path / "a", "dup")
    write_skill(tmp_path / "b", "dup")
    write_skill(tmp_path, "needs-missing", "dependencies: [nowhere]\n")
    write_skill(tmp_path, "needs-dup", "dependencies: [dup]\n")
    write_skill(tmp_path, "ring-a", "dependencies: [ring-b]\n")
    write_skill(tmp_path, "ring-b", "dependencies: [ring-a]\n")
    write_skill(tmp_path, "uses-installed", "dependencies: [base]\n")
    write_skill(tmp_path, "fine")
    result = index_directory(tmp_path)
    base = index_directory(write_skill(tmp_path / "installed", "base")).entries[0].meta
    good, bad = check_set(result.entries, {"base": base})
    assert sorted(e.meta.name for e in good) == ["fine", "uses-installed"]
    assert {q.rel: q.reason for q in bad} == {
        "a/dup": "duplicate name `dup` (at a/dup, b/dup)",
        "b/dup": "duplicate name `dup` (at a/dup, b/dup)",
        "needs-missing": "requires `nowhere`, which is neither in this source nor installed",
        "needs-dup": "requires `dup`, which was quarantined",
        "ring-a": "dependency cycle ring-a -> ring-b -> ring-a",
        "ring-b": "dependency cycle ring-a -> ring-b -> ring-a",
    }
