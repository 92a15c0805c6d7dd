"""`POST /register` (RFC 7591) and `POST /revoke` (RFC 7009): ivoai's handlers, not the SDK's.

The SDK's registration handler reads any body the gateway accepts (4 MiB) and bounds no member; its
revocation handler requires `client_secret` even from public clients, which the server advertises
(`token_endpoint_auth_method` `none`). These handlers keep the SDK's models and answer shapes and
add what is missing:

- registration reads at most `OAUTH_REGISTRATION_MAX_BYTES` (a larger body is refused without being
  read whole) and applies `auth/registration.validate_registration`; errors are RFC 7591 §3.2.2
  (`invalid_client_metadata` / `invalid_redirect_uri`, the description naming member and limit);
- revocation authenticates confidential clients as the token endpoint does and identifies public
  ones by `client_id`; a token issued to the client revokes its whole grant; an unknown token, or
  one issued to another client, is answered 200 and changes nothing (RFC 7009 §2.2); any
  `token_type_hint` is accepted (§2.1: the server may ignore it).
"""

from __future__ import annotations

import secrets
import time
import uuid

import anyio.to_thread
from mcp.server.auth.handlers.register import RegistrationErrorResponse
from mcp.server.auth.json_response import PydanticJSONResponse
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.provider import RegistrationError
from mcp.shared.auth import OAuthClientInformationFull
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ivoai.common.limits import OAUTH_REGISTRATION_MAX_BYTES
from ivoai.server.auth.oauth_provider import IvoaiOAuthProvider
from ivoai.server.auth.registration import RegistrationRefused, validate_registration

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


async def read_bounded(request: Request, limit: int) -> bytes | None:
    """The request body, or None as soon as it is known to exceed `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _registration_error(error: str, description: str) -> Response:
    return PydanticJSONResponse(
        content=RegistrationErrorResponse(error=error, error_description=description),  # type: ignore[arg-type]
        status_code=400,
        headers=NO_STORE,
    )


class RegistrationEndpoint:
    """`POST /register`: bounded dynamic client registration (see module doc)."""

    def __init__(self, provider: IvoaiOAuthProvider) -> None:
        self.provider = provider

    async def handle(self, request: Request) -> Response:
        body = await read_bounded(request, OAUTH_REGISTRATION_MAX_BYTES)
        try:
            if body is None:
                raise RegistrationRefused(
                    "invalid_client_metadata",
                    f"registration metadata is larger than the limit of {OAUTH_REGISTRATION_MAX_BYTES} bytes",
                )
            metadata = validate_registration(body)
        except RegistrationRefused as exc:
            return _registration_error(exc.error, exc.description)
        secret = None if metadata.token_endpoint_auth_method == "none" else secrets.token_hex(32)
        info = OAuthClientInformationFull.model_validate(
            {
                **metadata.model_dump(),
                "client_id": str(uuid.uuid4()),
                "client_id_issued_at": int(time.time()),
                "client_secret": secret,
                # RFC 7591 §3.2.1: required with a secret; 0 means it does not expire.
                "client_secret_expires_at": 0 if secret is not None else None,
            }
        )
        try:
            await self.provider.register_client(info)
        except RegistrationError as exc:
            return _registration_error(exc.error, exc.error_description or exc.error)
        return PydanticJSONResponse(content=info, status_code=201, headers=NO_STORE)


class RevocationEndpoint:
    """`POST /revoke`: RFC 7009 for confidential and public clients (see module doc)."""

    def __init__(self, provider: IvoaiOAuthProvider, authenticator: ClientAuthenticator) -> None:
        self.provider = provider
        self.authenticator = authenticator

    async def handle(self, request: Request) -> Response:
        try:
            client = await self.authenticator.authenticate_request(request)
        except AuthenticationError as exc:
            return JSONResponse(
                {"error": "invalid_client", "error_description": exc.message},
                status_code=401,
                headers=NO_STORE,
            )
        form = await request.form()
        token = form.get("token")
        if not isinstance(token, str) or not token:
            return JSONResponse(
                {"error": "invalid_request", "error_description": "token: required"},
                status_code=400,
                headers=NO_STORE,
            )
        store = self.provider.store
        await anyio.to_thread.run_sync(lambda: store.revoke_token(token, client_id=client.client_id))
        return Response(status_code=200, headers=NO_STORE)
