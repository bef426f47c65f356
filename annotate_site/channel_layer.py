"""The Redis channel layer of the studio: channels-redis, with workers that outlive Redis blips.

``manage.py runworker`` ends as soon as a receive raises, so a Redis restart used to take every
quality worker down with it. Here a receive on a worker channel (a plain name such as
``quality-updates``) waits and tries again while Redis cannot be reached. A websocket's own
channel (a name with ``!``) still fails at once: daphne closes the socket (1011) and the
browser's ws extension reconnects, which joins the dashboard group again (a restarted Redis has
forgotten its groups). Messages lost with Redis cost nothing: the pending answers stay in the
database outbox and the periodic sweep (:func:`analytics.pipeline.quality_sweep`) sends them
again.

Every command also retries on a dropped connection. channels-redis builds its connection pools
itself, and a redis-py connection made that way retries nothing (redis-py's three retries are a
default of its ``Redis`` client only): after a Redis restart the first command on each pooled
connection failed ("Connection closed by server"), which lost the quality worker's first
dashboard push. A retried command may run twice when only its reply was lost; the studio's
messages are notices ("question 7 changed"), so a duplicate costs one more refresh.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels_redis.core import RedisChannelLayer as BaseRedisChannelLayer
from channels_redis.utils import create_pool
from redis.asyncio.connection import ConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

RETRY_DELAYS = (0.5, 1.0, 2.0, 5.0)  # seconds between receive attempts; the last one repeats
COMMAND_RETRIES = 3  # per command, on a dropped connection or a timeout, 50 ms to 1 s apart


class RedisChannelLayer(BaseRedisChannelLayer):
    """channels-redis whose commands survive dropped connections and whose receive on a worker
    channel retries while Redis is unreachable."""

    def create_pool(self, index: int) -> ConnectionPool:
        """channels-redis' pool for host ``index``, its connections retrying dropped commands
        (a ``retry`` given in the host's options wins)."""
        retry = Retry(ExponentialBackoff(cap=1.0, base=0.05), COMMAND_RETRIES)
        return create_pool({"retry": retry, **self.hosts[index]})

    async def receive(self, channel: str) -> dict[str, Any]:
        """Wait for the next message on ``channel`` (see the module docstring for retries)."""
        failures = 0
        while True:
            try:
                return await super().receive(channel)
            except (RedisConnectionError, RedisTimeoutError) as exc:
                if "!" in channel:
                    raise
                delay = RETRY_DELAYS[min(failures, len(RETRY_DELAYS) - 1)]
                failures += 1
                logger.warning(
                    "channel %s: Redis unreachable (%s); retry in %s s", channel, exc, delay
                )
                await asyncio.sleep(delay)
