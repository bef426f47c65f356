"""Query-plan checks for hot paths: no full scan of a table that grows with the study, and no
sort of its rows (reading the first of them in order must not read them all).

On SQLite the plan is ``EXPLAIN QUERY PLAN``'s. On PostgreSQL the planner weighs the
statistics of the moment, and on a test's few rows a full scan or a sort is often the cheaper
plan, so the plan is asked with ``enable_seqscan`` and ``enable_sort`` off: both then cost so
much that PostgreSQL takes them only when no index can do the job, and what is left in the plan
is what no statistics would avoid. (A queue read ordered by ``completed_at IS NULL`` then
``skip_count``... was sorted there: ``IS NULL`` is not an equality to PostgreSQL, so an index
on ``completed_at, skip_count, ...`` does not give that order; SQLite's plan did not show it.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from django.db import connection, transaction

GROWING_TABLES = ("annotations_annotation", "annotations_revision", "annotations_assignment")
SQLITE_SORTS = ("USE TEMP B-TREE FOR ORDER BY", "USE TEMP B-TREE FOR RIGHT PART OF ORDER BY")


def _selects(queries: list[dict[str, str]]) -> list[str]:
    return [query["sql"] for query in queries if query["sql"].startswith("SELECT")]


def _sqlite_plan(sql: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
        return [row[-1] for row in cursor.fetchall()]


def _postgresql_plan(sql: str) -> dict[str, Any]:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
        (row,) = cursor.fetchall()
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    return plan[0]["Plan"]


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _growing(node: dict[str, Any]) -> bool:
    """Whether a growing table is read under ``node``."""
    return any(n.get("Relation Name") in GROWING_TABLES for n in _nodes(node))


def _findings(
    queries: list[dict[str, str]],
    sqlite: Callable[[str, list[str]], list[str]],
    postgresql: Callable[[dict[str, Any]], list[str]],
) -> list[str]:
    """``finding  <-  query`` for every captured SELECT: ``sqlite(sql, plan lines)`` or
    ``postgresql(plan)`` names what is wrong in its plan (none on other databases)."""
    found = []
    for sql in _selects(queries):
        if connection.vendor == "sqlite":
            lines = sqlite(sql, _sqlite_plan(sql))
        elif connection.vendor == "postgresql":
            lines = postgresql(_postgresql_plan(sql))
        else:
            lines = []
        found += [f"{line}  <-  {sql[:160]}" for line in lines]
    return found


def full_scans(queries: list[dict[str, str]]) -> list[str]:
    """The plan lines of the captured ``queries`` that read a growing table end to end.

    SQLite: ``SCAN t`` (with or without a covering index) visits every row; ``SEARCH t USING
    INDEX`` visits only the matching ones. PostgreSQL: a ``Seq Scan`` of t.
    """
    return _findings(
        queries,
        sqlite=lambda sql, plan: [
            line
            for line in plan
            if line.startswith("SCAN") and any(t in line for t in GROWING_TABLES)
        ],
        postgresql=lambda plan: [
            f"Seq Scan on {node['Relation Name']}"
            for node in _nodes(plan)
            if node["Node Type"] == "Seq Scan" and node["Relation Name"] in GROWING_TABLES
        ],
    )


def sorted_reads(queries: list[dict[str, str]]) -> list[str]:
    """The captured queries for the first rows of a growing table in some order (``ORDER BY
    ... LIMIT n``) that the database answers by sorting: it reads every matching row to return
    the first ones, where an index in that order would read just those.

    SQLite: ``USE TEMP B-TREE FOR ORDER BY`` (or its ``RIGHT PART``: the rows of each leading
    group) in a query ending in ``LIMIT``. PostgreSQL: a ``Sort`` right under a ``Limit``, in
    the query or any of its subqueries, over a growing table.
    """
    return _findings(
        queries,
        sqlite=lambda sql, plan: [
            line
            for line in plan
            if line in SQLITE_SORTS
            and sql.split()[-2] == "LIMIT"
            and any(f'FROM "{t}"' in sql for t in GROWING_TABLES)
        ],
        postgresql=lambda plan: [
            f"Limit over {child['Node Type']}: {child.get('Sort Key')}"
            for node in _nodes(plan)
            if node["Node Type"] == "Limit"
            for child in node.get("Plans", [])
            if child["Node Type"] in ("Sort", "Incremental Sort") and _growing(child)
        ],
    )


def orm_built(monkeypatch: Any) -> list[str]:
    """The compiler class of every statement the ORM builds from now (appended as they run);
    statements run from SQL built once (:mod:`core.compiled_queries`) are not in it."""
    from django.db.models.sql import compiler

    built: list[str] = []
    for name in ("SQLCompiler", "SQLInsertCompiler", "SQLUpdateCompiler"):  # their own
        cls = getattr(compiler, name)
        execute = cls.__dict__["execute_sql"]

        def counted(self: Any, *args: Any, _execute: Any = execute, **kwargs: Any) -> Any:
            built.append(type(self).__name__)
            return _execute(self, *args, **kwargs)

        monkeypatch.setattr(cls, "execute_sql", counted)
    return built
