"""What a pooled PostgreSQL connection costs a request to take: the studio's backend against
Django's pool check.

``DATABASE_URL=postgres://... python -m benchmarks.pool_checkout`` takes a connection from a
pool of one, runs ``SELECT 1`` on it and gives it back, as a request does, in interleaved
blocks for each backend within one process:

- ``studio``: ``annotate_site.postgresql``, which hands a pooled connection out after a poll of
  its socket (annotate_site/postgresql/base.py);
- ``Django, CONN_HEALTH_CHECKS``: Django's backend, whose pool sends an empty query before
  handing a connection out (the studio's setting before issue 22's twenty-second pass).

It prints, per request, the median of the blocks and their range: this process's CPU, the
PostgreSQL backend's CPU (read from ``/proc`` when the server runs on this machine), the wall
time, and the statements sent. Nothing is written to the database.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _server_ticks(pid: int) -> int | None:
    """User + system clock ticks of the server process ``pid``, if this machine runs it."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])


def _block(wrapper: Any, requests: int) -> tuple[float, float | None, float]:
    """CPU ms of this process, of the server (or None), and wall ms, per request."""
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    wrapper.close()
    ticks, cpu, wall = _server_ticks(pid), time.process_time(), time.perf_counter()
    for _ in range(requests):
        with wrapper.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        wrapper.close()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    after = _server_ticks(pid)
    server = None
    if ticks is not None and after is not None:
        server = (after - ticks) / os.sysconf("SC_CLK_TCK") / requests * 1000
    return cpu / requests * 1000, server, wall / requests * 1000


def statements_on_checkout(wrapper: Any) -> list[str]:
    """The statements ``wrapper`` sends to take a connection, before a request's own (the
    wrapper's connection given back after; tests/annotate_site/test_postgresql_backend.py)."""
    import psycopg

    sent: list[str] = []
    execute = psycopg.Connection.execute

    def recording(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(self, query, *args, **kwargs)

    psycopg.Connection.execute = recording  # type: ignore[method-assign]
    try:
        wrapper.ensure_connection()
    finally:
        psycopg.Connection.execute = execute  # type: ignore[method-assign]
    wrapper.close()
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=8, help="blocks per backend")
    parser.add_argument("--requests", type=int, default=2000, help="requests per block")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate_site.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.db import connections
    from django.db.backends.postgresql.base import DatabaseWrapper

    from annotate_site.postgresql.base import DatabaseWrapper as StudioWrapper

    settings = copy.deepcopy(connections["default"].settings_dict)
    settings["OPTIONS"]["pool"] = {"min_size": 1, "max_size": 1, "timeout": 5}
    wrappers: dict[str, DatabaseWrapper] = {
        "studio": StudioWrapper(copy.deepcopy(settings), alias="studio_pool"),
        "Django, CONN_HEALTH_CHECKS": DatabaseWrapper(
            {**settings, "CONN_HEALTH_CHECKS": True}, alias="django_pool"
        ),
    }
    blocks: dict[str, list[tuple[float, float | None, float]]] = {name: [] for name in wrappers}
    for wrapper in wrappers.values():  # warm: the pool opened, statements prepared
        _block(wrapper, 200)
    for _ in range(args.blocks):
        for name, wrapper in wrappers.items():
            blocks[name].append(_block(wrapper, args.requests))
    print(
        f"take a pooled connection, SELECT 1, give it back: per request, median of "
        f"{args.blocks} blocks of {args.requests} (range)"
    )
    print(f"{'backend':<28} {'CPU ms':<20} {'server CPU ms':<20} {'wall ms':<20} statements")

    def column(values: list[float | None]) -> str:
        if any(value is None for value in values):
            return f"{'-':<20}"
        known = [float(value) for value in values if value is not None]
        return f"{statistics.median(known):.3f} ({min(known):.3f}-{max(known):.3f})".ljust(20)

    for name, wrapper in wrappers.items():
        cpu, server, wall = zip(*blocks[name], strict=True)
        print(
            f"{name:<28} {column(list(cpu))} {column(list(server))} {column(list(wall))} "
            f"{len(statements_on_checkout(wrapper))}"
        )
        wrapper.close_pool()


if __name__ == "__main__":
    main()
