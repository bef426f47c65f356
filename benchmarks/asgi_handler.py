"""CPU of one request through the ASGI application, in process: the studio's handler against
Django's.

``python -m benchmarks.asgi_handler`` seeds a study on a fresh SQLite file, then sends
``GET /api/studies/<id>/next/`` (an annotator's token) through each handler in turn, in
interleaved blocks within one process and one event loop, and prints the process's CPU per
request (every thread: the event loop's and the request's), the median of the blocks and their
range. Interleaving keeps the machine's drift out of the comparison. No sockets, no server:
what differs is only the handler.

- ``studio``: :class:`annotate_site.http_handler.SyncMiddlewareASGIHandler`, one handover to
  the request's thread;
- ``studio, Django's handle``: the same middleware chain and kept threads, with Django's
  ``handle`` (``request_started``, the response and its closing each a handover: the studio's
  handler before issue 22's twenty-first pass);
- ``Django``: Django's own ``ASGIHandler`` (middleware in async mode, a thread per request).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.django_setup import setup_django


async def _request(application: Any, path: str, token: str) -> None:
    """One GET through ``application``; fails unless it answers 200."""
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "GET",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), (b"authorization", f"Token {token}".encode())],
        "client": ("127.0.0.1", 1),
        "server": ("localhost", 80),
    }
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    inbox.put_nowait({"type": "http.request", "body": b""})
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await application(scope, inbox.get, send)
    if sent[0]["status"] != 200:
        raise SystemExit(f"{path} answered {sent[0]['status']}")


async def _block(application: Any, path: str, token: str, requests: int) -> float:
    """CPU milliseconds per request over ``requests`` requests."""
    started = time.process_time()
    for _ in range(requests):
        await _request(application, path, token)
    return (time.process_time() - started) / requests * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=8, help="blocks per handler")
    parser.add_argument("--requests", type=int, default=150, help="requests per block")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as local:
        setup_django(Path(local), defaults={"ALLOWED_HOSTS": "localhost"}, fast_passwords=True)
        from asgiref.sync import sync_to_async
        from django.core.handlers.asgi import ASGIHandler
        from knox.models import AuthToken

        from annotate_site.http_handler import SyncMiddlewareASGIHandler
        from tests.factories import running_study

        class DjangoHandle(SyncMiddlewareASGIHandler):
            handle = ASGIHandler.handle  # type: ignore[assignment]

            async def get_response_async(self, request: Any) -> Any:
                return await sync_to_async(self.get_response, thread_sensitive=True)(request)

        study, (annotator, *_) = running_study(n_items=50, n_annotators=1)
        token = AuthToken.objects.create(user=annotator)[1]
        path = f"/api/studies/{study.pk}/next/"
        handlers = {
            "studio": SyncMiddlewareASGIHandler(),
            "studio, Django's handle": DjangoHandle(),
            "Django": ASGIHandler(),
        }
        blocks: dict[str, list[float]] = {name: [] for name in handlers}

        async def run() -> None:
            for application in handlers.values():  # warm: caches, threads, plans
                await _block(application, path, token, 20)
            for _ in range(args.blocks):
                for name, application in handlers.items():
                    blocks[name].append(await _block(application, path, token, args.requests))

        asyncio.run(run())
        print(f"GET {path}, CPU ms per request (median of {args.blocks} blocks, range)")
        for name, values in blocks.items():
            print(
                f"{name:<26} {statistics.median(values):6.3f}  "
                f"({min(values):.3f}-{max(values):.3f})"
            )


if __name__ == "__main__":
    main()
