"""One-time enrollment codes and the client bearer credentials they are exchanged for.

State lives in `DATA/enrollment/state.json` (0600, 0700 directory). Only SHA-256 hashes of codes and
credentials are stored: both are 256-bit CSPRNG values, so a hash is not guessable offline. Every
mutation runs under an exclusive OS file lock and ends in an atomic replacement of the file, so the
CLI (`enrollment create|revoke`, `clients revoke`) and any number of gateway processes never lose or
double-apply a change. An exchange compares hashes in constant time and answers an invalid,
expired, consumed or revoked code with the same error.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, Field

from ivoai.common.errors import IvoaiError, NotFoundError, ValidationError
from ivoai.common.ids import constant_time_equal, random_id, random_token, sha256_hex
from ivoai.common.limits import (
    ENROLLMENT_CODE_BYTES,
    ENROLLMENT_MAX_CLIENTS,
    ENROLLMENT_MAX_OPEN_CODES,
    ENROLLMENT_TTL_MAX_SECONDS,
    ENROLLMENT_TTL_SECONDS,
)
from ivoai.common.protocol import DEFAULT_CLIENT_SCOPES, EnrollResponse
from ivoai.server.auth._state import StateFile
from ivoai.server.auth.scopes import parse_scopes

CREDENTIAL_PREFIX = "ivc_"  # native client credential; OAuth tokens never carry it
STATE_VERSION = 1
UNIFORM_REJECTION = "enrollment code is invalid, expired, already used or revoked"

Clock = Callable[[], float]


class EnrollmentRejected(IvoaiError):
    """The one uniform answer to an unusable enrollment code (state is not disclosed)."""

    code = "enrollment_rejected"
    http_status = 400


class CodeRecord(BaseModel):
    id: str
    code_sha256: str
    created_at: float
    expires_at: float
    scopes: list[str]
    consumed_at: float | None = None
    revoked_at: float | None = None
    client_id: str | None = None


class ClientRecord(BaseModel):
    client_id: str
    credential_sha256: str
    created_at: float
    scopes: list[str]
    enrollment_id: str
    revoked_at: float | None = None


class EnrollmentState(BaseModel):
    version: int = STATE_VERSION
    codes: list[CodeRecord] = Field(default_factory=list)
    clients: list[ClientRecord] = Field(default_factory=list)


_Revocable = TypeVar("_Revocable", CodeRecord, ClientRecord)


@dataclass(frozen=True)
class CreatedCode:
    """A freshly created code: the plaintext exists only here, to be shown once."""

    id: str
    code: str
    expires_at: float
    scopes: list[str]


@dataclass(frozen=True)
class NativePrincipal:
    """An authenticated native client."""

    client_id: str
    scopes: frozenset[str]


_DURATION = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_ttl(value: str | int | None, *, default: int, maximum: int, field: str = "--ttl") -> int:
    """`10m`, `90s`, `2h`, `1d` or plain seconds -> seconds, bounded to (0, maximum].

    Raises:
        ValidationError: malformed, zero, or above `maximum` (the message names both).
    """
    if value is None:
        return default
    if isinstance(value, int):
        seconds = value
    else:
        match = _DURATION.match(value)
        if match is None:
            raise ValidationError(f"{field}: expected a duration like 10m, 90s, 2h or 1d, got {value!r}")
        seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds <= 0 or seconds > maximum:
        raise ValidationError(f"{field}: must be between 1 second and {maximum} seconds, got {seconds}")
    return seconds


class EnrollmentStore:
    """Hashed enrollment codes and client credentials under `enrollment_dir` (see module doc)."""

    def __init__(self, data_root: Path, enrollment_dir: Path, *, clock: Clock = time.time) -> None:
        self._file: StateFile[EnrollmentState] = StateFile(
            data_root, enrollment_dir / "state.json", EnrollmentState
        )
        self._clock = clock
        self._index: tuple[EnrollmentState, dict[str, ClientRecord]] | None = None

    # -- codes ------------------------------------------------------------------------------------
    def create_code(
        self, *, ttl_seconds: int = ENROLLMENT_TTL_SECONDS, scopes: list[str] | None = None
    ) -> CreatedCode:
        """Create a one-time code (256 CSPRNG bits, base64url); return it once; store only its hash.

        Raises:
            ValidationError: bad TTL or scopes, or too many open codes.
        """
        ttl = parse_ttl(ttl_seconds, default=ENROLLMENT_TTL_SECONDS, maximum=ENROLLMENT_TTL_MAX_SECONDS)
        granted = parse_scopes(scopes, default=DEFAULT_CLIENT_SCOPES)
        code = random_token(ENROLLMENT_CODE_BYTES)
        now = self._clock()
        record = CodeRecord(
            id=random_id("enr", 8),
            code_sha256=sha256_hex(code),
            created_at=now,
            expires_at=now + ttl,
            scopes=granted,
        )

        def change(state: EnrollmentState) -> None:
            open_codes = [c for c in state.codes if self._is_open(c, now)]
            if len(open_codes) >= ENROLLMENT_MAX_OPEN_CODES:
                raise ValidationError(
                    f"too many open enrollment codes ({len(open_codes)}, limit {ENROLLMENT_MAX_OPEN_CODES}); "
                    "revoke some or let them expire"
                )
            state.codes.append(record)

        self._file.mutate(change)
        return CreatedCode(id=record.id, code=code, expires_at=record.expires_at, scopes=granted)

    @staticmethod
    def _is_open(record: CodeRecord, now: float) -> bool:
        return record.consumed_at is None and record.revoked_at is None and record.expires_at > now

    def list_codes(self) -> list[CodeRecord]:
        """Every code record (hashes included; callers render only metadata)."""
        return list(self._file.read().codes)

    def code_status(self, record: CodeRecord) -> str:
        """`open`, `consumed`, `revoked` or `expired`."""
        if record.revoked_at is not None:
            return "revoked"
        if record.consumed_at is not None:
            return "consumed"
        if record.expires_at <= self._clock():
            return "expired"
        return "open"

    def revoke_code(self, code_id: str) -> CodeRecord:
        """Revoke an unconsumed code by ID (idempotent for an already revoked one).

        Raises:
            NotFoundError: no code has this ID.
        """
        return self._revoke(
            lambda state: state.codes,
            lambda record: record.id == code_id,
            f"no enrollment code with ID {code_id!r} (see `ivoai server enrollment list`)",
        )

    def _revoke(
        self,
        records: Callable[[EnrollmentState], list[_Revocable]],
        matches: Callable[[_Revocable], bool],
        missing: str,
    ) -> _Revocable:
        """Mark the matching record revoked (the first revocation's time stays); return a copy of it."""

        def change(state: EnrollmentState) -> _Revocable:
            for record in records(state):
                if matches(record):
                    if record.revoked_at is None:
                        record.revoked_at = self._clock()
                    return record.model_copy()
            raise NotFoundError(missing)

        return self._file.mutate(change)

    def exchange(self, code: str) -> EnrollResponse:
        """Consume `code` and return a new client credential, once.

        Raises:
            EnrollmentRejected: the one error for every unusable code.
            ValidationError: the server already holds the maximum number of clients.
        """
        if not code or len(code) > 256:
            raise EnrollmentRejected(UNIFORM_REJECTION)
        digest = sha256_hex(code)
        credential = CREDENTIAL_PREFIX + random_token(ENROLLMENT_CODE_BYTES)

        def change(state: EnrollmentState) -> EnrollResponse:
            now = self._clock()
            match: CodeRecord | None = None
            for record in state.codes:
                # Compare against every record so timing does not reveal which one matched.
                if constant_time_equal(record.code_sha256, digest) and match is None:
                    match = record
            if match is None or not self._is_open(match, now):
                raise EnrollmentRejected(UNIFORM_REJECTION)
            active = sum(1 for c in state.clients if c.revoked_at is None)
            if active >= ENROLLMENT_MAX_CLIENTS:
                raise ValidationError(
                    f"this server already has {active} clients (limit {ENROLLMENT_MAX_CLIENTS})"
                )
            client = ClientRecord(
                client_id=random_id("cli", 8),
                credential_sha256=sha256_hex(credential),
                created_at=now,
                scopes=list(match.scopes),
                enrollment_id=match.id,
            )
            match.consumed_at = now
            match.client_id = client.client_id
            state.clients.append(client)
            self._prune(state, now)
            return EnrollResponse(
                credential=credential, client_id=client.client_id, scopes=list(client.scopes)
            )

        return self._file.mutate(change)

    @staticmethod
    def _prune(state: EnrollmentState, now: float) -> None:
        """Drop code records that can no longer matter (expired or used more than a day ago)."""
        horizon = now - 86400
        state.codes = [c for c in state.codes if (c.consumed_at or c.revoked_at or c.expires_at) > horizon]

    # -- clients ----------------------------------------------------------------------------------
    def list_clients(self) -> list[ClientRecord]:
        """Every enrolled client (revoked ones included, marked)."""
        return list(self._file.read().clients)

    def revoke_client(self, client_id: str) -> ClientRecord:
        """Revoke a client's credential; the next request with it is refused.

        Raises:
            NotFoundError: no client has this ID.
        """
        return self._revoke(
            lambda state: state.clients,
            lambda client: client.client_id == client_id,
            f"no client with ID {client_id!r} (see `ivoai server clients list`)",
        )

    def verify(self, credential: str) -> NativePrincipal | None:
        """The principal for a bearer credential, or None (unknown, revoked, or not a native credential).

        The lookup is by SHA-256 of a 256-bit secret (timing of a hash-table probe reveals nothing
        usable about the secret); the final comparison is constant-time all the same.
        """
        if not credential.startswith(CREDENTIAL_PREFIX) or len(credential) > 256:
            return None
        digest = sha256_hex(credential)
        state = self._file.read()
        index = self._index
        if index is None or index[0] is not state:
            index = (state, {c.credential_sha256: c for c in state.clients})
            self._index = index
        found = index[1].get(digest)
        if (
            found is None
            or found.revoked_at is not None
            or not constant_time_equal(found.credential_sha256, digest)
        ):
            return None
        return NativePrincipal(client_id=found.client_id, scopes=frozenset(found.scopes))
