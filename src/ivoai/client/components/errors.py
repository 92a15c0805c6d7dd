"""Errors of the components domain: each has a stable code and a one-line, secret-free message."""

from __future__ import annotations

from ivoai.common.errors import ConflictError, IvoaiError, UsageError, ValidationError


class ComponentError(IvoaiError):
    """A component could not be installed, verified, updated or removed."""

    code = "component_error"


class ManifestError(ValidationError):
    """The shipped manifest or one of its locks is malformed (a packaging defect, never user input)."""

    code = "manifest_invalid"


class UnknownComponentError(UsageError):
    """`--component` named a component the manifest does not know; the message lists the known ones."""

    code = "component_unknown"


class UnsupportedPlatformError(ComponentError):
    """The manifest pins no artifact for this OS, CPU or Python."""

    code = "platform_unsupported"


class IntegrityError(ComponentError):
    """A downloaded or installed artifact does not match its pinned digest; nothing was promoted."""

    code = "integrity_mismatch"


class DownloadError(ComponentError):
    """A download failed, stalled, timed out or exceeded its size limit."""

    code = "download_failed"


class ArchiveError(ComponentError):
    """An archive holds an unsafe or oversized member (traversal, link, device, bomb); nothing extracted."""

    code = "archive_unsafe"


class InstallerError(ComponentError):
    """`npm ci`, `pip install` or venv creation failed; the message carries the tail of its log."""

    code = "installer_failed"


class ProbeError(ComponentError):
    """The compatibility probe of a staged or installed component failed."""

    code = "probe_failed"


class UpdateError(ComponentError):
    """An update could not complete; it was rolled back (the message says so)."""

    code = "update_failed"


class MigrationError(ComponentError):
    """A schema migration could not be applied; the state it touched was restored byte for byte."""

    code = "migration_failed"


class RollbackConflictError(ConflictError):
    """Files changed after the last update; `ivoai update --rollback --force` overwrites them."""

    code = "rollback_conflict"


class NothingToRollBackError(ComponentError):
    """No committed update is recorded, so there is nothing to roll back."""

    code = "rollback_unavailable"
