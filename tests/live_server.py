"""pytest-django's live server with its requests bounded, so that its database pool suffices.

Django's live server (``ThreadedWSGIServer``) starts a thread per browser connection, up to six
a page and more with several pages open, and each thread's request holds a database
connection. Unbounded, the test process's PostgreSQL pool ran dry in the full pass (three
browser tests waited 5 s for a connection). Here at most :data:`REQUESTS` requests run at once
(the others wait their turn, as behind a web process's ``WEB_THREADS``), and the test process's
pool has that much room beside what the settings give its in-process web server
(``tests/conftest.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

#: Requests the live server runs at once.
REQUESTS = 4

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def bounded(app: WSGIApp, slots: threading.BoundedSemaphore) -> WSGIApp:
    """``app`` running at most as many requests at once as ``slots`` allows; a request's slot
    is given back when its response is closed (a streamed body still reads the database)."""

    def application(environ: dict[str, Any], start_response: Callable[..., Any]):
        slots.acquire()
        try:
            response = app(environ, start_response)
        except BaseException:
            slots.release()
            raise
        return _Releasing(response, slots.release)

    return application


class _Releasing:
    """A WSGI response that calls ``release`` once, when the server closes it."""

    def __init__(self, response: Iterable[bytes], release: Callable[[], None]) -> None:
        self._response = response
        self._release: Callable[[], None] | None = release

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._response)

    def close(self) -> None:
        try:
            close = getattr(self._response, "close", None)
            if close is not None:
                close()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()
