"""One web process of the studio: uvicorn serving :mod:`annotate_site.asgi` on a listening
socket its supervisor opened (``python -m annotate_site.webserver --fd N``).

``annotation-studio serve`` and ``prod`` (:mod:`annotate_site.cli`) run ``WEB_CONCURRENCY`` of
these on the port, on Linux each on a socket of its own (``SO_REUSEPORT``: the kernel spreads
new connections evenly), elsewhere on one shared socket; a process that dies or restarts
leaves the port served by the others. A process holding more than its share of the port's
keep-alive connections closes the next ones it answers (:mod:`annotate_site.connection_balance`).
uvicorn (httptools, uvloop) streams request bodies to the application with flow control, so a
large upload waits in the socket, not in memory, and :mod:`annotate_site.body_limit` refuses
an oversized one before it is read. The loop's default executor (the websockets' renders) has
``ASYNC_THREADS`` threads, as the database pool expects (``annotate_site.settings``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from annotate_site.connection_balance import ConnectionBalance

ASGI_APPLICATION = "annotate_site.asgi:application"
Wrapper = Callable[[Any], Callable[..., Any]]


def _loop_factory() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # uvloop has no Windows build: asyncio's own loop serves too
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def serve(
    listener: socket.socket,
    *,
    proxy_headers: bool = False,
    wrap: Wrapper | None = None,
    share: Share | None = None,
) -> None:
    """Serve the studio on ``listener`` until SIGTERM or SIGINT.

    ``wrap`` puts a layer around the application (the browser tests serve the static files
    with Django's handler). ``share``: this process is one of several on the port, and keeps
    no more than its share of the keep-alive connections
    (:mod:`annotate_site.connection_balance`). From a thread other than the main one (the
    browser tests' server) uvicorn leaves the signals alone, and the server serves for as long
    as the process lives.
    """
    balance: ConnectionBalance | None = None
    if share is not None:
        inner = wrap

        def wrap(app: Any) -> Callable[..., Any]:
            nonlocal balance
            balance = ConnectionBalance(inner(app) if inner else app, **share._asdict())
            return balance

    class Protocol(HttpToolsProtocol):
        """uvicorn's HTTP protocol, publishing this process's count as connections come and go
        (a count read a second late let a process shed a whole burst)."""

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if balance is not None:
                balance.publish()

        def connection_lost(self, exc: Exception | None) -> None:
            super().connection_lost(exc)
            if balance is not None:
                balance.publish()

    config = uvicorn.Config(
        _application(wrap),
        http=Protocol,
        ws="websockets-sansio",
        lifespan="off",
        access_log=False,
        # the TLS proxy on 127.0.0.1 says who the client is and that it spoke HTTPS
        proxy_headers=proxy_headers,
        forwarded_allow_ips="127.0.0.1",
        timeout_graceful_shutdown=10,
        server_header=False,
    )
    config.load()  # imports the application, so Django's settings are ready below
    from django.conf import settings

    async def main() -> None:
        executor = ThreadPoolExecutor(settings.ASYNC_THREADS, thread_name_prefix="asgi")
        asyncio.get_running_loop().set_default_executor(executor)
        server = uvicorn.Server(config)
        if balance is not None:
            connections = server.server_state.connections
            balance.attach(lambda: sum(isinstance(c, HttpToolsProtocol) for c in connections))
        await server.serve(sockets=[listener])

    with asyncio.Runner(loop_factory=_loop_factory) as runner:
        runner.run(main())


class Share(NamedTuple):
    """This web process's place among those serving one port: the table of their connection
    counts (:func:`annotate_site.connection_balance.create_table`), its slot, their number."""

    table: Path
    slot: int
    processes: int


def preload() -> None:
    """Import the application and every view its URLs route to, then freeze what that
    allocated (:func:`gc.freeze`): a web process does this before it serves.

    A loaded web process tracks about 174,000 objects (modules, classes, templates, URL
    patterns) that live as long as it does, and each full collection scanned them all: 94 ms
    with the GIL held, every request waiting. Frozen, the collector skips them (32 clients,
    alternated runs: p99 212-300 -> 163-231 ms on the page, 173-227 -> 108-134 ms on the
    classic API loop; the rates were within the noise). Not done by :func:`serve`, which the
    browser tests run in a thread of their own process.
    """
    from django.urls import get_resolver

    import annotate_site.asgi  # noqa: F401 (Django set up, the application built)

    get_resolver().url_patterns  # noqa: B018 (imports the URL conf and every view now)
    gc.freeze()


def _application(wrap: Wrapper | None) -> str | Callable[..., Any]:
    """The application uvicorn imports, or ``wrap`` around it, imported here."""
    if wrap is None:
        return ASGI_APPLICATION
    from annotate_site.asgi import application

    return wrap(application)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m annotate_site.webserver")
    parser.add_argument("--fd", type=int, required=True, help="an inherited listening socket")
    parser.add_argument(
        "--proxy-headers", action="store_true", help="trust X-Forwarded-* from 127.0.0.1"
    )
    parser.add_argument(
        "--share",
        nargs=3,
        metavar=("TABLE", "SLOT", "PROCESSES"),
        help="one of PROCESSES web processes on the port, number SLOT (from 0), their "
        "connection counts in the file TABLE",
    )
    args = parser.parse_args(argv)
    share = None
    if args.share:
        table, slot, processes = args.share
        share = Share(Path(table), int(slot), int(processes))
    preload()
    serve(socket.socket(fileno=args.fd), proxy_headers=args.proxy_headers, share=share)


if __name__ == "__main__":
    main()
