"""The ASGI handler runs a request's middleware and view in one handover to its thread.

Django's ASGIHandler ran each synchronous middleware's request and response halves through
``sync_to_async``: an API answer crossed between the event loop and its thread about 16 times.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from asgiref import sync
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator
from django.core.handlers.asgi import ASGIHandler
from django.core.signals import request_finished, request_started

from annotate_site.http_handler import RequestThreads, SyncMiddlewareASGIHandler
from tests.factories import running_study


@pytest.fixture
def handovers(monkeypatch) -> list[str]:
    """The name of every function handed from the event loop to a thread (``sync_to_async``)."""
    seen: list[str] = []
    original = sync.SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        seen.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(sync.SyncToAsync, "__call__", counted)
    return seen


def next_item(application, study, token: str) -> tuple[int, dict]:
    communicator = HttpCommunicator(
        application,
        "GET",
        f"/api/studies/{study.pk}/next/",
        headers=[(b"authorization", f"Token {token}".encode()), (b"host", b"testserver")],
    )
    response = async_to_sync(communicator.get_response)(timeout=20)
    return response["status"], json.loads(response["body"])


@pytest.mark.django_db(transaction=True)
def test_a_request_is_handed_to_its_thread_once(handovers) -> None:
    from knox.models import AuthToken

    study, (annotator, *_) = running_study(n_items=2, n_annotators=1)
    token = AuthToken.objects.create(user=annotator)[1]
    status, body = next_item(SyncMiddlewareASGIHandler(), study, token)
    assert status == 200
    assert body["progress"] == {"done": 0, "total": 2, "percent": 0}
    # the request_started receivers, the middleware and the view, and the closing of a
    # response held in memory: one handover (before: three, the signal and the closing each
    # a handover of their own, and the signal's two gathers)
    assert handovers == ["SyncMiddlewareASGIHandler.respond"], handovers
    handovers.clear()
    status, _ = next_item(ASGIHandler(), study, token)  # Django's own, for comparison
    assert status == 200
    assert len(handovers) > 10, handovers


@pytest.mark.django_db(transaction=True)
def test_the_middleware_still_does_its_work() -> None:
    """Sessions, CSRF and the security headers pass through the synchronous chain."""
    communicator = HttpCommunicator(
        SyncMiddlewareASGIHandler(), "GET", "/accounts/login/", headers=[(b"host", b"testserver")]
    )
    response = async_to_sync(communicator.get_response)(timeout=20)
    assert response["status"] == 200
    headers = {name.decode().lower(): value.decode() for name, value in response["headers"]}
    assert "csrftoken=" in headers.get("set-cookie", "")
    assert headers["x-frame-options"] == "DENY"
    assert "content-security-policy" in headers


@pytest.fixture
def request_threads():
    """The thread of every ``request_started`` and ``request_finished``, in order."""
    seen: list[tuple[str, threading.Thread]] = []

    def started(**kwargs) -> None:
        seen.append(("started", threading.current_thread()))

    def finished(**kwargs) -> None:
        seen.append(("finished", threading.current_thread()))

    request_started.connect(started, weak=False)
    request_finished.connect(finished, weak=False)
    yield seen
    request_started.disconnect(started)
    request_finished.disconnect(finished)


@pytest.mark.django_db(transaction=True)
def test_requests_reuse_one_thread_instead_of_starting_one_each(request_threads) -> None:
    """Django's handler starts a thread for each request (and another to join it); ours lends
    a kept one. A request still begins and ends on its own thread (its connection closes
    there)."""
    from knox.models import AuthToken

    study, (annotator, *_) = running_study(n_items=2, n_annotators=1)
    token = AuthToken.objects.create(user=annotator)[1]
    ours = SyncMiddlewareASGIHandler()
    for _ in range(4):
        assert next_item(ours, study, token)[0] == 200
    assert [event for event, _ in request_threads] == ["started", "finished"] * 4
    threads = {id(thread) for _, thread in request_threads}
    assert len(threads) == 1
    assert request_threads[0][1] is not threading.main_thread()
    assert request_threads[0][1].is_alive()  # kept for the next request

    request_threads.clear()
    django_s = ASGIHandler()
    for _ in range(4):
        assert next_item(django_s, study, token)[0] == 200
    pairs = [request_threads[i : i + 2] for i in range(0, 8, 2)]
    assert all(start[1] is end[1] for start, end in pairs)
    assert len({id(start[1]) for start, _ in pairs}) == 4  # a new thread per request


def test_request_threads_keep_at_most_their_number_idle() -> None:
    threads = RequestThreads(keep=2)
    lent = [threads.lend() for _ in range(3)]
    assert len({id(executor) for executor in lent}) == 3  # none waits for another
    names = [executor.submit(lambda: threading.current_thread().name).result() for executor in lent]
    for executor in lent:
        threads.give_back(executor)
    again = [threads.lend() for _ in range(3)]
    assert sum(any(e is old for old in lent) for e in again) == 2  # two kept, one new
    assert not any(executor._shutdown for executor in again)
    assert lent[2]._shutdown is True  # the third given back was shut down
    assert all(name.startswith("request") for name in names)


class _Streaming(SyncMiddlewareASGIHandler):
    """The handler with a view that streams ``parts`` and records how far it got and where
    it was closed."""

    def __init__(self, parts: int) -> None:
        super().__init__()
        self.parts = parts
        self.sent: list[int] = []
        self.closed_on: list[threading.Thread] = []

    def get_response(self, request):
        from django.http import StreamingHttpResponse

        async def chunks():  # a synchronous iterator Django would read whole first
            try:
                for part in range(self.parts):
                    self.sent.append(part)
                    yield f"{part}\n".encode()
                    await asyncio.sleep(0)
            finally:
                self.closed_on.append(threading.current_thread())

        return StreamingHttpResponse(chunks())


async def _stream(application, leave_after: int | None = None) -> tuple[int, bytes]:
    """GET a streaming response through ``application``: the status and the body, or what
    came of it before the client left after ``leave_after`` parts."""
    communicator = HttpCommunicator(
        application, "GET", "/stream/", headers=[(b"host", b"testserver")]
    )
    await communicator.send_input({"type": "http.request", "body": b""})
    status = (await communicator.receive_output(timeout=10))["status"]
    body, parts = b"", 0
    while True:
        message = await communicator.receive_output(timeout=10)
        body += message.get("body", b"")
        parts += 1
        if parts == leave_after:
            await communicator.send_input({"type": "http.disconnect"})
            break
        if not message.get("more_body"):
            break
    await communicator.wait(timeout=10)
    return status, body


def test_a_streaming_response_is_sent_whole_and_closed_on_its_thread(request_threads) -> None:
    application = _Streaming(parts=3)
    assert async_to_sync(_stream)(application) == (200, b"0\n1\n2\n")
    assert [event for event, _ in request_threads] == ["started", "finished"]
    assert request_threads[0][1] is request_threads[1][1]  # began and ended on one thread
    assert request_threads[0][1] is not threading.main_thread()


def test_a_client_that_leaves_stops_a_streaming_response(request_threads) -> None:
    application = _Streaming(parts=10**9)
    status, body = async_to_sync(_stream)(application, leave_after=1)
    assert status == 200
    assert body.startswith(b"0\n")
    assert len(application.closed_on) == 1  # the generator was closed, not run to its end
    assert len(application.sent) < 10**6
    assert [event for event, _ in request_threads] == ["started", "finished"]
