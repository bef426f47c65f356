"""Closing browser contexts without leaving requests behind in the test database."""

from __future__ import annotations

import time

from django.core.management.color import no_style
from django.core.management.sql import sql_flush
from django.db import DatabaseError, connection, transaction
from playwright.sync_api import BrowserContext

#: How long the database must stay flushable before the flush may run (seconds).
SETTLE = 0.2


def close_contexts(contexts: list[BrowserContext], *, timeout: float = 10.0) -> None:
    """Close the browser contexts, then wait (bounded) until the test database can be flushed.

    Closing a page fires ``pagehide``, whose ``keepalive`` uploads (the trace recorder's last
    chunk) outlive the page, and the server, seeing the client gone, cancels the response but
    not the view's thread. A view still in a transaction when the test database is flushed
    deadlocks with the flush's ``TRUNCATE`` on PostgreSQL and makes SQLite's ``DELETE`` fail
    ("database table is locked": a shared in-memory database locks tables, not the file).
    """
    for context in contexts:
        context.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # twice, SETTLE apart: a keepalive request sent as the page closed may reach the
        # database only after a first look found it idle (a flush then deadlocked with it in CI
        # on a slow machine)
        if _flushable():
            time.sleep(SETTLE)
            if _flushable():
                return
        time.sleep(0.05)


def _flushable() -> bool:
    """Whether no other session of the test database holds what a flush needs."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid()"
                " AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')"
            )
            return cursor.fetchone()[0] == 0
    # SQLite gives no list of sessions: try the flush command's statements, and roll them back.
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                for statement in sql_flush(no_style(), connection, reset_sequences=False):
                    cursor.execute(statement)
            transaction.set_rollback(True)
    except DatabaseError:
        return False
    return True
