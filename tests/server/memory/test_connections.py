"""Per-thread SQLite connections: worker threads come and go, connections must not pile up."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from ivoai.server.datadir import ServerDataDir
from ivoai.server.memory._db import Connections, prepare_file


def test_connections_of_ended_threads_are_closed_when_a_new_thread_opens_one(data_dir: ServerDataDir) -> None:
    conns = Connections(prepare_file(data_dir.root, data_dir.memory))
    try:
        mine = conns.get()
        opened: list[sqlite3.Connection] = []

        def use() -> None:
            opened.append(conns.get())

        for _ in range(5):
            worker = threading.Thread(target=use)
            worker.start()
            worker.join()

        assert conns.open_count() == 2  # this thread's and the last worker's
        for ended in opened[:-1]:
            with pytest.raises(sqlite3.ProgrammingError):
                ended.execute("SELECT 1")
        assert opened[-1].execute("SELECT 1").fetchone() == (1,)
        assert mine.execute("SELECT 1").fetchone() == (1,)  # a live thread keeps its connection
        assert conns.get() is mine
    finally:
        conns.close()


def test_close_closes_the_connections_of_live_and_ended_threads(data_dir: ServerDataDir) -> None:
    conns = Connections(prepare_file(data_dir.root, data_dir.memory))
    mine = conns.get()
    opened: list[sqlite3.Connection] = []
    worker = threading.Thread(target=lambda: opened.append(conns.get()))
    worker.start()
    worker.join()

    conns.close()

    for conn in (mine, *opened):
        with pytest.raises(sqlite3.ProgrammingError):
            conn.execute("SELECT 1")
    assert conns.open_count() == 0
