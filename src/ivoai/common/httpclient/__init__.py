"""ivoai's HTTP client building blocks: lean HTTP/1.1 transports for httpx2, framed by h11.

Every HTTP client in ivoai speaks httpx2's API (`httpx2.Client`/`AsyncClient`, or a transport's
`handle_request`/`handle_async_request`); these transports serve the two calls whose CPU per
request is measured (the knowledge router's upstream calls, the server's embedding client). See
`_h11.py` for the framing policy, `_async.py` and `_sync.py` for the transports.
"""

from ivoai.common.httpclient._async import AsyncHttp11Transport
from ivoai.common.httpclient._capped import (
    CappedAsyncStream,
    ResponseTooLarge,
    check_declared_length,
    read_capped,
)
from ivoai.common.httpclient._h11 import framing_problem
from ivoai.common.httpclient._sync import SyncHttp11Transport

__all__ = [
    "AsyncHttp11Transport",
    "CappedAsyncStream",
    "ResponseTooLarge",
    "SyncHttp11Transport",
    "check_declared_length",
    "framing_problem",
    "read_capped",
]
