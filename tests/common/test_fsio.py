"""Safe local I/O: private modes, no-follow walks, containment, atomic writes, locks, bounded reads."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ivoai.common.errors import LockTimeoutError, TooLargeError, UnsafePathError
from ivoai.common.fsio import (
    atomic_write,
    atomic_write_in_dir,
    check_stat,
    ensure_private_dir,
    file_lock,
    is_within,
    open_beneath,
    open_private_dir,
    private_umask,
    read_fd_bounded,
    read_private_file,
    read_private_file_or_none,
    remove_stale_staging,
    validate_relative,
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "ivoai"


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_private_dirs_are_created_0700_at_every_level(root: Path) -> None:
    os.umask(0o022)
    ensure_private_dir(root, root / "a" / "b")
    assert _mode(root) == _mode(root / "a") == _mode(root / "a" / "b") == 0o700


def test_missing_ancestors_of_a_root_are_created_0700_and_existing_ones_kept(tmp_path: Path) -> None:
    os.umask(0o022)
    (tmp_path / "home").mkdir(mode=0o755)
    os.chmod(tmp_path / "home", 0o755)
    server = tmp_path / "home" / ".local" / "share" / "ivoai" / "server"  # the server data dir's case
    ensure_private_dir(server)
    for path in (server, server.parent, server.parent.parent, server.parent.parent.parent):
        assert _mode(path) == 0o700, path
    assert _mode(tmp_path / "home") == 0o755  # a directory ivoai did not create keeps its mode


def test_private_umask_adds_077_and_returns_the_previous_value(tmp_path: Path) -> None:
    previous = os.umask(0o002)
    try:
        assert private_umask() == 0o002
        (tmp_path / "lib-made").mkdir()  # as a library would, with the default 0777 request
        assert _mode(tmp_path / "lib-made") == 0o700
    finally:
        os.umask(previous)


def test_atomic_write_creates_a_0600_file_and_replaces_it_whole(root: Path) -> None:
    target = root / "sub" / "f.json"
    atomic_write(root, target, b"one")
    assert target.read_bytes() == b"one"
    assert _mode(target) == 0o600
    atomic_write(root, target, b"two" * 1000)
    assert target.read_bytes() == b"two" * 1000
    assert sorted(os.listdir(target.parent)) == ["f.json"]


@pytest.mark.parametrize("component", ["root", "middle", "leaf_dir"])
def test_a_symlink_at_any_component_is_refused_naming_it(root: Path, tmp_path: Path, component: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (elsewhere / "b").mkdir(mode=0o700)
    if component == "root":
        os.symlink(elsewhere, root)
        bad = root
    else:
        ensure_private_dir(root)
        if component == "middle":
            os.symlink(elsewhere, root / "a")
            bad = root / "a"
        else:
            ensure_private_dir(root, root / "a")
            os.symlink(elsewhere / "b", root / "a" / "b")
            bad = root / "a" / "b"
    with pytest.raises(UnsafePathError) as info:
        atomic_write(root, root / "a" / "b" / "f", b"x")
    assert str(bad) in str(info.value)
    assert "symlink" in str(info.value)
    assert os.listdir(elsewhere / "b") == []


def test_a_symlinked_file_is_refused_on_read(root: Path, tmp_path: Path) -> None:
    ensure_private_dir(root)
    secret = tmp_path / "outside"
    secret.write_text("outside")
    os.chmod(secret, 0o600)
    os.symlink(secret, root / "f")
    with pytest.raises(UnsafePathError, match="symlink"):
        read_private_file(root, root / "f", 100)


def test_a_symlink_at_the_target_is_replaced_not_followed(root: Path, tmp_path: Path) -> None:
    ensure_private_dir(root)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, root / "f")
    atomic_write(root, root / "f", b"new")
    assert victim.read_text() == "keep"
    assert not os.path.islink(root / "f")
    assert (root / "f").read_bytes() == b"new"


def test_a_symlinked_home_above_the_root_is_fine(tmp_path: Path) -> None:
    real_home = tmp_path / "real-home"
    real_home.mkdir()
    os.symlink(real_home, tmp_path / "home")
    root = tmp_path / "home" / ".config" / "ivoai"
    atomic_write(root, root / "config.toml", b"schema = 1\n")
    assert read_private_file(root, root / "config.toml", 100) == b"schema = 1\n"


@pytest.mark.parametrize(("mode", "fragment"), [(0o755, "expected 0700"), (0o770, "group/world-writable")])
def test_loose_directory_modes_are_refused_with_the_fix(root: Path, mode: int, fragment: str) -> None:
    ensure_private_dir(root)
    os.chmod(root, mode)
    with pytest.raises(UnsafePathError) as info:
        open_private_dir(root)
    assert fragment in str(info.value)
    assert str(root) in str(info.value)
    assert "chmod" in str(info.value)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_loose_file_modes_are_refused(root: Path, mode: int) -> None:
    atomic_write(root, root / "f", b"x")
    os.chmod(root / "f", mode)
    with pytest.raises(UnsafePathError, match=f"{mode:04o}"):
        read_private_file(root, root / "f", 10)


def test_a_foreign_owner_is_refused() -> None:
    fake = os.stat_result((stat.S_IFREG | 0o600, 1, 1, 1, os.geteuid() + 1, 0, 0, 0, 0, 0))
    with pytest.raises(UnsafePathError, match="not by you"):
        check_stat(fake, "/x", private=True, expect_dir=False)


def test_a_file_where_a_directory_is_expected_is_refused(root: Path) -> None:
    atomic_write(root, root / "f", b"x")
    with pytest.raises(UnsafePathError, match="not a directory"):
        open_private_dir(root, root / "f")


def test_paths_outside_the_root_are_refused(root: Path, tmp_path: Path) -> None:
    ensure_private_dir(root)
    with pytest.raises(UnsafePathError, match="outside"):
        atomic_write(root, tmp_path / "other" / "f", b"x")
    with pytest.raises(UnsafePathError, match="outside"):
        atomic_write(root, root / ".." / "escape", b"x")
    assert not (tmp_path / "escape").exists()


@pytest.mark.parametrize("rel", ["", "/etc/passwd", "a/../b", "..", "a//b", "./a", "a/\x00"])
def test_invalid_relative_paths_are_refused(rel: str) -> None:
    with pytest.raises(UnsafePathError):
        validate_relative(rel)


def test_open_beneath_walks_without_following_links(root: Path, tmp_path: Path) -> None:
    atomic_write(root, root / "a" / "f", b"inside")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "f").write_text("outside")
    os.symlink(tmp_path / "out", root / "link")
    rfd = open_private_dir(root)
    try:
        fd = open_beneath(rfd, "a/f")
        try:
            assert read_fd_bounded(fd, 100) == b"inside"
        finally:
            os.close(fd)
        with pytest.raises(UnsafePathError, match="'link'"):
            open_beneath(rfd, "link/f")
        with pytest.raises(UnsafePathError):
            open_beneath(rfd, "../out/f")
    finally:
        os.close(rfd)


def test_is_within_resolves_links(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    os.symlink(tmp_path, tmp_path / "r" / "up")
    assert is_within(tmp_path / "r", tmp_path / "r" / "x")
    assert not is_within(tmp_path / "r", tmp_path / "r" / "up" / "x")


def test_bounded_reads_refuse_more_than_the_limit_naming_it(root: Path) -> None:
    atomic_write(root, root / "f", b"x" * 11)
    with pytest.raises(TooLargeError, match="limit of 10 bytes"):
        read_private_file(root, root / "f", 10)
    assert read_private_file(root, root / "f", 11) == b"x" * 11


def test_read_or_none_returns_none_for_a_missing_file_or_root(root: Path) -> None:
    assert read_private_file_or_none(root, root / "f", 10) is None
    ensure_private_dir(root)
    assert read_private_file_or_none(root, root / "f", 10) is None


def test_a_held_lock_times_out_naming_the_lock(root: Path) -> None:
    lock = root / "run" / "x.lock"
    with file_lock(root, lock), pytest.raises(LockTimeoutError) as info, file_lock(root, lock, timeout=0.05):
        pass
    assert str(lock) in str(info.value)
    assert "0.05s" in str(info.value)
    assert _mode(lock) == 0o600
    with file_lock(root, lock, timeout=0.05):
        pass


def test_shared_locks_coexist_and_exclude_writers(root: Path) -> None:
    lock = root / "x.lock"
    with (
        file_lock(root, lock, shared=True),
        file_lock(root, lock, shared=True, timeout=0.05),
        pytest.raises(LockTimeoutError),
        file_lock(root, lock, timeout=0.05),
    ):
        pass


def test_atomic_write_refuses_to_replace_a_directory(root: Path) -> None:
    ensure_private_dir(root, root / "d")
    with pytest.raises(UnsafePathError, match="is a directory"):
        atomic_write(root, root / "d", b"x")
    assert [n for n in os.listdir(root) if n.startswith(".d.tmp-")] == []


def test_atomic_write_in_a_user_directory_refuses_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "target").write_text("keep")
    os.symlink(tmp_path / "target", tmp_path / ".ivoai.toml")
    with pytest.raises(UnsafePathError, match="symlink"):
        atomic_write_in_dir(tmp_path / ".ivoai.toml", b"x")
    assert (tmp_path / "target").read_text() == "keep"
    atomic_write_in_dir(tmp_path / "plain.toml", b"y")
    assert _mode(tmp_path / "plain.toml") == 0o644


def test_stale_staging_files_are_removed(root: Path) -> None:
    atomic_write(root, root / "f", b"x")
    (root / ".f.tmp-deadbeef").write_bytes(b"partial")
    (root / ".g.tmp-deadbeef").write_bytes(b"other file's staging")
    assert remove_stale_staging(root, root / "f") == 1
    assert sorted(os.listdir(root)) == [".g.tmp-deadbeef", "f"]
