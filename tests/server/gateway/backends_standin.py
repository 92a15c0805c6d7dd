"""A stand-in for the services-mode backends, in one separate process: a Qdrant server and TEI.

Neither a Qdrant server binary nor a Docker engine can run on these machines (no registry ships the
server: PyPI and npm carry clients only), and qdrant-client's local mode locks its storage to one
process. So this process serves the subset of Qdrant's REST API that `QdrantIndex` (through the real
`qdrant-client` HTTP client) uses, backed by qdrant-client's local mode (the Qdrant semantics
qdrant-client ships in Python), behind one lock: several gateway worker processes then share one
collection over HTTP exactly as they would share a Qdrant server. Endpoints: `GET /` (version for
the client's compatibility check), `GET /collections/{c}/exists`, `PUT|DELETE /collections/{c}`,
`PUT /collections/{c}/index`, `PUT /collections/{c}/points` (upsert), `POST /collections/{c}/points`
(retrieve), `PUT …/points/vectors` (phase 2's dense vectors), `POST /collections/{c}/points/delete`,
`…/points/query`, `…/points/scroll`, `…/points/count`.

It also answers TEI 1.9's `POST /embed` and `GET /info` with the tests' hash vectors (bag of words,
so lexical overlap means vector similarity), requiring the bearer key given on the command line.

Run: `python -m tests.server.gateway.backends_standin PORT_FILE API_KEY`; the chosen port is written
to PORT_FILE once the socket listens.
"""

from __future__ import annotations

import hashlib
import math
import sys
import threading
from pathlib import Path
from typing import Any

import uvicorn
from qdrant_client import QdrantClient
from qdrant_client import models as m
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

LOCK = threading.Lock()
LOCAL = QdrantClient(":memory:")
KEY = ""


def _vec(text: str) -> list[float]:
    v = [0.0] * 384
    for word in text.lower().replace("query: ", "").replace("passage: ", "").split():
        v[int.from_bytes(hashlib.blake2s(word.encode()).digest()[:4], "big") % 384] += 1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


def _ok(result: Any) -> JSONResponse:
    if hasattr(result, "model_dump"):
        result = result.model_dump(mode="json", exclude_none=True)
    return JSONResponse({"result": result, "status": "ok", "time": 0.0})


def _authorized(request: Request, header: str) -> bool:
    if header == "api-key":
        return request.headers.get("api-key") == KEY
    return request.headers.get("authorization") == f"Bearer {KEY}"


async def root(request: Request) -> JSONResponse:
    return JSONResponse({"title": "qdrant stand-in (tests)", "version": "1.19.0"})


async def exists(request: Request) -> JSONResponse:
    with LOCK:
        return _ok({"exists": LOCAL.collection_exists(request.path_params["c"])})


async def collection(request: Request) -> JSONResponse:
    c = request.path_params["c"]
    if not _authorized(request, "api-key"):
        return JSONResponse({"status": {"error": "unauthorized"}}, status_code=401)
    with LOCK:
        if request.method == "DELETE":
            return _ok(LOCAL.delete_collection(c))
        body = m.CreateCollection.model_validate(await request.json())
        return _ok(
            LOCAL.create_collection(c, vectors_config=body.vectors, sparse_vectors_config=body.sparse_vectors)
        )


async def index(request: Request) -> JSONResponse:
    return _ok({"operation_id": 0, "status": "completed"})  # payload indexes are a no-op in local mode


async def upsert(request: Request) -> JSONResponse:
    body = m.PointsList.model_validate(await request.json())
    with LOCK:
        return _ok(LOCAL.upsert(request.path_params["c"], points=body.points, wait=True))


async def delete(request: Request) -> JSONResponse:
    raw = await request.json()
    selector: Any = (
        m.PointIdsList.model_validate(raw) if "points" in raw else m.FilterSelector.model_validate(raw)
    )
    with LOCK:
        return _ok(LOCAL.delete(request.path_params["c"], points_selector=selector, wait=True))


async def query(request: Request) -> JSONResponse:
    req = m.QueryRequest.model_validate(await request.json())
    q: Any = req.query.nearest if isinstance(req.query, m.NearestQuery) else req.query
    with LOCK:
        res = LOCAL.query_points(
            request.path_params["c"],
            query=q,
            using=req.using,
            limit=req.limit or 10,
            query_filter=req.filter,
            score_threshold=req.score_threshold,
            with_payload=False,
        )
    return _ok(res)


async def scroll(request: Request) -> JSONResponse:
    req = m.ScrollRequest.model_validate(await request.json())
    with LOCK:
        points, offset = LOCAL.scroll(
            request.path_params["c"],
            limit=req.limit or 10,
            offset=req.offset,
            with_payload=False,
            with_vectors=req.with_vector if req.with_vector is not None else False,
        )
    return _ok({"points": [p.model_dump(mode="json") for p in points], "next_page_offset": offset})


async def update_vectors(request: Request) -> JSONResponse:
    body = m.UpdateVectors.model_validate(await request.json())
    with LOCK:
        return _ok(LOCAL.update_vectors(request.path_params["c"], points=body.points, wait=True))


async def retrieve(request: Request) -> JSONResponse:
    req = m.PointRequest.model_validate(await request.json())
    with LOCK:
        points = LOCAL.retrieve(
            request.path_params["c"],
            ids=req.ids,
            with_payload=False,
            with_vectors=req.with_vector if req.with_vector is not None else False,
        )
    return _ok([p.model_dump(mode="json") for p in points])


async def count(request: Request) -> JSONResponse:
    req = m.CountRequest.model_validate(await request.json())
    with LOCK:
        return _ok(LOCAL.count(request.path_params["c"], count_filter=req.filter, exact=True))


async def embed(request: Request) -> JSONResponse:
    if not _authorized(request, "bearer"):
        return JSONResponse({"error": "unauthorized"}, status_code=401)
    body = await request.json()
    return JSONResponse([_vec(t) for t in body["inputs"]])


async def info(request: Request) -> JSONResponse:
    return JSONResponse({"model_id": "intfloat/multilingual-e5-small", "max_input_length": 512})


APP = Starlette(
    routes=[
        Route("/", root),
        Route("/embed", embed, methods=["POST"]),
        Route("/info", info),
        Route("/collections/{c}/exists", exists),
        Route("/collections/{c}", collection, methods=["PUT", "DELETE"]),
        Route("/collections/{c}/index", index, methods=["PUT"]),
        Route("/collections/{c}/points", upsert, methods=["PUT"]),
        Route("/collections/{c}/points", retrieve, methods=["POST"]),
        Route("/collections/{c}/points/vectors", update_vectors, methods=["PUT"]),
        Route("/collections/{c}/points/delete", delete, methods=["POST"]),
        Route("/collections/{c}/points/query", query, methods=["POST"]),
        Route("/collections/{c}/points/scroll", scroll, methods=["POST"]),
        Route("/collections/{c}/points/count", count, methods=["POST"]),
    ]
)


def main() -> None:
    import socket

    global KEY
    port_file, KEY = Path(sys.argv[1]), sys.argv[2]
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port_file.write_text(str(sock.getsockname()[1]))
    uvicorn.Server(uvicorn.Config(APP, log_level="warning", lifespan="off")).run(sockets=[sock])


if __name__ == "__main__":
    main()
