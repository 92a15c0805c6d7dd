"""The gateway's HTTP/1.1 parser policy, at the layer that parses: uvicorn's h11 protocol.

h11 frames a request that carries both `Content-Length` and `Transfer-Encoding` by the transfer
coding and keeps the connection alive. RFC 9112 §6.1 says such a message may be a request smuggling
attempt (a front proxy that frames by Content-Length sees a different request boundary than we do)
and that a server must close the connection after responding to it. The gateway refuses it outright:
`StrictH11Connection.next_event` raises h11's `RemoteProtocolError` for it (the rule is
`common.httpclient.framing_problem`, which ivoai's HTTP clients apply to answers too), which uvicorn answers
with 400 and closes the connection, before the application sees anything. (Conflicting
Content-Length values and transfer codings other than `chunked` are already refused by h11.)

Every response this protocol writes, uvicorn's own (400 for a malformed request, 503 beyond the
concurrency limit, 500 when the application fails before answering) as much as the application's,
carries `X-Content-Type-Options: nosniff`: the guard adds it to the application's answers, and
`StrictH11Connection.send_with_data_passthrough` (under h11's `send`) adds it to any response head
still without it.
"""

from __future__ import annotations

from typing import Any

import h11
from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
from uvicorn.protocols.http.h11_impl import H11Protocol

from ivoai.common.httpclient import framing_problem

NOSNIFF = (b"x-content-type-options", b"nosniff")


class StrictH11Connection(h11.Connection):
    """h11's server connection with the gateway's framing policy and nosniff (see module doc)."""

    def next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        event = super().next_event()
        if isinstance(event, h11.Request):
            problem = framing_problem(event.headers)
            if problem is not None:
                raise h11.RemoteProtocolError(f"a request with {problem}", error_status_hint=400)
        return event

    def send_with_data_passthrough(self, event: h11.Event) -> list[bytes] | None:
        if isinstance(event, h11.Response) and not any(name == NOSNIFF[0] for name, _ in event.headers):
            event = h11.Response(
                status_code=event.status_code,
                headers=[*event.headers.raw_items(), NOSNIFF],
                reason=event.reason,
                http_version=event.http_version,
            )
        return super().send_with_data_passthrough(event)


class StrictFramingH11(H11Protocol):
    """uvicorn's h11 protocol on a `StrictH11Connection`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        limit = self.config.h11_max_incomplete_event_size
        self.conn = StrictH11Connection(
            h11.SERVER, limit if limit is not None else DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
        )
