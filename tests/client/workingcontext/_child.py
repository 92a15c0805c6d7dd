"""A real writer process for the multi-process ArtifactStore tests (run as a script, not imported).

python _child.py fill SIZE SESSION   wait for one line on stdin, then store SIZE-byte artifacts
                                     until the store answers with a quota error; print the count
python _child.py stream SESSION      store standard input as one artifact (the parent kills us)
"""

from __future__ import annotations

import sys

from ivoai.client.workingcontext import ArtifactQuotaError, ArtifactStore


def main(argv: list[str]) -> int:
    store = ArtifactStore()
    if argv[0] == "fill":
        size, session = int(argv[1]), argv[2]
        sys.stdin.readline()  # start together with the other writers
        stored = 0
        while True:
            try:
                store.put(b"q" * size, session_id=session)
            except ArtifactQuotaError as exc:
                print(f"{stored} {exc.code}", flush=True)
                return 0
            stored += 1
    if argv[0] == "stream":
        store.put(sys.stdin.buffer, session_id=argv[1])
        print("committed", flush=True)
        return 0
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
