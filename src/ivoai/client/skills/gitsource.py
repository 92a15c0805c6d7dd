"""Git sources: one pinned commit fetched into a private bare repository and read as blobs, never checked out.

The real `git` runs with nothing the repository could use to run a program: no system or global
config (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`), hooks pointed at /dev/null, fsmonitor
off, no credential helper or prompt, submodules never fetched, `transfer.fsckObjects` on (malformed
trees, `..` or `.git` paths are refused by git itself), and only the `file`, `https` and `ssh`
transports (`ext::` runs commands and is refused). Nothing is checked out, so no filter, attribute
or checkout hook applies: the tree is listed with `ls-tree` and each blob read with `cat-file
--batch`, through the same `TreeWriter` checks as every source (symlink, submodule and executable
entries refuse the commit). Every command has a timeout, its process group is killed on expiry,
output is bounded, and the fetch runs under RLIMIT_FSIZE so a huge pack cannot fill the disk.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import subprocess
import threading
from urllib.parse import urlsplit

from ivoai.client.skills.model import StagingRefused
from ivoai.client.skills.tree import TreeWriter, check_rel, decode_rel
from ivoai.common.limits import SKILL_GIT_OUTPUT_MAX_BYTES, SKILL_GIT_TIMEOUT_SECONDS, SKILL_TREE_MAX_BYTES

_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
FETCH_FILE_MAX_BYTES = 2 * SKILL_TREE_MAX_BYTES  # RLIMIT_FSIZE of the fetch: the pack of one pinned commit
_SAFE_CONFIG = (
    "core.hooksPath=/dev/null",  # no repository hook runs
    "core.fsmonitor=false",  # no fsmonitor program runs
    "credential.helper=",  # no helper is asked for credentials
    "core.askPass=",
    "protocol.version=2",  # v2 lets a fetch name any reachable commit
    "protocol.allow=never",
    "protocol.file.allow=always",
    "protocol.https.allow=always",
    "protocol.ssh.allow=always",
    "transfer.fsckObjects=true",  # git itself refuses malformed objects and `..`/`.git` paths
    "fetch.fsckObjects=true",
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "core.symlinks=false",
)


def check_commit(commit: str) -> str:
    """A full commit ID (40 or 64 lower-case hex digits): git sources are always pinned.

    Raises:
        StagingRefused: anything else (branch names and short IDs move or collide).
    """
    value = commit.strip().lower()
    if not _COMMIT.fullmatch(value):
        raise StagingRefused("--commit must be a full commit ID (40 hex digits): git sources are pinned")
    return value


def check_git_url(url: str) -> str:
    """An absolute local path, file://, https:// or ssh:// URL (or scp-like `host:path`), no credentials.

    Raises:
        StagingRefused: another transport, an option-looking value, or credentials in the URL.
    """
    if not url or url.startswith("-") or "\x00" in url or "\n" in url:
        raise StagingRefused("invalid git repository location")
    if "::" in url.split("/", 1)[0]:
        raise StagingRefused("git remote helpers (`transport::address`) are refused")
    if os.path.isabs(url):
        return url
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme not in ("file", "https", "ssh"):
            raise StagingRefused(f"git over {parts.scheme}:// is refused (file, https and ssh only)")
        if parts.password is not None or (parts.scheme == "https" and parts.username is not None):
            raise StagingRefused("credentials in a URL are refused (they would be stored and shown)")
        return url
    if re.fullmatch(r"[A-Za-z0-9_.-]+@[A-Za-z0-9.-]+:[^\s]+", url):
        return url  # scp-like ssh (git@host:org/repo.git)
    raise StagingRefused("a git source is an absolute path or a file://, https:// or ssh:// URL")


def _env(home: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": home,
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "SSH_ASKPASS": "/bin/false",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_ALLOW_PROTOCOL": "file:https:ssh",
        "GIT_PROTOCOL_FROM_USER": "0",
    }


def _limit_file_size() -> None:  # runs in the child between fork and exec
    resource.setrlimit(resource.RLIMIT_FSIZE, (FETCH_FILE_MAX_BYTES, FETCH_FILE_MAX_BYTES))


def _git(
    args: list[str], home: str, *, stdin: bytes | None = None, limit_size: bool = False, what: str = "git"
) -> bytes:
    """Run git with the safe config; bounded output and time; the process group is killed on expiry."""
    argv = ["git"]
    for item in _SAFE_CONFIG:
        argv += ["-c", item]
    try:
        proc = subprocess.Popen(
            [*argv, *args],
            env=_env(home),
            cwd=home,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            # RLIMIT_FSIZE must be set in the child before exec; staging runs in the CLI, before any thread.
            preexec_fn=_limit_file_size if limit_size else None,
        )
    except FileNotFoundError:
        raise StagingRefused("git is not installed (needed for git sources)") from None
    timer = threading.Timer(SKILL_GIT_TIMEOUT_SECONDS, _kill_group, (proc.pid,))
    timer.start()
    feeder: threading.Thread | None = None
    if stdin is not None:
        feeder = threading.Thread(target=_feed, args=(proc, stdin), daemon=True)
        feeder.start()
    errbuf = bytearray()
    errors = threading.Thread(target=_drain, args=(proc, errbuf), daemon=True)
    errors.start()
    try:
        assert proc.stdout is not None
        out = bytearray()
        while block := proc.stdout.read(1 << 16):
            out += block
            if len(out) > SKILL_GIT_OUTPUT_MAX_BYTES:
                _kill_group(proc.pid)
                raise StagingRefused(f"`git {what}` output exceeds {SKILL_GIT_OUTPUT_MAX_BYTES} bytes")
        rc = proc.wait()
        errors.join(timeout=5)
        err = bytes(errbuf)
    finally:
        timer.cancel()
        if proc.poll() is None:
            _kill_group(proc.pid)
            proc.wait()
        if feeder is not None:
            feeder.join(timeout=5)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    if rc != 0:
        if rc == -signal.SIGKILL:
            raise StagingRefused(f"`git {what}` took longer than {SKILL_GIT_TIMEOUT_SECONDS:g}s")
        if rc == -signal.SIGXFSZ:
            raise StagingRefused(f"`git {what}` wrote more than {FETCH_FILE_MAX_BYTES} bytes")
        line = next((ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()), "")
        raise StagingRefused(f"`git {what}` failed: {line[:200] or f'exit status {rc}'}")
    return bytes(out)


def _drain(proc: subprocess.Popen[bytes], out: bytearray) -> None:
    assert proc.stderr is not None
    while block := proc.stderr.read(4096):
        if len(out) < 8192:
            out += block


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def stage_git(url: str, commit: str, work: str, writer: TreeWriter, subdir: str | None = None) -> None:
    """Fetch `commit` from `url` into a bare repository under `work` and stage its files through `writer`.

    Raises:
        StagingRefused: git failed, the commit is missing, or an entry is not a plain file.
    """
    url = check_git_url(url)
    commit = check_commit(commit)
    prefix = "/".join(check_rel(subdir)) + "/" if subdir else None
    gitdir = os.path.join(work, "repo.git")
    _git(["init", "--bare", "--quiet", gitdir], work, what="init")
    base = ["--git-dir", gitdir]
    fetch = [*base, "fetch", "--quiet", "--depth=1", "--no-tags", "--no-recurse-submodules"]
    fetch += ["--no-write-fetch-head", "--", url, commit]
    _git(fetch, work, limit_size=True, what="fetch")
    kind = _git([*base, "cat-file", "-t", commit], work, what="cat-file").strip()
    if kind != b"commit":
        raise StagingRefused(f"{commit} is not a commit in {url}")
    listing = _git([*base, "ls-tree", "-r", "-z", "-l", "--full-tree", commit], work, what="ls-tree")
    wanted: list[tuple[str, bytes]] = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        fields = meta.split()
        if len(fields) != 4:
            raise StagingRefused("unexpected `git ls-tree` output")
        mode, otype, oid, size = fields
        path = decode_rel(raw_path)
        check_rel(path)
        if mode == b"120000":
            raise StagingRefused(f"{path} is a symlink in commit {commit[:12]}")
        if mode == b"160000" or otype == b"commit":
            raise StagingRefused(f"{path} is a submodule (submodules are never fetched)")
        if otype != b"blob" or mode not in (b"100644", b"100755"):
            raise StagingRefused(f"{path} has an unsupported mode {mode.decode('ascii', 'replace')}")
        if prefix is not None:
            if not path.startswith(prefix):
                continue
            path = path[len(prefix) :]
        writer.reserve(path, int(size), 0o755 if mode == b"100755" else 0o644)
        wanted.append((path, oid))
    if prefix is not None and not wanted:
        raise StagingRefused(f"{subdir} does not exist in commit {commit[:12]}")
    if not wanted:
        return
    stream = _git(
        [*base, "cat-file", "--batch"],
        work,
        stdin=b"".join(oid + b"\n" for _, oid in wanted),
        what="cat-file --batch",
    )
    pos = 0
    for path, oid in wanted:
        end = stream.index(b"\n", pos)
        header = stream[pos:end].split()
        if len(header) != 3 or header[0] != oid or header[1] != b"blob":
            raise StagingRefused(f"unexpected `git cat-file` answer for {path}")
        length = int(header[2])
        data = stream[end + 1 : end + 1 + length]
        pos = end + 1 + length + 1
        writer.add_file(path, data)
