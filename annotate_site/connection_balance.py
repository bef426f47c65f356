"""Keep-alive connections spread evenly over the web processes that serve one port.

On Linux each web process listens on a socket of its own on the port (``SO_REUSEPORT``), and
the kernel gives each new connection to one of them by a hash of its addresses. A keep-alive
connection then stays where it landed for as long as the client holds it, and the shares come
out uneven: 64 benchmark connections split 26/38 or 40/24, 128 split 53/75, 4 split 3/1, each
for a whole run. Where a process is the bottleneck, a client of the larger share waits in a
longer queue, and behind a proxy that pools a few connections one process could get most of
the traffic. (On a slow 2-core machine, where the web processes were not the bottleneck, the
benchmarks' latency and rates did not show the difference: docs/benchmarks.md.)

Each web process writes how many HTTP connections it holds into a table it shares with the
others (a small file the supervisor creates, mapped into every web process's memory). A process
holding more than the mean rounded up answers the response it is about to send with
``Connection: close``; the client (a browser, a proxy's pool, an API client) opens a new
connection for its next request, which the kernel hashes afresh, to either process. The shares
converge within a few rounds of requests, two processes' to within one of each other (a
tolerance of one more left 3 of 4 connections, or 5 of 8, on one process); a balanced process
closes nothing. A process closes at most one connection every ``SHED_INTERVAL`` seconds: in a
burst of new connections a count is published only once its process has accepted them, and
until then the others read it low (unlimited, a burst of 64 connections cost 117 closes). A
closed connection costs the client one new TCP connection (on 127.0.0.1 or from a proxy beside
the studio, a fraction of a millisecond). Websockets are neither counted nor closed.
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Callable
from pathlib import Path

from annotate_site.body_limit import ASGIApp, Message, Receive, Scope, Send

SLOT_BYTES = 8  # one signed 64-bit count per web process
SHED_INTERVAL = 0.02  # seconds between two closes by one process (50 a second at most)


def create_table(path: Path, processes: int) -> None:
    """Create the shared table of ``processes`` counts, all zero, at ``path``."""
    path.write_bytes(bytes(SLOT_BYTES * processes))


class ConnectionBalance:
    """Wrap an ASGI application so this process sheds keep-alive connections beyond its share.

    ``table`` is the file :func:`create_table` made for ``processes`` web processes, of which
    this one is number ``slot`` (from 0). Until :meth:`attach` gives it the count of the
    process's HTTP connections it passes every message through unchanged.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        table: Path,
        slot: int,
        processes: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.clock = clock
        self._shed_at = -SHED_INTERVAL
        self.slot = slot
        self.processes = processes
        descriptor = os.open(table, os.O_RDWR)
        try:
            self._map = mmap.mmap(descriptor, SLOT_BYTES * processes)
        finally:
            os.close(descriptor)
        self._counts = memoryview(self._map).cast("q")
        self._held: Callable[[], int] | None = None

    def attach(self, held: Callable[[], int]) -> None:
        """Count this process's open HTTP connections with ``held`` from now on."""
        self._held = held
        self.publish()

    def publish(self) -> int:
        """Write this process's count into its slot (the web process also does it as each
        connection opens or closes, so the others read it once a connection is accepted or
        gone); the count."""
        held = self._held() if self._held is not None else 0
        self._counts[self.slot] = held
        return held

    def over_share(self) -> bool:
        """Whether this process holds more than the mean rounded up (``n * mine > total + n
        - 1``) and closed none in the last ``SHED_INTERVAL`` seconds: then it closes this one."""
        if self._held is None:
            return False
        mine, now = self.publish(), self.clock()
        if mine * self.processes <= sum(self._counts) + self.processes - 1:
            return False
        if now - self._shed_at < SHED_INTERVAL:
            return False
        self._shed_at = now
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_balanced(message: Message) -> None:
            if message["type"] == "http.response.start" and self.over_share():
                headers = [*message.get("headers", ()), (b"connection", b"close")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_balanced)
