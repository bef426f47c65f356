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


async def _slow_stream(scope, receive, send) -> None:
    """An ASGI app whose response streams for a while after its work is done (a download
    to a slow client: a video, an export)."""
    if scope["path"] == "/stream/":
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(5):
            await send({"type": "http.response.body", "body": b"x" * 10, "more_body": True})
            await asyncio.sleep(0.1)
        await send({"type": "http.response.body", "body": b""})
        return
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def test_a_streaming_body_gives_its_slot_back_once_it_streams() -> None:
    """A slot was held until the response had been sent: two slow downloads held both slots of
    a process and every answer behind them waited. The view's thread is done once the body
    streams (Django consumes a synchronous iterator before the first chunk)."""
    app = RequestSlots(_slow_stream, slots=1)

    async def scenario() -> float:
        download = asyncio.create_task(
            HttpCommunicator(app, "GET", "/stream/").get_response(timeout=10)
        )
        await asyncio.sleep(0.05)  # the download streams
        started = time.perf_counter()
        answer = await HttpCommunicator(app, "GET", "/answer/").get_response(timeout=10)
        took = time.perf_counter() - started
        assert answer["status"] == 200
        assert (await download)["body"] == b"x" * 50
        return took

    assert asyncio.run(scenario()) < 0.2  # not after the 0.5 s download
