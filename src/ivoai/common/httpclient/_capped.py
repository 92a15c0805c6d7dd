"""Response bodies capped at a size, counted as they arrive (a declared larger length fails first)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2


class ResponseTooLarge(httpx2.TransportError):
    """An answer's body exceeded the caller's cap; its connection is closed, not reused."""


def check_declared_length(response: httpx2.Response, limit: int) -> None:
    """Refuse an answer whose Content-Length already exceeds `limit` bytes.

    Raises:
        ResponseTooLarge: the declared length is over the cap.
    """
    length = response.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise ResponseTooLarge(f"response of {length} bytes exceeds the limit of {limit} bytes")


class CappedAsyncStream(httpx2.AsyncByteStream):
    """Another stream's bytes, failing with ResponseTooLarge past `limit` bytes."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self._inner:
            total += len(chunk)
            if total > self._limit:
                raise ResponseTooLarge(f"response exceeds the limit of {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def read_capped(response: httpx2.Response, limit: int) -> bytes:
    """The whole body of a streamed answer, at most `limit` bytes; the response is closed after.

    Raises:
        ResponseTooLarge: declared or actual body over `limit` bytes.
        httpx2.TransportError: the transport failed while reading.
    """
    try:
        check_declared_length(response, limit)
        chunks: list[bytes] = []
        total = 0
        assert isinstance(response.stream, httpx2.SyncByteStream)
        for chunk in response.stream:  # the transport's bytes as they come, no decoding layers
            total += len(chunk)
            if total > limit:
                raise ResponseTooLarge(f"response exceeds the limit of {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        response.close()
