"""The repo-root project strategy, client side (import-light: `os` only).

ai-memory scopes lifecycle events by the *main* Git repository, not by the directory the agent
happened to start in: a subdirectory, a linked worktree and a WSL or Windows spelling of one checkout
all belong to one project. The hook runner finds the checkout's git common directory (what
`git rev-parse --git-common-dir` prints, without running git) and sends it with the event; the
server derives the project name from it (`ivoai.server.memory.hooks.project_from_git_common_dir`).

- a directory inside a checkout: walk up to the first `.git`;
- `.git` is a directory: that is the common dir (`<main>/.git`);
- `.git` is a file (`gitdir: …`, a linked worktree or a submodule): follow it, then its `commondir`
  file (`<main>/.git/worktrees/<name>/commondir` -> `<main>/.git`);
- WSL: a Windows spelling (`C:\\src\\shop`, `C:/src/shop`) is read as `/mnt/c/src/shop` when that
  mount exists, and `\\\\wsl$\\<distro>\\home\\…` / `\\\\wsl.localhost\\<distro>\\…` as `/home/…`.

Git's own hooks and programs are never run; only a few small files are read (bounded).
"""

from __future__ import annotations

import os

WALK_MAX_DEPTH = 64
GIT_FILE_MAX_BYTES = 4096


def native_path(path: str) -> str:
    """This machine's spelling of `path` (WSL/Windows spellings translated when they resolve here)."""
    if os.sep != "/" or not path:
        return path
    lowered = path[:16].lower()
    for prefix in ("\\\\wsl$\\", "\\\\wsl.localhost\\", "//wsl$/", "//wsl.localhost/"):
        if lowered.startswith(prefix):
            rest = path[len(prefix) :].replace("\\", "/")
            _distro, _, inner = rest.partition("/")
            return "/" + inner
    if len(path) >= 3 and path[1] == ":" and path[0].isalpha() and path[2] in "\\/":
        mount = "/mnt/" + path[0].lower()
        if os.path.isdir(mount):
            return mount + "/" + path[3:].replace("\\", "/").strip("/")
    return path


def _read_small(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, GIT_FILE_MAX_BYTES).decode("utf-8", "replace")
    finally:
        os.close(fd)


def discover(cwd: str) -> tuple[str | None, str | None]:
    """(git common dir, repository or worktree root) for `cwd`, or (None, None) outside a checkout."""
    try:
        current = os.path.abspath(native_path(cwd))
    except (OSError, ValueError):
        return None, None
    for _ in range(WALK_MAX_DEPTH):
        marker = os.path.join(current, ".git")
        try:
            if os.path.isdir(marker):
                return marker, current
            if os.path.isfile(marker):
                return _from_git_file(marker, current), current
        except (OSError, ValueError):
            return None, None
        parent = os.path.dirname(current)
        if parent == current:
            return None, None
        current = parent
    return None, None


def _from_git_file(marker: str, root: str) -> str | None:
    text = _read_small(marker).strip()
    if not text.startswith("gitdir:"):
        return None
    gitdir = text[len("gitdir:") :].strip()
    if not os.path.isabs(gitdir):
        gitdir = os.path.join(root, gitdir)
    gitdir = os.path.normpath(gitdir)
    commondir = os.path.join(gitdir, "commondir")
    if os.path.isfile(commondir):
        common = _read_small(commondir).strip()
        return os.path.normpath(common if os.path.isabs(common) else os.path.join(gitdir, common))
    return gitdir
