"""The channel layer without Redis: in memory, with group messages shared by sibling processes.

``annotation-studio serve`` runs several web processes and a quality worker. Channels'
in-memory layer keeps each process's groups to itself, so a dashboard open on one web process
never heard of the figures the worker had just published. Here every process of one ``serve``
(the supervisor hands them the same private directory in ``STUDIO_CHANNEL_PEERS``) that has a
group member binds a Unix datagram socket named after its pid in that directory, read by its
event loop. ``group_send`` delivers to the local group as Channels does, then sends the group's
name and message as one datagram to every other socket in the directory; each receiver
delivers it to its own members. Nothing else runs: no broker, no polling; a datagram costs a
few microseconds and arrives within a millisecond.

Without ``STUDIO_CHANNEL_PEERS`` (one process: ``runserver``, the tests) it is Channels'
in-memory layer. Messages to one channel (``send``) stay in the process. A datagram that cannot
be delivered (the peer's queue full, a peer gone) is dropped: the studio's messages are
notices ("question 7 changed") and the next one carries the same news. With ``REDIS_URL`` the
Redis layer (:mod:`annotate_site.channel_layer`) is used instead and reaches every process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from pathlib import Path
from typing import Any

from channels.layers import InMemoryChannelLayer

logger = logging.getLogger(__name__)
DATAGRAM_MAX = 64 * 1024


class PeerChannelLayer(InMemoryChannelLayer):
    """Channels' in-memory layer whose ``group_send`` also reaches the processes that share
    ``peers_dir`` (see the module docstring)."""

    def __init__(self, peers_dir: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.peers_dir = Path(peers_dir) if peers_dir else None
        self._inbox: socket.socket | None = None
        self._deliveries: set[asyncio.Task] = set()

    async def group_add(self, group: str, channel: str) -> None:
        await super().group_add(group, channel)
        self._listen()

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await super().group_send(group, message)
        if self.peers_dir is not None:
            self._fan_out(group, message)

    def _listen(self) -> None:
        """Bind this process's socket and read it on the running loop (once)."""
        if self.peers_dir is None or self._inbox is not None:
            return
        path = self.peers_dir / str(os.getpid())
        inbox = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a socket left by a dead process whose pid came round again
        inbox.bind(str(path))
        inbox.setblocking(False)
        asyncio.get_running_loop().add_reader(inbox.fileno(), self._deliver)
        self._inbox = inbox

    def _deliver(self) -> None:
        """Hand every datagram waiting on the socket to the local group members."""
        assert self._inbox is not None
        while True:
            try:
                data = self._inbox.recv(DATAGRAM_MAX)
            except BlockingIOError:
                return
            try:
                group, message = json.loads(data)
            except ValueError:
                logger.warning("peer channel layer: unreadable datagram dropped")
                continue
            task = asyncio.ensure_future(InMemoryChannelLayer.group_send(self, group, message))
            self._deliveries.add(task)
            task.add_done_callback(self._deliveries.discard)

    def _fan_out(self, group: str, message: dict[str, Any]) -> None:
        """Send the group message to every other process's socket; drop what cannot go."""
        assert self.peers_dir is not None
        data = json.dumps([group, message]).encode()
        own = str(os.getpid())
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as out:
            out.setblocking(False)
            for entry in os.scandir(self.peers_dir):
                if entry.name == own:
                    continue
                try:
                    out.sendto(data, entry.path)
                except (ConnectionRefusedError, FileNotFoundError):
                    with contextlib.suppress(FileNotFoundError):  # its process is gone
                        os.unlink(entry.path)
                except OSError as exc:  # its queue is full: the next notice says the same
                    logger.warning("peer channel layer: %s not reached (%r)", entry.name, exc)
