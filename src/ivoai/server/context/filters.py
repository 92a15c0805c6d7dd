"""The document rules every connector applies: which paths are skipped and which contents are refused.

A file is skipped (with a reason, never an error) when its path is a VCS internal or a known
dependency/cache directory, when its name marks a secret, credential, key or cloud-state file, when
it is larger than DOCUMENT_MAX_BYTES, when it is binary or not UTF-8, or when its text contains a
private key or a recognisable credential. Skipping a file is always safer than indexing a secret.

`lexical_only_reason` names files that are indexed but not embedded by default: lockfiles, minified
bundles, generated and vendored code, and texts whose shape (very long lines, almost no whitespace)
shows they were not written by hand.
"""

from __future__ import annotations

import fnmatch
import re
import unicodedata

from ivoai.common.limits import (
    CONTEXT_BINARY_SNIFF_BYTES,
    CONTEXT_LONG_LINE_CHARS,
    CONTEXT_LONG_LINE_SHARE,
    CONTEXT_LONG_LINE_SPACE_SHARE,
    CONTEXT_MIN_WHITESPACE_SHARE,
    CONTEXT_SHAPE_CHECK_MIN_CHARS,
)
from ivoai.common.redact import find_secrets

# Directories never descended into: VCS internals, then dependency and tool caches.
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", ".bzr", "_darcs", "CVS", ".jj", ".pijul", ".fossil-settings"}
    | {
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".terraform",
        ".gradle",
        ".idea",
    }
)
# VCS metadata files that are not directories (a git worktree's `.git` is a file).
SKIP_FILES = frozenset({".git"})

# Names (lower-cased basename globs) of secret, credential, key and cloud-state files.
SECRET_NAME_GLOBS = (
    ".env",
    ".env.*",
    "*.env",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "*.ppk",
    "*.gpg",
    "credentials*.json",
    "credentials",
    "*.tfstate",
    "*.tfstate.*",
    "*.tfvars",
    "kubeconfig",
    "kubeconfig.*",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".htpasswd",
    ".pgpass",
    "secrets.json",
    "secrets.yaml",
    "secrets.yml",
    "service-account*.json",
    "*-sa.json",
    "terraform.rc",
    ".terraformrc",
    ".dockercfg",
    "known_hosts",
    "authorized_keys",
)
# Template files that name secrets without holding them.
SECRET_NAME_ALLOW = (".env.example", ".env.sample", ".env.template", ".env.dist")
# Paths (lower-cased, relative) that are credentials wherever they sit in the tree.
SECRET_PATH_SUFFIXES = (
    ".aws/credentials",
    ".aws/config",
    ".kube/config",
    ".docker/config.json",
    ".ssh/config",
    ".config/gcloud/credentials.db",
)
# Package-manager configs that are secret only when they carry a token or password.
TOKEN_CONFIG_NAMES = frozenset({".npmrc", ".pypirc", ".yarnrc", ".yarnrc.yml", "pip.conf", ".condarc"})
_TOKEN_LINE = re.compile(r"(?im)^\s*[^#;\s].*(_authtoken|_auth\b|password|token|npmauthtoken)\s*[:=]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def path_skip_reason(rel_path: str) -> str | None:
    """Why a relative path (already valid UTF-8) must not be read, or None."""
    parts = rel_path.split("/")
    for part in parts[:-1]:
        if part in SKIP_DIRS:
            return f"inside skipped directory {part}"
    name = parts[-1]
    lower = name.lower()
    if name in SKIP_FILES:
        return "VCS metadata"
    low_path = rel_path.lower()
    if any(low_path == s or low_path.endswith("/" + s) for s in SECRET_PATH_SUFFIXES):
        return "credential file (by path)"
    if lower not in SECRET_NAME_ALLOW and any(fnmatch.fnmatchcase(lower, g) for g in SECRET_NAME_GLOBS):
        return "secret, key or credential file (by name)"
    return None


def name_skip_reason(raw_name: str) -> str | None:
    """Why an entry's name is refused: not UTF-8 (surrogate-escaped) or holding control characters."""
    try:
        raw_name.encode("utf-8")
    except UnicodeEncodeError:
        return "file name is not valid UTF-8"
    if _CONTROL.search(raw_name):
        return "file name contains a control character (newline, tab, ...)"
    return None


def decode_text(data: bytes) -> str | None:
    """The normalized text of `data` (UTF-8, BOM dropped, LF newlines, NFC), or None when binary."""
    if b"\x00" in data[:CONTEXT_BINARY_SNIFF_BYTES]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in text:
        return None
    return unicodedata.normalize("NFC", text)


def content_skip_reason(rel_path: str, text: str) -> str | None:
    """Why a decoded document must not be indexed (a key, a credential or a tokened config), or None."""
    name = rel_path.rsplit("/", 1)[-1].lower()
    if name in TOKEN_CONFIG_NAMES and _TOKEN_LINE.search(text):
        return "package-manager config holding a token or password"
    found = find_secrets(text)
    if "pem_private_key" in found:
        return "contains a private key"
    if found:
        return "contains a credential (" + ", ".join(sorted(set(found))) + ")"
    return None


# ------------------------------------------------------------------------- lexical-only (not embedded)
# Files people do not write by hand: indexed with BM25 (their words stay findable) but not embedded
# by default, and ranked below hand-written text. A connector created with `--embed-generated`
# embeds them too.
LOCKFILE_NAMES = frozenset(
    {
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lock",
        "deno.lock",
        "cargo.lock",
        "poetry.lock",
        "pipfile.lock",
        "pdm.lock",
        "uv.lock",
        "composer.lock",
        "gemfile.lock",
        "go.sum",
        "flake.lock",
        "mix.lock",
        "pubspec.lock",
        "podfile.lock",
        "packages.lock.json",
        "gradle.lockfile",
        "paket.lock",
        "shard.lock",
        "conan.lock",
    }
)
MINIFIED_GLOBS = ("*.min.js", "*.min.mjs", "*.min.cjs", "*.min.css", "*.bundle.js", "*.js.map", "*.css.map")
GENERATED_GLOBS = (
    "*_pb2.py",
    "*_pb2_grpc.py",
    "*.pb.go",
    "*.pb.cc",
    "*.pb.h",
    "*.g.dart",
    "*.freezed.dart",
    "*.designer.cs",
    "*.generated.*",
)
VENDORED_DIRS = frozenset(
    {"vendor", "vendored", "_vendor", "third_party", "third-party", "thirdparty", "dist", "bower_components"}
)
# Conventional "this file is generated" markers, looked for in a file's first lines only.
_GENERATED_MARK = re.compile(
    r"@generated|do not edit|auto-generated|autogenerated|automatically generated", re.IGNORECASE
)
_HEADER_LINES = 5
_HEADER_CHARS = 1024


def lexical_only_reason(rel_path: str, text: str) -> str | None:
    """Why a document is indexed lexically only by default (lockfile, minified, generated, vendored,
    machine-made by shape), or None for hand-written text."""
    parts = rel_path.split("/")
    name = parts[-1].lower()
    if name in LOCKFILE_NAMES or (name.endswith(".lock") and len(name) > 5):
        return "lockfile"
    if any(fnmatch.fnmatchcase(name, g) for g in MINIFIED_GLOBS):
        return "minified or source map"
    if any(fnmatch.fnmatchcase(name, g) for g in GENERATED_GLOBS):
        return "generated (by name)"
    vendored = next((p for p in parts[:-1] if p.lower() in VENDORED_DIRS), None)
    if vendored is not None:
        return f"vendored or build output ({vendored}/)"
    header = "\n".join(text[:_HEADER_CHARS].split("\n")[:_HEADER_LINES])
    if _GENERATED_MARK.search(header):
        return "generated (marked in its header)"
    if len(text) < CONTEXT_SHAPE_CHECK_MIN_CHARS:
        return None
    long_lines = [line for line in text.split("\n") if len(line) >= CONTEXT_LONG_LINE_CHARS]
    long_chars = sum(len(line) for line in long_lines)
    # prose written one paragraph per line has long lines too, but ~15% of it is spaces
    if (
        long_chars > CONTEXT_LONG_LINE_SHARE * len(text)
        and _space_share(long_lines) < CONTEXT_LONG_LINE_SPACE_SHARE
    ):
        return "very long lines (minified or data)"
    if _space_share([text]) < CONTEXT_MIN_WHITESPACE_SHARE:
        return "almost no whitespace (minified, encoded or data)"
    return None


def _space_share(parts: list[str]) -> float:
    total = sum(len(p) for p in parts)
    if not total:
        return 1.0
    letters = sum(len(word) for p in parts for word in p.split())  # str.split runs in C
    return (total - letters) / total
