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
after. ``request_started``, building the request and closing a response held in memory go into
the same handover (Django made each a handover of its own: three per request, and the
signal's ``asyncio.gather`` calls), so a request crosses to its thread once. Reading the body
stays Django's, and so does sending a streaming response while listening for the client to
leave.

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

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import IO, Any

import django
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import FileResponse, HttpResponseBase
from django.urls import set_script_prefix


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

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Django's ``handle`` with one handover for a response held in memory: its body read
        in the event loop, then :meth:`respond` on the request's thread, then sent. A
        streaming response is sent as Django sends it (a disconnect stops it), then closed
        on the request's thread."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        try:
            response = await sync_to_async(self.respond, thread_sensitive=True)(scope, body_file)
            if response.streaming:
                await self._stream(response, receive, send)
            else:
                await self.send_response(response, send)
        finally:
            body_file.close()

    def respond(self, scope: dict[str, Any], body_file: IO[bytes]) -> HttpResponseBase:
        """On the request's thread: ``request_started``, the request, :meth:`get_response`
        (middleware, view, error logging) and, unless the response streams, its closing
        (``request_finished``: the database connection goes back before the body is sent).
        Django's handler made each of the signal, the response and the closing a handover
        of its own, the signal with two ``asyncio.gather`` around it."""
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, response = self.create_request(scope, body_file)
        if request is not None:
            response = self.get_response(request)
        assert response is not None  # create_request gives a request or the error's response
        # the sender of request_finished
        response._handler_class = self.__class__  # type: ignore[attr-defined]
        if isinstance(response, FileResponse):
            response.block_size = self.chunk_size  # the server chunks the socket writes
        if not response.streaming:
            response.close()
        return response

    async def _stream(self, response: HttpResponseBase, receive: Any, send: Any) -> None:
        """Send a streaming response until it ends or the client leaves (Django's
        ``listen_for_disconnect`` beside it), then close it on the request's thread."""
        sending = asyncio.create_task(self.send_response(response, send))
        listening = asyncio.create_task(self.listen_for_disconnect(receive))
        await asyncio.wait([listening, sending], return_when=asyncio.FIRST_COMPLETED)
        for task in (listening, sending):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, RequestAborted):
                await task
        await sync_to_async(response.close, thread_sensitive=True)()


def get_asgi_application() -> SyncMiddlewareASGIHandler:
    """What :func:`django.core.asgi.get_asgi_application` does, with this handler."""
    django.setup(set_prefix=False)
    return SyncMiddlewareASGIHandler()
