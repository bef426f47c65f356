"""The SQLite backend queues a process's write transactions on a lock, not on SQLite's polling."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import ConnectionHandler

from annotate_site.sqlite.base import _write_lock


@pytest.fixture(autouse=True)
def _own_database_files(django_db_blocker):
    """These tests open their own database files, not the test database."""
    with django_db_blocker.unblock():
        yield


def sqlite_connection(path: Path) -> BaseDatabaseWrapper:
    """A connection of the studio's SQLite backend to ``path``, for the calling thread."""
    handler = ConnectionHandler(
        {
            "default": {
                "ENGINE": "annotate_site.sqlite",
                "NAME": str(path),
                "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
            }
        }
    )
    return handler["default"]


def begin(connection: BaseDatabaseWrapper) -> None:
    """What ``transaction.atomic()`` does on entering the outermost block."""
    connection.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)


def test_a_second_writer_sends_begin_only_after_the_first_commits(tmp_path) -> None:
    path = tmp_path / "db.sqlite3"
    setup = sqlite_connection(path)
    with setup.cursor() as cursor:
        cursor.execute("CREATE TABLE t (n integer)")
    setup.close()
    events: list[str] = []
    first_began = threading.Event()

    def writer(name: str, hold: float) -> None:
        connection = sqlite_connection(path)

        def record(execute, sql, params, many, context):
            if sql.startswith("BEGIN"):
                events.append(f"{name} sends BEGIN")
            return execute(sql, params, many, context)

        with connection.execute_wrapper(record):
            if name == "second":
                first_began.wait(5)
            begin(connection)
            first_began.set()
            with connection.cursor() as cursor:
                cursor.execute("INSERT INTO t VALUES (1)")
            time.sleep(hold)
            events.append(f"{name} commits")
            connection.commit()
            connection.set_autocommit(True)
        connection.close()

    threads = [
        threading.Thread(target=writer, args=("first", 0.3)),
        threading.Thread(target=writer, args=("second", 0)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert events == [
        "first sends BEGIN",
        "first commits",
        "second sends BEGIN",
        "second commits",
    ]
    assert not _write_lock(str(path)).locked()


def test_the_lock_is_released_by_rollback_and_close(tmp_path) -> None:
    path = tmp_path / "db.sqlite3"
    lock = _write_lock(str(path))
    connection = sqlite_connection(path)
    begin(connection)
    assert lock.locked()
    connection.rollback()
    connection.set_autocommit(True)
    assert not lock.locked()
    begin(connection)
    assert lock.locked()
    connection.close()
    assert not lock.locked()


@pytest.mark.django_db
def test_the_served_default_uses_it() -> None:
    from django.conf import settings
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("the default database is not SQLite")
    assert settings.DATABASES["default"]["ENGINE"] == "annotate_site.sqlite"
