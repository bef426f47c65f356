"""Query-plan checks for hot paths: no full scan of a table that grows with the study, and no
sort of its rows (reading the first of them in order must not read them all)."""

from __future__ import annotations

from django.db import connection

GROWING_TABLES = ("annotations_annotation", "annotations_revision", "annotations_assignment")


def _plan_lines(queries: list[dict[str, str]]) -> list[tuple[str, str]]:
    """``(plan line, query)`` of every SELECT among the captured ``queries`` (SQLite only)."""
    if connection.vendor != "sqlite":
        return []
    lines = []
    with connection.cursor() as cursor:
        for query in queries:
            if not query["sql"].startswith("SELECT"):
                continue
            cursor.execute(f"EXPLAIN QUERY PLAN {query['sql']}")
            lines += [(row[-1], query["sql"]) for row in cursor.fetchall()]
    return lines


def full_scans(queries: list[dict[str, str]]) -> list[str]:
    """The SQLite plan lines of the captured ``queries`` that read a growing table end to end.

    ``SCAN t`` (with or without a covering index) visits every row; ``SEARCH t USING INDEX``
    visits only the matching ones. Empty on other databases.
    """
    return [
        f"{line}  <-  {sql[:160]}"
        for line, sql in _plan_lines(queries)
        if line.startswith("SCAN") and any(t in line for t in GROWING_TABLES)
    ]


def sorted_reads(queries: list[dict[str, str]]) -> list[str]:
    """The captured queries for the first rows of a growing table in some order (``ORDER BY
    ... LIMIT n``) that SQLite answers by sorting (``USE TEMP B-TREE FOR ORDER BY``, or its
    ``RIGHT PART``: the rows of each leading group): it reads every matching row to return the
    first ones, where an index in that order would read just those. Empty elsewhere."""
    return [
        f"{line}  <-  {sql[:160]}"
        for line, sql in _plan_lines(queries)
        if line in ("USE TEMP B-TREE FOR ORDER BY", "USE TEMP B-TREE FOR RIGHT PART OF ORDER BY")
        and sql.split()[-2] == "LIMIT"
        and any(f'FROM "{t}"' in sql for t in GROWING_TABLES)
    ]
