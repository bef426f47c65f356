"""Django's SQLite backend, with write transactions queued on a lock inside the process.

SQLite lets one writer at a time hold the database file. Transactions begin ``IMMEDIATE`` (the
write lock is taken at ``BEGIN``), so a second writer waits for the first; SQLite's own busy
handler waits by sleeping and retrying, with sleeps growing to 100 ms, whether the lock is
freed after 1 ms or not. Under daphne each request runs in its own thread, so with a few dozen
annotators most submits slept far longer than they worked: at 32 clients p99 reached seconds.

Here every write transaction of the process first takes a lock of the database file inside the
process, so waiting writers queue and the next starts the moment the previous commits; only a
writer in another process (a management command) still meets SQLite's busy handler. The lock is
held from ``BEGIN`` to ``COMMIT``/``ROLLBACK``; a writer that cannot get it within the
connection's ``timeout`` goes ahead and leaves the wait to SQLite, so nothing waits forever.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db.backends.sqlite3 import base

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _write_lock(name: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(name, threading.Lock())


class DatabaseWrapper(base.DatabaseWrapper):
    """SQLite whose write transactions wait for each other in the process, not by polling."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held_write_lock: threading.Lock | None = None

    def _start_transaction_under_autocommit(self) -> None:
        lock = _write_lock(str(self.settings_dict["NAME"]))
        timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
        if lock.acquire(timeout=timeout):
            self._held_write_lock = lock
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release_write_lock()
            raise

    def _release_write_lock(self) -> None:
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

    def _close(self) -> None:
        try:
            super()._close()
        finally:
            self._release_write_lock()
