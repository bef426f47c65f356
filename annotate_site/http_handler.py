"""Django's ASGI handler with the middleware run synchronously: one thread hop per request.

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
"""

from __future__ import annotations

import django
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponseBase


class SyncMiddlewareASGIHandler(ASGIHandler):
    """:class:`~django.core.handlers.asgi.ASGIHandler` whose middleware chain is synchronous
    and runs in one ``sync_to_async`` call per request."""

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
