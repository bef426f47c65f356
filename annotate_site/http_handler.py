"""Django's ASGI handler with the middleware run synchronously, on threads kept for reuse.

Django's own ``ASGIHandler`` runs the middleware in async mode. Most middleware (Django's,
django-csp's, WhiteNoise's, django-htmx's, django-axes') are synchronous code behind
``MiddlewareMixin``, whose async mode runs each ``process_request`` and ``process_response``
through ``sync_to_async``: about 16 handovers between the event loop and the request's thread
for one API answer, each a future, a queue and two thread wake-ups. The studio's views are
synchronous too, so here the whole chain is built as under WSGI and run in one ``sync_to_async``
call on the request's thread (the same thread-sensitive thread Django would use, so database
connections and ``request_finished`` behave as before). Measured through the ASGI application
in process: an API answer with ``include_next`` 5.4 ms of CPU before, see ``docs/benchmarks.md``
after. Reading the body, streaming responses and disconnect handling stay Django's.

Django's handler also gave each request a thread of its own (``ThreadSensitiveContext()``
makes a one-thread executor at the request's first handover) and, at its end, a second thread
to join the first: two threads started per request. Here a request takes a one-thread executor
from :class:`RequestThreads`, kept from earlier requests, and gives it back when it ends
(``ThreadSensitiveContext(executor=...)``, asgiref's API for an executor the caller owns),
taken at the request's first handover, once its body has arrived and it holds one of
``WEB_THREADS`` slots (:mod:`annotate_site.request_slots`): so ``WEB_THREADS`` threads serve
the process's requests, not one per client waiting. The request's code still runs on one
thread for the whole request (its database connection, ``request_started`` and
``request_finished`` on that thread, as before).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

import django
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponseBase


class RequestThreads:
    """One-thread executors lent to requests, one per request in flight, kept for the next.

    At most ``keep`` idle executors are kept (more are shut down when given back); a request
    that finds none idle gets a new one, so a burst is never made to wait here (the number
    of requests running their code at once is bounded by
    :class:`~annotate_site.request_slots.RequestSlots`).
    """

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._idle: list[ThreadPoolExecutor] = []
        self._lock = threading.Lock()

    def lend(self) -> ThreadPoolExecutor:
        """An idle executor, or a new one."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        """Keep ``executor`` for the next request, or shut it down if ``keep`` are idle. Its
        thread may still be finishing a request whose client left; the next request's work
        queues behind it."""
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append(executor)
                return
        executor.shutdown(wait=False)


class LentThread(Executor):
    """The executor of one request: its first task borrows a one-thread executor from
    ``threads``, every later one goes to the same; :meth:`give_back` returns it. A request
    that ends before any task (a refused body) borrows none."""

    def __init__(self, threads: RequestThreads) -> None:
        self.threads = threads
        self._lent: ThreadPoolExecutor | None = None

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run ``fn`` on the request's thread (called from the event loop only)."""
        if self._lent is None:
            self._lent = self.threads.lend()
        return self._lent.submit(fn, *args, **kwargs)

    def give_back(self) -> None:
        """Return the borrowed executor, if any."""
        if self._lent is not None:
            self.threads.give_back(self._lent)
            self._lent = None


class SyncMiddlewareASGIHandler(ASGIHandler):
    """:class:`~django.core.handlers.asgi.ASGIHandler` whose middleware chain is synchronous
    and runs in one ``sync_to_async`` call per request, on a thread kept for reuse."""

    def __init__(self) -> None:
        super().__init__()
        self.threads = RequestThreads(keep=settings.WEB_THREADS)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Django's entry point, with the request's thread lent by :attr:`threads`."""
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = LentThread(self.threads)
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            executor.give_back()

    def load_middleware(self, is_async: bool = False) -> None:
        """The synchronous chain, whatever ``is_async`` (an async view in it would be run
        with ``async_to_sync``, as under WSGI; the studio has none)."""
        super().load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        """:meth:`get_response` (middleware, view, error logging) on the request's thread."""
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)


def get_asgi_application() -> SyncMiddlewareASGIHandler:
    """What :func:`django.core.asgi.get_asgi_application` does, with this handler."""
    django.setup(set_prefix=False)
    return SyncMiddlewareASGIHandler()
