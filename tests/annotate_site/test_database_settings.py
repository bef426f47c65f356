"""Database settings of the hot path, each read in a fresh process."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from tests.annotate_site.helpers import child_env, settings_value

pytestmark = pytest.mark.own_processes  # the same on every test database


def databases(tmp_path: Path, **variables: str) -> dict:
    return settings_value("settings.DATABASES", env=child_env(tmp_path, **variables))["default"]


def test_sqlite_uses_the_backend_that_queues_writers(tmp_path: Path) -> None:
    default = databases(tmp_path)
    assert default["ENGINE"] == "annotate_site.sqlite"
    assert default["OPTIONS"]["transaction_mode"] == "IMMEDIATE"


@pytest.mark.parametrize(
    ("size", "threads", "pool"),
    [(None, None, 9), (None, "16", 21), ("3", None, 3), ("0", None, None)],
)
def test_postgresql_connections_come_from_a_pool_as_large_as_the_threads_using_it(
    tmp_path: Path, size, threads, pool
) -> None:
    """By default one connection for each thread that can hold one: WEB_THREADS request slots,
    ASYNC_THREADS executor threads and the thread-sensitive one (4 + 4 + 1)."""
    variables = {"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/studio"}
    if size is not None:
        variables["DB_POOL_SIZE"] = size
    if threads is not None:
        variables["WEB_THREADS"] = threads
    default = databases(tmp_path, **variables)
    assert default.get("OPTIONS", {}).get("pool", {}).get("max_size") == pool
    assert default["CONN_MAX_AGE"] == 0


@pytest.mark.parametrize(
    ("size", "engine", "checks"),
    [(None, "annotate_site.postgresql", False), ("0", "django.db.backends.postgresql", True)],
)
def test_pooled_postgresql_connections_are_checked_by_the_studio_backend(
    tmp_path: Path, size, engine, checks
) -> None:
    """Pooled: the studio's backend checks a connection when its socket has something to read
    (tests/annotate_site/test_postgresql_backend.py), not with a query on every checkout;
    without a pool, Django's backend and its health checks of kept connections."""
    variables = {"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/studio"}
    if size is not None:
        variables["DB_POOL_SIZE"] = size
    default = databases(tmp_path, **variables)
    assert (default["ENGINE"], default["CONN_HEALTH_CHECKS"]) == (engine, checks)


@pytest.mark.parametrize(
    ("threshold", "options"),
    [
        (None, {"server_side_binding": True, "prepare_threshold": 5}),
        ("2", {"server_side_binding": True, "prepare_threshold": 2}),
        ("0", {}),  # behind a pooler that cannot keep prepared statements: Django's default
    ],
)
def test_postgresql_prepares_repeated_statements_unless_told_not_to(
    tmp_path: Path, threshold, options
) -> None:
    """Parameters are bound on the server, so that psycopg can prepare a statement run
    ``DB_PREPARE_THRESHOLD`` times on a connection (tests/api/test_hot_paths.py checks that the
    answer's statements are prepared and planned once); 0 leaves both off, as Django does."""
    variables = {"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/studio"}
    if threshold is not None:
        variables["DB_PREPARE_THRESHOLD"] = threshold
    given = databases(tmp_path, **variables)["OPTIONS"]
    assert {k: given[k] for k in ("server_side_binding", "prepare_threshold") if k in given} == (
        options
    )


def test_sqlite_has_no_statement_preparing_options(tmp_path: Path) -> None:
    options = databases(tmp_path, DB_PREPARE_THRESHOLD="5")["OPTIONS"]
    assert "server_side_binding" not in options
    assert "prepare_threshold" not in options


def test_each_xdist_worker_tests_on_its_own_sqlite_database_in_memory(monkeypatch) -> None:
    """pytest-django gives each pytest-xdist worker a test database of its own by suffixing its
    name (``_gw0``); it knows SQLite by Django's engine name only, so for the studio's engine
    it used to make ``test_/abs/path/studio.sqlite3_gw0``: "unable to open database file"."""
    from django.conf import settings
    from pytest_django.fixtures import _set_suffix_to_test_databases

    from annotate_site.sqlite.base import DatabaseWrapper

    if settings.DATABASES["default"]["ENGINE"] != "annotate_site.sqlite":
        pytest.skip("the SQLite pass")
    monkeypatch.setattr(settings, "DATABASES", copy.deepcopy(settings.DATABASES))  # suffixed here
    _set_suffix_to_test_databases(suffix="gw1")
    creation = DatabaseWrapper(settings.DATABASES["default"], "default").creation
    test_name = creation._get_test_db_name()
    assert creation.is_in_memory_db(test_name), test_name


@pytest.mark.parametrize(
    ("variables", "threads"),
    [
        ({}, 2),  # SQLite: one write lock; more threads only contend for the GIL
        ({"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/studio"}, 4),
        ({"WEB_THREADS": "5"}, 5),
    ],
)
def test_request_slots_default_to_the_database(tmp_path: Path, variables, threads) -> None:
    assert settings_value("settings.WEB_THREADS", env=child_env(tmp_path, **variables)) == threads


def test_the_pool_is_the_same_in_a_process_that_imported_pytest(tmp_path: Path) -> None:
    """The settings size a process's pool by its threads alone: a process that imported pytest
    gets no more (the test process adds room for its own live server in tests/conftest.py)."""
    pool = "settings.DATABASES['default']['OPTIONS']['pool']['max_size']"
    env = child_env(tmp_path, DATABASE_URL="postgres://postgres@127.0.0.1:5432/studio")
    assert settings_value(pool, env=env) == 9
    assert settings_value(pool, env=env, before="import pytest; ") == 9
