"""Query-plan checks for hot paths: no full scan of a table that grows with the study."""

from __future__ import annotations

from django.db import connection

GROWING_TABLES = ("annotations_annotation", "annotations_revision", "annotations_assignment")


def full_scans(queries: list[dict[str, str]]) -> list[str]:
    """The SQLite plan lines of the captured ``queries`` that read a growing table end to end.

    ``SCAN t`` (with or without a covering index) visits every row; ``SEARCH t USING INDEX``
    visits only the matching ones. Empty on other databases.
    """
    if connection.vendor != "sqlite":
        return []
    scans = []
    with connection.cursor() as cursor:
        for query in queries:
            if not query["sql"].startswith("SELECT"):
                continue
            cursor.execute(f"EXPLAIN QUERY PLAN {query['sql']}")
            scans += [
                f"{row[-1]}  <-  {query['sql'][:160]}"
                for row in cursor.fetchall()
                if row[-1].startswith("SCAN") and any(t in row[-1] for t in GROWING_TABLES)
            ]
    return scans
