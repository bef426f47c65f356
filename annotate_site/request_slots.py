"""ASGI middleware that lets at most ``WEB_THREADS`` requests of a process run their view code.

Django's ASGI handler runs each request's synchronous code (middleware, view) on a thread of
its own, as many at once as requests are in flight. The GIL lets one of them compute at a time,
so 32 requests in one process ran 32 threads that each held a database connection and took
turns: none finished sooner, and the PostgreSQL pool ran dry (``PoolTimeout``, 503). Here a
request waits for a slot in the event loop (a cheap coroutine, first come first served) once
its body has arrived, and holds it until its response has been sent, or until a streaming
response sends its first chunk (a slow download holds none); bodies still streaming in hold
none. The pool is sized to the slots (``annotate_site.settings``), so a request that
has a slot always finds a connection.
"""

from __future__ import annotations

import asyncio

from annotate_site.body_limit import ASGIApp, Message, Receive, Scope, Send


class RequestSlots:
    """Wrap an ASGI application so at most ``slots`` HTTP requests run it past their body."""

    def __init__(self, app: ASGIApp, *, slots: int) -> None:
        self.app = app
        self.slots = slots
        self._semaphores: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if loop not in self._semaphores:
            self._semaphores[loop] = asyncio.Semaphore(self.slots)
        return self._semaphores[loop]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.slots <= 0:
            return await self.app(scope, receive, send)
        semaphore = self._semaphore()
        holding = False

        async def receive_then_wait() -> Message:
            nonlocal holding
            message = await receive()
            body_done = message["type"] == "http.request" and not message.get("more_body")
            if body_done and not holding:
                await semaphore.acquire()
                holding = True
            return message

        async def send_then_release(message: Message) -> None:
            nonlocal holding
            await send(message)
            # a body that streams has left the view's thread (Django consumes a synchronous
            # iterator before the first chunk): a slow download holds no slot
            if holding and message["type"] == "http.response.body" and message.get("more_body"):
                holding = False
                semaphore.release()

        try:
            await self.app(scope, receive_then_wait, send_then_release)
        finally:
            if holding:
                semaphore.release()
