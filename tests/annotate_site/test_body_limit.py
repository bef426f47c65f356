"""Oversized request bodies are refused before the application reads them."""

from __future__ import annotations

import asyncio

import pytest

from annotate_site.body_limit import BodyLimit


class ReadingApp:
    """An application that reads the whole body, as Django's handler does, then answers 200."""

    def __init__(self) -> None:
        self.called = False
        self.read = 0

    async def __call__(self, scope, receive, send) -> None:
        self.called = True
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # Django: RequestAborted, no response
            self.read += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def _post(headers: list[tuple[bytes, bytes]], chunks: list[bytes]) -> tuple[int, ReadingApp, int]:
    """Run one POST through BodyLimit; (status, the app, how many chunks the client sent)."""
    app = ReadingApp()
    pending = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    sent: list[dict] = []

    async def receive() -> dict:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/x/", "headers": headers}
    asyncio.run(BodyLimit(app)(scope, receive, send))
    return sent[0]["status"], app, len(chunks) - len(pending)


@pytest.fixture(autouse=True)
def _limits(settings) -> None:
    settings.ANONYMOUS_BODY_MAX_BYTES = 1000
    settings.BODY_MAX_BYTES = 5000


def test_an_announced_length_over_the_anonymous_limit_is_refused_unread() -> None:
    status, app, chunks_read = _post([(b"content-length", b"1001")], [b"x" * 1001])
    assert (status, app.called, chunks_read) == (413, False, 0)


def test_a_chunked_body_is_cut_once_it_passes_the_limit() -> None:
    status, app, chunks_read = _post([], [b"x" * 400] * 10)
    assert status == 413
    assert app.read == 800  # the third chunk passed 1000 bytes: the application never saw it
    assert chunks_read == 3


@pytest.mark.parametrize(
    "credentials",
    [(b"authorization", b"Token abc"), (b"cookie", b"csrftoken=x; sessionid=abc")],
)
def test_signed_in_requests_may_send_up_to_the_upload_limit(credentials) -> None:
    assert _post([credentials, (b"content-length", b"4000")], [b"x" * 4000])[0] == 200
    assert _post([credentials, (b"content-length", b"5001")], [b"x" * 5001])[0] == 413


def test_a_cookie_without_a_session_counts_as_anonymous() -> None:
    headers = [(b"cookie", b"csrftoken=x"), (b"content-length", b"4000")]
    assert _post(headers, [b"x" * 4000])[0] == 413
