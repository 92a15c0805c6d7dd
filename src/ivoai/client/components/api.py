"""The one entry point the CLI calls for setup, update, rollback and uninstall (no rendering here).

Each function imports its machinery when called: `ivoai setup` on an installed system (the repair
path) is mostly interpreter and CLI start-up, so it does not pay for the update, archive or
download code it does not use.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ivoai.client.components.installers import InstallContext
from ivoai.client.components.manifest import TEST_MANIFEST_ENV, Manifest, load_manifest
from ivoai.common.errors import UsageError
from ivoai.common.paths import XdgPaths, xdg_paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ivoai.client.components.setup import SetupReport
    from ivoai.client.components.uninstall import UninstallReport
    from ivoai.client.components.update import UpdateReport


def _context(
    progress: Callable[[str], None],
    *,
    offline: bool = False,
    npm_cache: Path | None = None,
    wheelhouse: Path | None = None,
    paths: XdgPaths | None = None,
) -> tuple[InstallContext, Manifest]:
    manifest = load_manifest()
    if manifest.test_override:
        progress(f"warning: {TEST_MANIFEST_ENV} replaces the shipped component manifest (test hook)")
    for flag, value in (("--npm-cache", npm_cache), ("--wheelhouse", wheelhouse)):
        if value is not None and not value.is_dir():
            raise UsageError(f"{flag} {value}: not a directory")
    ctx = InstallContext(
        paths or xdg_paths(),
        dict(os.environ),
        offline=offline,
        npm_cache=npm_cache.resolve() if npm_cache else None,
        wheelhouse=wheelhouse.resolve() if wheelhouse else None,
        progress=progress,
    )
    return ctx, manifest


def setup(
    components: list[str],
    progress: Callable[[str], None],
    *,
    offline: bool = False,
    npm_cache: Path | None = None,
    wheelhouse: Path | None = None,
    skip_existing: bool = False,
    paths: XdgPaths | None = None,
) -> SetupReport:
    """`ivoai setup` below `paths` (default: the XDG roots of the environment)."""
    from ivoai.client.components.setup import run_setup

    ctx, manifest = _context(
        progress, offline=offline, npm_cache=npm_cache, wheelhouse=wheelhouse, paths=paths
    )
    return run_setup(ctx, manifest, components or None, skip_existing=skip_existing)


def update(
    progress: Callable[[str], None],
    *,
    dry_run: bool = False,
    offline: bool = False,
    npm_cache: Path | None = None,
    wheelhouse: Path | None = None,
    paths: XdgPaths | None = None,
) -> UpdateReport:
    """`ivoai update [--dry-run]` below `paths` (default: the XDG roots of the environment)."""
    from ivoai.client.components.update import run_update

    ctx, manifest = _context(
        progress, offline=offline, npm_cache=npm_cache, wheelhouse=wheelhouse, paths=paths
    )
    return run_update(ctx, manifest, dry_run=dry_run)


def rollback(
    progress: Callable[[str], None], *, force: bool = False, paths: XdgPaths | None = None
) -> UpdateReport:
    """`ivoai update --rollback [--force]` below `paths` (default: the environment's XDG roots)."""
    from ivoai.client.components.update import run_rollback

    ctx, manifest = _context(progress, paths=paths)
    return run_rollback(ctx, manifest, force=force)


def uninstall(*, dry_run: bool, paths: XdgPaths | None = None) -> UninstallReport:
    """`ivoai uninstall [--dry-run]` below `paths` (default: the environment's XDG roots).

    Confirmation is the CLI's job.
    """
    from ivoai.client.components.uninstall import run_uninstall

    return run_uninstall(paths or xdg_paths(), dict(os.environ), dry_run=dry_run)
