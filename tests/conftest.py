"""Shared fixtures: users by role, a running study, API clients, the PostgreSQL marker, and
what keeps pytest-xdist workers apart."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.test import override_settings
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient

from tests.factories import UserFactory, running_study
from tests.live_server import REQUESTS as LIVE_SERVER_REQUESTS
from tests.live_server import bounded

# No per-example deadline: property tests check values, and speed goals live in benchmarks/.
# Hypothesis's 200 ms default failed a one-millisecond example that a busy CI machine delayed.
hypothesis_settings.register_profile("studio", deadline=None)
hypothesis_settings.load_profile("studio")


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker has its own test database (pytest-django names them
    ``test_<name>_gw0``, ...) but all share one Redis: its channel names get the worker's prefix,
    or a dashboard socket of one worker would hear the pushes of another's study with the
    same primary key, and a worker's ``quality-updates`` consumer would take another's jobs."""
    from django.conf import settings

    # PBKDF2 costs 0.3-0.5 s a user: the tests use a fast hasher (production keeps Django's
    # default), set for the session so that module-scoped data (``module_db``) has it too
    # (with a function-scoped fixture the permission matrix's set-up took 10.6 s, now 5.7).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    _flush_keeps_reference_tables()
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("postgresql"):
        # A test database needs no durability: commits do not wait for the WAL on disk. The
        # transactional tests (browser, live servers) commit often and empty every table
        # after each test; their flushes took several seconds each on a busy machine.
        database.setdefault("OPTIONS", {})["options"] = "-c synchronous_commit=off"
        # Beside the in-process web server's threads, which the settings count, the live server's
        # requests and the test's own thread hold connections.
        pool = database["OPTIONS"].get("pool")
        if isinstance(pool, dict):
            pool["max_size"] += LIVE_SERVER_REQUESTS + 1
        _flush_by_delete()
        _drop_by_force()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    layer = settings.CHANNEL_LAYERS["default"]
    if worker and layer["BACKEND"].endswith("RedisChannelLayer"):  # the peer layer is per process
        layer["CONFIG"]["prefix"] = f"asgi-{worker}"


def _flush_keeps_reference_tables() -> None:
    """Empty every table but the content types and permissions after a transactional test.

    Django's flush empties all tables, then sends ``post_migrate``, whose two handlers (the
    only ones installed: ``create_contenttypes``, ``create_permissions``) write the same rows
    back: 221 queries instead of 57, 58-62 ms instead of 2-4 on SQLite and 215-253 ms instead
    of 21-36 on PostgreSQL for each transactional test on the 2026-11-30 machine. Keeping
    those tables keeps their rows' ids, so ``ContentType``'s cache stays right and the signal
    has nothing to do; the user and group permission links are emptied with the rest.
    """
    from django.core.management.commands import flush

    def sql_flush(style, connection, *, reset_sequences=True, allow_cascade=False):
        from django.contrib.auth.models import Permission
        from django.contrib.contenttypes.models import ContentType

        written_by_migrate = {ContentType._meta.db_table, Permission._meta.db_table}
        names = connection.introspection.django_table_names(only_existing=True, include_views=False)
        kept = [table for table in names if table not in written_by_migrate]
        return connection.ops.sql_flush(
            style, kept, reset_sequences=reset_sequences, allow_cascade=allow_cascade
        )

    def emit_post_migrate_signal(verbosity, interactive, db, **kwargs):
        """A flush leaves what the handlers write in place."""

    flush.sql_flush = sql_flush
    flush.emit_post_migrate_signal = emit_post_migrate_signal


def _flush_by_delete() -> None:
    """Empty the tables after a transactional test with ``DELETE`` instead of ``TRUNCATE``.

    Django flushes PostgreSQL with one ``TRUNCATE`` of every table: a new file for each table
    and index, 380 ms for the studio's 55 nearly empty tables on the 2026-11-29 machine,
    against 8-26 ms for a ``DELETE`` of each (the tests' tables hold a few hundred rows). The
    foreign keys Django creates are ``DEFERRABLE INITIALLY DEFERRED``, so with the constraints
    deferred the order does not matter; the flush runs in one transaction (Django's
    ``execute_sql_flush``). A flush that resets sequences or cascades keeps ``TRUNCATE``.
    """
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade or not tables:
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        deletes = [f"{style.SQL_KEYWORD('DELETE FROM')} {self.quote_name(t)};" for t in tables]
        return ["SET CONSTRAINTS ALL DEFERRED;", *deletes]

    DatabaseOperations.sql_flush = sql_flush


def _drop_by_force() -> None:
    """Drop a test database at the session's end even while threads still hold connections.

    Threads that outlive their tests (a live server's, the quality sweeper's, the web
    process's kept request threads) keep the pooled connections they checked out; Django
    closes the pool (its idle connections) and then ``DROP DATABASE`` failed ("being accessed
    by other users": 1 to 5 sessions, in two CI runs), leaving ``test_postgres_gw0`` behind.
    ``WITH (FORCE)`` (PostgreSQL 13+; Django 5.2 needs 14) ends those sessions first.
    """
    from django.db.backends.postgresql.creation import DatabaseCreation

    def _destroy_test_db(self, test_database_name, verbosity):
        self.connection.close_pool()
        name = self.connection.ops.quote_name(test_database_name)
        with self._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE {name} WITH (FORCE)")

    DatabaseCreation._destroy_test_db = _destroy_test_db


METRICS = Path(__file__).parent / "analytics" / "metrics"


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects: it reads the ``pure_numpy`` mark
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skips what needs PostgreSQL on SQLite; marks the metrics library's tests ``pure_numpy``;
    and, when no ``-m`` is given on SQLite (``./studio test``), leaves out the ``slow`` tests,
    which CI runs in its PostgreSQL pass (``./studio test -m slow`` runs them here)."""
    from django.conf import settings

    on_postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    skip = pytest.mark.skip(reason="needs PostgreSQL (DATABASE_URL); SQLite serialises writes")
    fuzz = pytest.mark.skip(reason="a fuzz run: the PostgreSQL + Redis pass (DATABASE_URL)")
    quick_pass = not on_postgres and not config.option.markexpr
    kept, slow = [], []
    for item in items:
        if METRICS in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.pure_numpy)
        if "postgres" in item.keywords and not on_postgres:
            item.add_marker(skip)
        if "fuzz" in item.keywords and not on_postgres:
            item.add_marker(fuzz)
        (slow if quick_pass and "slow" in item.keywords else kept).append(item)
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = kept


@pytest.fixture(scope="session")
def live_server(live_server):
    """pytest-django's live server, running at most ``tests.live_server.REQUESTS`` requests at
    once (the test process's database pool has room for that many: ``pytest_configure``)."""
    httpd = live_server.thread.httpd
    httpd.set_app(bounded(httpd.get_app(), threading.BoundedSemaphore(LIVE_SERVER_REQUESTS)))
    return live_server


@pytest.fixture
def study_setup(db):
    """A running study with six items, one ordered categorical question and three annotators."""
    study, annotators = running_study()
    return study, annotators


@pytest.fixture
def manager(study_setup):
    return study_setup[0].created_by


@pytest.fixture
def outsider(db):
    return UserFactory(manager=True)


@pytest.fixture
def api_client():
    return APIClient()


@pytest.fixture
def is_postgres() -> bool:
    return connection.vendor == "postgresql"


@pytest.fixture(autouse=True)
def _axes_off(settings):
    """Sign-in throttling (django-axes) is off, so that tests may sign in as often as they like
    and use ``client.login``; the tests of throttling turn it on with ``axes_on``."""
    settings.AXES_ENABLED = False


@pytest.fixture
def axes_on(settings):
    """Sign-in throttling on, as in production (its counts live in the test database)."""
    settings.AXES_ENABLED = True


# Quality updates run in the committing thread, so a test sees them when it asserts (the
# background-thread mode has its own tests); no sweeper thread in the test process; no
# interval bootstrap unless a test asks for it.
QUALITY_IN_TESTS = {
    "QUALITY_UPDATES": "inline",
    "QUALITY_SWEEP_INTERVAL": 0,
    "QUALITY_INTERVAL_SECONDS": 0,
    "QUALITY_INTERVAL_DUTY": 0,  # no rest after a computation (tests/analytics/test_intervals)
    # as in production: a forecast fit after each answer took 18 of the 30 s of a test that
    # seeds 179 live answers; tests/apps/adjudication/test_forecast.py sets 0
    "QUALITY_FORECAST_INTERVAL": 30,
    "ARENA_POOL_SECONDS": 0,  # the arena's next pair from every vote so far
}


@pytest.fixture(autouse=True)
def _quality_updates_inline(settings, monkeypatch):
    """:data:`QUALITY_IN_TESTS` for every test, and the forecast throttle's memory of the
    questions this process tried (and of how long their retraining took) starts empty (a
    question of an earlier test with the same primary key would otherwise wait out its
    interval)."""
    for name, value in QUALITY_IN_TESTS.items():
        setattr(settings, name, value)
    monkeypatch.setattr("apps.adjudication.services._FORECAST_TRIED", {})
    monkeypatch.setattr("apps.adjudication.services._FORECAST_TOOK", {})


@pytest.fixture
def pinned_pair_seed(monkeypatch):
    """Every pairwise session starts from seed 0, so the order in which the scheduler asks
    pairs (and so whether a cycle-making annotator can close a cycle) does not depend on the
    random session seed or on the database's primary keys."""
    monkeypatch.setattr("apps.preferences.services.secrets.randbelow", lambda n: 0)


@pytest.fixture(scope="module")
def module_db(django_db_setup, django_db_blocker) -> Iterator[None]:
    """A transaction around a module's tests, rolled back after the last one: data that a
    module-scoped fixture builds inside it is made once, and each test's own transaction
    (the ``db`` fixture's) is a savepoint within it, so what a test writes is undone before
    the next. Django's ``TestCase.setUpTestData`` for pytest; not for ``transaction=True``
    tests, which commit."""
    with (
        django_db_blocker.unblock(),
        override_settings(**QUALITY_IN_TESTS),
        transaction.atomic(),
    ):
        yield
        transaction.set_rollback(True)
