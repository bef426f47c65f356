"""Dashboard pushes from sync code reach the channel layer from any thread, one running an
event loop too (a live server's, Playwright's, ``asyncio.run``'s), where ``async_to_sync``
alone raises "You cannot use AsyncToSync in the same thread as an async event loop"."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest
from channels.layers import get_channel_layer

from analytics.events import dashboard_notify, layer_sync, study_group

IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def in_memory_layer(settings):
    settings.CHANNEL_LAYERS = IN_MEMORY  # channels drops its cached layers on the change
    return get_channel_layer()


def test_a_push_from_inside_a_running_event_loop_arrives(in_memory_layer) -> None:
    layer = in_memory_layer

    async def dashboard_open_then_sync_code_publishes() -> dict:
        channel = await layer.new_channel()
        await layer.group_add(study_group(7), channel)
        dashboard_notify(study_id=7, question_id=3)  # sync call; this thread's loop runs
        return await asyncio.wait_for(layer.receive(channel), timeout=10)

    received = asyncio.run(dashboard_open_then_sync_code_publishes())
    assert received == {"type": "dashboard.update", "question_id": 3}


def test_an_error_of_the_layer_reaches_the_caller_inside_a_running_loop() -> None:
    """The worker thread hands back the layer's exception (``ChannelFull``, Redis away), as
    ``async_to_sync`` does: callers such as the quality dispatch log it and rely on the sweep."""

    async def refused() -> None:
        raise ConnectionError("Redis away")

    async def main() -> None:
        layer_sync(refused)()

    with pytest.raises(ConnectionError, match="Redis away"):
        asyncio.run(main())


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis (REDIS_URL)")
def test_a_push_from_inside_a_running_event_loop_arrives_through_redis() -> None:
    layer = get_channel_layer()  # the studio's Redis layer when REDIS_URL is set
    study_id = uuid.uuid4().int % 10**9

    async def main() -> dict:
        channel = await layer.new_channel()
        await layer.group_add(study_group(study_id), channel)
        try:
            dashboard_notify(study_id=study_id, question_id=5)
            return await asyncio.wait_for(layer.receive(channel), timeout=10)
        finally:
            await layer.group_discard(study_group(study_id), channel)

    assert asyncio.run(main()) == {"type": "dashboard.update", "question_id": 5}
