"""Django's SQLite backend, with write transactions queued on a lock shared by every process.

SQLite lets one writer at a time hold the database file. Transactions begin ``IMMEDIATE`` (the
write lock is taken at ``BEGIN``), so a second writer waits for the first; SQLite's own busy
handler waits by sleeping and retrying, with sleeps growing to 100 ms, whether the lock is
freed after 1 ms or not. With a few dozen annotators most submits slept far longer than they
worked: at 32 clients p99 reached seconds.

Here a write transaction first takes two locks, held from ``BEGIN`` to ``COMMIT``/``ROLLBACK``:

1. a lock inside the process, so the process's writers queue and the next starts the moment
   the previous commits;
2. an exclusive ``flock`` on ``<database>.writelock`` beside the database file, shared by
   every process that opens the database (``serve``'s web processes, its quality worker, a
   management command). Only one thread per process asks for it (the first lock), so it is
   contended by a handful of processes at most; a blocked one polls it every 0.5-4 ms, far
   below SQLite's 100 ms sleeps. The kernel frees it when its holder dies.

A writer that cannot get either lock within the connection's ``timeout`` goes ahead and leaves
the wait to SQLite, so nothing waits forever.

Connections are kept for reuse. Under ASGI each request runs its view code on a thread of its
own and closes its connection at the end; opening a connection in Django (``sqlite3.connect``,
then Django's ~40 SQL functions registered one by one and three PRAGMAs) cost 0.9 ms of CPU, a
fifth of an answer's. A closed connection outside any transaction goes back to a per-process
list of idle ones (``DB_POOL_SIZE`` of them at most, as PostgreSQL's pool; ``0``: none kept)
and the next thread's connect takes it (SQLite connections may change threads between uses:
Django opens them with ``check_same_thread=False``). A connection closed inside a transaction,
or holding a write lock, is closed for real; in-memory databases are never closed by Django.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import threading
import time
from typing import Any

from django.db.backends.sqlite3 import base

POLL_SECONDS = (0.0005, 0.001, 0.002, 0.004)  # between tries of a busy file lock; the last repeats

_locks: dict[str, threading.Lock] = {}
_idle: dict[tuple[int, str], list[Any]] = {}  # (pid, database) -> idle sqlite3 connections
_lock_files: dict[tuple[int, str], int] = {}  # (pid, database) -> descriptor of its lock file
_locks_guard = threading.Lock()


def _write_lock(name: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(name, threading.Lock())


def _lock_file(name: str) -> int | None:
    """This process's descriptor of the database's lock file (``None`` for in-memory ones).

    Opened once per process: a descriptor inherited through ``fork`` would share its lock
    with the parent."""
    if name == ":memory:" or name.startswith("file:"):
        return None
    key = (os.getpid(), name)
    with _locks_guard:
        if key not in _lock_files:
            _lock_files[key] = os.open(f"{name}.writelock", os.O_RDWR | os.O_CREAT, 0o600)
        return _lock_files[key]


def _flock(descriptor: int, timeout: float) -> bool:
    """Take the exclusive file lock within ``timeout`` seconds; ``True`` if taken."""
    deadline = time.monotonic() + timeout
    for attempt in itertools.count():
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_SECONDS[min(attempt, len(POLL_SECONDS) - 1)])
    raise AssertionError("unreachable")


class DatabaseWrapper(base.DatabaseWrapper):
    """SQLite whose write transactions wait for each other on locks, not by SQLite's polling."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held_write_lock: threading.Lock | None = None
        self._held_lock_file: int | None = None

    def _start_transaction_under_autocommit(self) -> None:
        name = str(self.settings_dict["NAME"])
        timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
        started = time.monotonic()
        lock = _write_lock(name)
        if lock.acquire(timeout=timeout):
            self._held_write_lock = lock
            descriptor = _lock_file(name)
            left = timeout - (time.monotonic() - started)
            if descriptor is not None and _flock(descriptor, max(0.0, left)):
                self._held_lock_file = descriptor
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release_write_lock()
            raise

    def _release_write_lock(self) -> None:
        descriptor, self._held_lock_file = self._held_lock_file, None
        if descriptor is not None:
            fcntl.flock(descriptor, fcntl.LOCK_UN)
        lock, self._held_write_lock = self._held_write_lock, None
        if lock is not None:
            lock.release()

    def _commit(self) -> None:
        try:
            super()._commit()
        finally:
            self._release_write_lock()

    def _rollback(self) -> None:
        try:
            super()._rollback()
        finally:
            self._release_write_lock()

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        """An idle connection of this process to the database if there is one, else a new one."""
        with _locks_guard:
            idle = _idle.get(self._pool_key())
            if idle:
                return idle.pop()
        return super().get_new_connection(conn_params)

    def _close(self) -> None:
        try:
            if not self._keep_idle():
                super()._close()
        finally:
            self._release_write_lock()

    def _pool_key(self) -> tuple[int, str]:
        return os.getpid(), str(self.settings_dict["NAME"])

    def _keep_idle(self) -> bool:
        """Put the connection on the idle list instead of closing it, if it is clean (no
        transaction, no lock) and the list has room; ``True`` if kept."""
        connection = self.connection
        if (
            connection is None
            or self.in_atomic_block
            or self._held_write_lock is not None
            or connection.in_transaction
            or self.is_in_memory_db()
        ):
            return False
        size = _pool_size()
        with _locks_guard:
            idle = _idle.setdefault(self._pool_key(), [])
            if len(idle) >= size:
                return False
            idle.append(connection)
        return True


def _pool_size() -> int:
    """How many idle connections a process keeps per database (``DB_POOL_SIZE``)."""
    from django.conf import settings

    return int(getattr(settings, "DB_POOL_SIZE", 0))
