"""ASGI middleware that refuses oversized request bodies before anything reads them.

Django reads a request's whole body (into memory, then a temporary file) before it routes or
authenticates it, and its own limits apply once the body has been read; a server that parses
``multipart/form-data`` itself (daphne) did so in its event loop, so one anonymous 50 MB POST
stalled every request of the process. Here, in front of Django:

- a ``Content-Length`` above the limit is answered with ``413`` at once, unread;
- a body without a length (chunked) is counted as it streams through; past the limit Django
  is told the client went away (it stops reading and answers nothing) and the client gets
  ``413``. The response closes the connection: the rest of the body is never read.

The limit is :data:`settings.ANONYMOUS_BODY_MAX_BYTES` (256 KiB) for a request with neither a
session cookie nor an ``Authorization`` header (signing in, registering, a participant's
consent), else :data:`settings.BODY_MAX_BYTES`: the largest upload the studio accepts plus room
for the form around it. The cookie is not checked here (that needs the database): a forged one
buys the larger limit, and the body then streams to a temporary file, not into memory.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

REFUSAL = b"Request body too large.\n"


def body_limit(scope: Scope) -> int:
    """The largest body in bytes the request may send (see the module docstring)."""
    cookie_name = settings.SESSION_COOKIE_NAME.encode()
    for name, value in scope.get("headers", ()):
        if name == b"authorization" or (name == b"cookie" and cookie_name + b"=" in value):
            return settings.BODY_MAX_BYTES
    return settings.ANONYMOUS_BODY_MAX_BYTES


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return int(value) if value.strip().isdigit() else None
    return None


async def _refuse(send: Send, limit: int) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(REFUSAL)).encode()),
                (b"connection", b"close"),
                (b"x-body-limit", str(limit).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": REFUSAL})


class BodyLimit:
    """Wrap an ASGI application so HTTP bodies over :func:`body_limit` are refused unread."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = body_limit(scope)
        length = _content_length(scope)
        if length is not None and length > limit:
            return await _refuse(send, limit)
        received = 0
        over = False
        started = False

        async def counted_receive() -> Message:
            nonlocal received, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        await self.app(scope, counted_receive, watched_send)
        if over and not started:
            await _refuse(send, limit)
