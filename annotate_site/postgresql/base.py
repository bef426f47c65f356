"""Django's PostgreSQL backend, handing out a pooled connection without a round trip.

Django's pool checks a connection before handing it out when ``CONN_HEALTH_CHECKS`` is on: an
empty query, one round trip on every request (0.07 ms of the web process's CPU, the server's
share, and a wait for the GIL after; 7-10 % of a web process's samples under load). Without
the check, a pooled connection that the server has closed (a restart, ``pg_terminate_backend``,
``idle_session_timeout``) would fail the first request that uses it.

The server closes a connection by sending a ``FATAL`` message and closing its end of the
socket, and a dead server's kernel closes it too: either way the socket then has something to
read, which an idle connection to a live server never has (the studio listens for no
notifications). Here a pooled connection is handed out as it is when its socket has nothing to
read (a poll with no timeout, no round trip), and checked with the empty query otherwise; one
that fails the check goes back to the pool, which discards it and opens another, and the next
is taken, as the pool's own check does. A connection cut off without a word (a network gone)
is found by neither check before use, and fails its request as before.

``annotate_site.settings`` names this backend, with ``CONN_HEALTH_CHECKS`` off, when
connections are pooled (``DB_POOL_SIZE`` > 0, the default); without a pool Django's backend
and its checks are used unchanged.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool


def _has_something_to_read(connection: psycopg.Connection[Any]) -> bool:
    """Whether the connection's socket can be read without waiting: data, or its end."""
    descriptor = connection.fileno()
    if hasattr(select, "poll"):
        poll = select.poll()
        poll.register(descriptor, select.POLLIN)
        return bool(poll.poll(0))
    return bool(select.select([descriptor], [], [], 0)[0])  # Windows: sockets only, as here


def usable(connection: psycopg.Connection[Any]) -> bool:
    """Whether a pooled connection may be handed out: open, and its socket quiet or its check
    (an empty query) passed."""
    if connection.closed:
        return False
    if not _has_something_to_read(connection):
        return True
    try:
        ConnectionPool.check_connection(connection)
    except psycopg.Error:
        return False
    return True


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's wrapper, checking a pooled connection only when the server may have closed it."""

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        connection = super().get_new_connection(conn_params)
        pool = self.pool
        # each pass discards one closed connection: the pool holds finitely many, and waits
        # for a new one at most its timeout (PoolTimeout: the studio answers 503)
        while pool is not None and not usable(connection):
            pool.putconn(connection)
            connection = super().get_new_connection(conn_params)
        return connection
