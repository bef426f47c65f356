"""The site's answer to a request that failed: 503 while the database is away, else 500.

Django hands every uncaught exception (from a view, a DRF view whose handler gave up, or a
middleware such as the session or sign-in lookup) to ``handler500``; here a lost or refused
database connection becomes a clean *503 Service Unavailable* with ``Retry-After``, as JSON for
API clients and as a page for browsers, instead of the generic error page. The write was inside
a transaction, so nothing of it was stored; the next request opens a new connection.
"""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.views.defaults import server_error as default_server_error

RETRY_AFTER_SECONDS = 5
UNAVAILABLE = "The database is unavailable for a moment; nothing was stored. Try again shortly."


def _wants_json(request: HttpRequest) -> bool:
    return request.path.startswith("/api/") or "application/json" in request.headers.get(
        "Accept", ""
    )


def server_error(request: HttpRequest, template_name: str = "500.html") -> HttpResponse:
    """``handler500``: 503 for a database that cannot be reached, Django's 500 otherwise."""
    if not isinstance(sys.exc_info()[1], OperationalError | InterfaceError):
        return default_server_error(request, template_name)
    if _wants_json(request):
        response: HttpResponse = JsonResponse({"detail": UNAVAILABLE}, status=503)
    else:  # rendered without a request context: that would ask the database for the user
        response = HttpResponse(loader.get_template("503.html").render(), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
