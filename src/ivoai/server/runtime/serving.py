"""uvicorn in a background thread: the one helper for every in-process server ivoai runs.

Used by the gateway served from a thread (`runner.start_background`: tests, the quickstart,
benchmarks) and by the local admin socket (`admin.AdminSocket`). The caller binds the socket (so a
`:0` port, or a Unix socket's path and mode, are settled before anything serves) and builds the
`uvicorn.Config`; this starts `uvicorn.Server.run` on that socket in a daemon thread, waits on
uvicorn's own `started` flag (bounded), and stops it by asking uvicorn to exit (its graceful
shutdown) and joining the thread.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass

import uvicorn

STARTUP_POLL_SECONDS = 0.005  # how often the starting thread is checked (uvicorn has no start event)


class ServerDidNotStart(RuntimeError):
    """uvicorn exited, or did not report `started`, within the startup deadline."""


@dataclass
class ServerThread:
    """A uvicorn server serving one bound socket from a daemon thread."""

    server: uvicorn.Server
    thread: threading.Thread
    sock: socket.socket

    @classmethod
    def start(cls, config: uvicorn.Config, sock: socket.socket, *, name: str, timeout: float) -> ServerThread:
        """Serve `config`'s app on `sock`; return once uvicorn accepts connections.

        Raises:
            ServerDidNotStart: uvicorn exited or did not start within `timeout` seconds (the thread
                is stopped and `sock` closed).
        """
        server = uvicorn.Server(config)

        def run() -> None:
            with contextlib.suppress(SystemExit):  # uvicorn's answer to a failed startup (logged by it)
                server.run(sockets=[sock])

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        waiting = threading.Event()
        for _ in range(max(1, int(timeout / STARTUP_POLL_SECONDS))):
            if server.started or not thread.is_alive():
                break
            waiting.wait(STARTUP_POLL_SECONDS)
        running = cls(server, thread, sock)
        if not server.started:
            running.stop(5.0)
            raise ServerDidNotStart(f"{name} did not start")
        return running

    def stop(self, timeout: float) -> None:
        """Ask uvicorn to exit (graceful shutdown), wait up to `timeout` seconds, close the socket."""
        self.server.should_exit = True
        self.thread.join(timeout=timeout)
        self.sock.close()
