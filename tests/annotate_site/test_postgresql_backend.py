"""Pooled PostgreSQL connections: handed out without a round trip, replaced once the server
has closed them (annotate_site/postgresql/base.py)."""

from __future__ import annotations

import copy
import select
import time
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from benchmarks.pool_checkout import statements_on_checkout

pytestmark = pytest.mark.postgres


@pytest.fixture
def wrapper(db) -> Iterator[BaseDatabaseWrapper]:
    """A connection to the test database from a pool of its own that holds one connection."""
    default = connections["default"]
    settings = copy.deepcopy(default.settings_dict)
    settings["OPTIONS"]["pool"] = {"min_size": 1, "max_size": 1, "timeout": 5}
    wrapper = type(default)(settings, alias="pool_of_one")
    assert wrapper.pool is not None
    yield wrapper
    wrapper.close()
    wrapper.close_pool()


def _backend_pid(wrapper: BaseDatabaseWrapper) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_a_pooled_connection_is_handed_out_without_a_statement(wrapper) -> None:
    """Django's pool check sent an empty query on every checkout: a round trip per request."""
    _backend_pid(wrapper)
    wrapper.close()  # back to the pool, its server alive
    assert statements_on_checkout(wrapper) == []


def test_a_connection_the_server_closed_is_replaced_before_a_request_uses_it(wrapper) -> None:
    """``pg_terminate_backend`` (as a restart or an idle timeout) closes the pooled connection
    from the server's side; the next checkout finds it closed and hands out another."""
    first = _backend_pid(wrapper)
    pooled = wrapper.connection
    wrapper.close()
    with psycopg.connect(**wrapper.get_connection_params(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [first])
    deadline = time.monotonic() + 5
    while not select.select([pooled.fileno()], [], [], 0.05)[0]:
        assert time.monotonic() < deadline, "the server never closed the connection"
    # an empty query finds it closed; the pool opens another, handed out instead
    assert statements_on_checkout(wrapper)[:1] == [""]
    assert _backend_pid(wrapper) != first
