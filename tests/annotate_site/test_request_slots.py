"""At most WEB_THREADS requests of a process run their view code (and hold a connection) at once."""

from __future__ import annotations

import asyncio
import threading
import time

from channels.testing import HttpCommunicator
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponse
from django.urls import path

from annotate_site.request_slots import RequestSlots

running: list[int] = [0, 0]  # now, most at once
guard = threading.Lock()


def slow_view(request: HttpRequest) -> HttpResponse:
    """A view that works for a moment on its thread (each such thread may hold a database
    connection: the pool must have one for each; counted here without touching the pool)."""
    with guard:
        running[0] += 1
        running[1] = max(running)
    try:
        time.sleep(0.05)
    finally:
        with guard:
            running[0] -= 1
    return HttpResponse("ok")


urlpatterns = [path("slow/", slow_view)]


def _most_at_once(app, clients: int) -> int:
    running[:] = [0, 0]

    async def burst() -> list[dict]:
        return await asyncio.gather(
            *(
                HttpCommunicator(app, "GET", "/slow/").get_response(timeout=60)
                for _ in range(clients)
            )
        )

    responses = asyncio.run(burst())
    assert {response["status"] for response in responses} == {200}
    return running[1]


def test_32_concurrent_requests_run_their_views_four_at_a_time(settings) -> None:
    """Django alone runs each request's view on a thread of its own: 32 at once wanted 32
    connections from a pool of 8 (PoolTimeout, 503). Behind the slots only ``slots`` do."""
    settings.ROOT_URLCONF = __name__
    settings.ALLOWED_HOSTS = ["*"]
    assert _most_at_once(ASGIHandler(), 32) > 8  # what the pool of 8 ran dry under
    assert _most_at_once(RequestSlots(ASGIHandler(), slots=4), 32) == 4
