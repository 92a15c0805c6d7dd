"""Dynamic client registration (RFC 7591) policy: every member bounded, only what the server honours.

`validate_registration` turns a raw `POST /register` body into the client metadata to store, or
raises `RegistrationRefused` with an RFC 7591 §3.2.2 error (`invalid_client_metadata` or
`invalid_redirect_uri`) whose description names the member and the limit. Checked, in order:

- the body is at most `OAUTH_REGISTRATION_MAX_BYTES` and a JSON object (nesting beyond the parser's
  recursion limit is "not JSON", not a server error); no string member holds a control character
  or a lone surrogate (they would reach the consent page, or fail to encode in the answer);
- `redirect_uris`: 1 to `OAUTH_MAX_REDIRECT_URIS`, each at most `OAUTH_REDIRECT_URI_MAX_CHARS`,
  and each allowed by `redirects.redirect_problem` (HTTPS or loopback, a real host name);
- `grant_types` within `authorization_code` and `refresh_token` (and including the first);
  `response_types` only `code`; `token_endpoint_auth_method` one of `none`, `client_secret_post`,
  `client_secret_basic`: nothing is registered that the server would never honour;
- `scope` within the advertised Web scopes; a registration without `scope` may ask for every one
  of them (the activation code and the consent page decide what is granted);
- `client_name` at most `OAUTH_CLIENT_NAME_MAX_CHARS`, every other string member at most
  `OAUTH_METADATA_TEXT_MAX_CHARS`, `contacts` at most `OAUTH_MAX_CONTACTS`;
- `jwks` / `jwks_uri` are refused: clients authenticate with a secret or with PKCE alone.

Members this server does not know are ignored (RFC 7591 §2) and not stored.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mcp.server.auth.errors import stringify_pydantic_error
from mcp.shared.auth import OAuthClientMetadata
from pydantic import ValidationError as PydanticValidationError

from ivoai.common.limits import (
    OAUTH_CLIENT_NAME_MAX_CHARS,
    OAUTH_MAX_CONTACTS,
    OAUTH_MAX_REDIRECT_URIS,
    OAUTH_METADATA_TEXT_MAX_CHARS,
    OAUTH_REDIRECT_URI_MAX_CHARS,
    OAUTH_REGISTRATION_MAX_BYTES,
)
from ivoai.server.auth.redirects import registration_problem
from ivoai.server.auth.scopes import WEB_SCOPES

GRANT_TYPES = ("authorization_code", "refresh_token")
AUTH_METHODS = ("none", "client_secret_post", "client_secret_basic")
DEFAULT_AUTH_METHOD = "client_secret_post"  # what the MCP SDK's handler assigns when none is asked for
TEXT_MEMBERS = ("client_uri", "logo_uri", "tos_uri", "policy_uri", "software_id", "software_version", "scope")


class RegistrationRefused(Exception):
    """An RFC 7591 §3.2.2 error: `error` is `invalid_client_metadata` or `invalid_redirect_uri`."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


def _metadata_error(description: str) -> RegistrationRefused:
    return RegistrationRefused("invalid_client_metadata", description)


def _check_text(doc: dict[str, Any], name: str, limit: int) -> None:
    value = doc.get(name)
    if value is None:
        return
    if not isinstance(value, str):
        raise _metadata_error(f"{name}: must be a string")
    if len(value) > limit:
        raise _metadata_error(f"{name}: {len(value)} characters; the limit is {limit}")


def _check_list(doc: dict[str, Any], name: str, limit: int, *, item_limit: int) -> list[str] | None:
    value = doc.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _metadata_error(f"{name}: must be a list of strings")
    if len(value) > limit:
        raise _metadata_error(f"{name}: {len(value)} given; the limit is {limit}")
    for item in value:
        if len(item) > item_limit:
            raise _metadata_error(f"{name}: an entry is {len(item)} characters; the limit is {item_limit}")
    return list(value)


_BAD_CHARACTER = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


def _bad_character(text: str) -> bool:
    return _BAD_CHARACTER.search(text) is not None


def _check_characters(doc: dict[str, Any]) -> None:
    """No string member (or string in a list member) holds a control character or a lone surrogate."""
    for name, value in doc.items():
        items = value if isinstance(value, list) else [value]
        if _bad_character(name) or any(isinstance(item, str) and _bad_character(item) for item in items):
            shown = "a member name" if _bad_character(name) else name[:64]
            raise _metadata_error(f"{shown}: control characters and lone surrogates are not allowed")


def _check_redirects(doc: dict[str, Any]) -> None:
    uris = doc.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise RegistrationRefused(
            "invalid_redirect_uri", "redirect_uris: at least one URI (a list of strings) is required"
        )
    if len(uris) > OAUTH_MAX_REDIRECT_URIS:
        raise RegistrationRefused(
            "invalid_redirect_uri",
            f"redirect_uris: {len(uris)} given; the limit is {OAUTH_MAX_REDIRECT_URIS}",
        )
    for uri in uris:
        if len(uri) > OAUTH_REDIRECT_URI_MAX_CHARS:
            raise RegistrationRefused(
                "invalid_redirect_uri",
                f"redirect_uris: a URI is {len(uri)} characters; the limit is {OAUTH_REDIRECT_URI_MAX_CHARS}",
            )


def _check_honoured(doc: dict[str, Any]) -> None:
    grants = _check_list(doc, "grant_types", len(GRANT_TYPES), item_limit=64)
    if grants is not None:
        unsupported = sorted(set(grants) - set(GRANT_TYPES))
        if unsupported:
            raise _metadata_error(
                f"grant_types: {', '.join(unsupported)} not supported (allowed: {', '.join(GRANT_TYPES)})"
            )
        if "authorization_code" not in grants:
            raise _metadata_error("grant_types: must include authorization_code")
    responses = _check_list(doc, "response_types", 1, item_limit=16)
    if responses is not None and responses != ["code"]:
        raise _metadata_error("response_types: only code is supported")
    method = doc.get("token_endpoint_auth_method")
    if method is not None and method not in AUTH_METHODS:
        raise _metadata_error(
            f"token_endpoint_auth_method: {str(method)[:64]!r} not supported "
            f"(allowed: {', '.join(AUTH_METHODS)})"
        )
    for member in ("jwks", "jwks_uri"):
        if doc.get(member) not in (None, ""):
            raise _metadata_error(
                f"{member}: not supported; clients authenticate with a secret or PKCE alone"
            )
    scope = doc.get("scope")
    if isinstance(scope, str):
        unknown = sorted(set(scope.split()) - set(WEB_SCOPES))
        if unknown or not scope.split():
            raise _metadata_error(
                f"scope: {' '.join(unknown) or 'empty'} not supported (allowed: {' '.join(WEB_SCOPES)})"
            )


def validate_registration(body: bytes) -> OAuthClientMetadata:
    """The client metadata of a registration request, with the server's defaults filled in.

    Raises:
        RegistrationRefused: the request breaks one of the rules in the module doc.
    """
    if len(body) > OAUTH_REGISTRATION_MAX_BYTES:
        raise _metadata_error(
            f"registration metadata is {len(body)} bytes; the limit is {OAUTH_REGISTRATION_MAX_BYTES} bytes"
        )
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise _metadata_error("the body is not JSON") from None
    if not isinstance(doc, dict):
        raise _metadata_error("the body must be a JSON object of client metadata")
    _check_characters(doc)
    _check_redirects(doc)
    _check_text(doc, "client_name", OAUTH_CLIENT_NAME_MAX_CHARS)
    for member in TEXT_MEMBERS:
        _check_text(doc, member, OAUTH_METADATA_TEXT_MAX_CHARS)
    _check_list(doc, "contacts", OAUTH_MAX_CONTACTS, item_limit=OAUTH_METADATA_TEXT_MAX_CHARS)
    _check_honoured(doc)
    try:
        metadata = OAuthClientMetadata.model_validate(doc)
    except PydanticValidationError as exc:
        raise _metadata_error(stringify_pydantic_error(exc)[:500]) from None
    problem = registration_problem([str(u) for u in metadata.redirect_uris or []])
    if problem is not None:
        raise RegistrationRefused("invalid_redirect_uri", problem)
    if metadata.token_endpoint_auth_method is None:
        metadata.token_endpoint_auth_method = DEFAULT_AUTH_METHOD  # type: ignore[assignment]
    if metadata.scope is None:
        metadata.scope = " ".join(WEB_SCOPES)
    return metadata
