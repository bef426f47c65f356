"""The Redis channel layer survives connections that Redis dropped (a restart, an idle reaper).

channels-redis builds its connection pools itself, and a redis-py connection made that way
retries nothing: after a Redis restart, the first command on every pooled connection failed
("Connection closed by server"), so the quality worker's first dashboard push was lost.
"""

from __future__ import annotations

import os
import uuid

import pytest
import redis
from asgiref.sync import async_to_sync
from django.conf import settings

pytestmark = pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="needs Redis (REDIS_URL): the PostgreSQL + Redis pass"
)


def _layer_with_name(name: str):
    from annotate_site.channel_layer import RedisChannelLayer

    config = settings.CHANNEL_LAYERS["default"]["CONFIG"]
    hosts = [{**host, "client_name": name} for host in config["hosts"]]
    return RedisChannelLayer(**{**config, "hosts": hosts, "prefix": f"test-{name}"})


def _kill_connections_named(name: str) -> int:
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        ids = [c["id"] for c in client.client_list() if c.get("name") == name]
        for client_id in ids:
            client.client_kill_filter(_id=client_id)
        return len(ids)
    finally:
        client.close()


def test_a_send_after_redis_dropped_the_pooled_connections_is_delivered():
    name = f"studio-{uuid.uuid4().hex[:12]}"
    layer = _layer_with_name(name)

    async def round_trip() -> None:
        channel = await layer.new_channel()
        await layer.group_add("watchers", channel)
        await layer.send("worker-channel", {"type": "warm.up"})
        assert await layer.receive("worker-channel") == {"type": "warm.up"}
        assert _kill_connections_named(name) >= 1  # what a Redis restart does to the pool
        await layer.group_send("watchers", {"type": "dashboard.update"})
        assert (await layer.receive(channel))["type"] == "dashboard.update"
        await layer.send("worker-channel", {"type": "after.restart"})
        assert await layer.receive("worker-channel") == {"type": "after.restart"}
        await layer.flush()

    async_to_sync(round_trip)()
