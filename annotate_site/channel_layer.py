"""The Redis channel layer of the studio: channels-redis, with commands that outlive Redis blips.

With ``REDIS_URL`` set, the web processes and the quality workers share dashboard notices
through Redis. A dashboard websocket whose Redis goes away fails its receive; the consumer
closes the socket with 1013 and the browser's ws extension reconnects, which joins the
dashboard group again (a restarted Redis has forgotten its groups). A notice lost with Redis
costs nothing: the figures are in the database and the next notice brings them.

Every command retries on a dropped connection. channels-redis builds its connection pools
itself, and a redis-py connection made that way retries nothing (redis-py's three retries are a
default of its ``Redis`` client only): after a Redis restart the first command on each pooled
connection failed ("Connection closed by server"), which lost the quality worker's first
dashboard push. A retried command may run twice when only its reply was lost; the studio's
messages are notices ("question 7 changed"), so a duplicate costs one more refresh.
"""

from __future__ import annotations

from channels_redis.core import RedisChannelLayer as BaseRedisChannelLayer
from channels_redis.utils import create_pool
from redis.asyncio.connection import ConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

COMMAND_RETRIES = 3  # per command, on a dropped connection or a timeout, 50 ms to 1 s apart


class RedisChannelLayer(BaseRedisChannelLayer):
    """channels-redis whose commands survive dropped connections."""

    def create_pool(self, index: int) -> ConnectionPool:
        """channels-redis' pool for host ``index``, its connections retrying dropped commands
        (a ``retry`` given in the host's options wins)."""
        retry = Retry(ExponentialBackoff(cap=1.0, base=0.05), COMMAND_RETRIES)
        return create_pool({"retry": retry, **self.hosts[index]})
