"""Closing browser contexts without leaving requests behind in the test database."""

from __future__ import annotations

import time

from django.db import connection
from playwright.sync_api import BrowserContext


def close_contexts(contexts: list[BrowserContext], *, timeout: float = 10.0) -> None:
    """Close the browser contexts, then wait until the server's requests have finished.

    Closing a page fires ``pagehide``, whose ``keepalive`` uploads (the trace recorder's last
    chunk) outlive the page: a request still in a transaction when the test database is
    flushed deadlocks with the flush's ``TRUNCATE`` on PostgreSQL. Wait (bounded) until no
    other session of the test database is active or inside a transaction.
    """
    for context in contexts:
        context.close()
    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid()"
                " AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')"
            )
            if cursor.fetchone()[0] == 0:
                return
            time.sleep(0.05)
