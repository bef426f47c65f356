"""The dashboard socket when the channel layer cannot be reached (Redis down)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import channel_layers
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from analytics.consumers import TRY_AGAIN_LATER
from annotate_site.routing import websocket_urlpatterns
from tests.factories import running_study

UNREACHABLE_REDIS = "redis://127.0.0.1:6392/0"  # nothing listens there


@pytest.fixture
def redis_away(settings):
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "annotate_site.channel_layer.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": UNREACHABLE_REDIS, "socket_connect_timeout": 1}]},
        }
    }
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.mark.django_db(transaction=True)
def test_a_connect_while_redis_is_away_is_closed_with_try_again_later(redis_away):
    """Before, the exception left the consumer and the server answered the handshake with 500;
    now the socket opens and closes with 1013, which the page's ws extension retries."""
    study, _ = running_study(n_items=1, n_annotators=1)
    question = study.questions.get()

    async def connect() -> tuple[bool, dict]:
        communicator = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns),
            f"/ws/studies/{study.pk}/quality/?question={question.pk}",
        )
        communicator.scope["user"] = study.created_by
        connected, _ = await communicator.connect(timeout=20)
        closing = await communicator.receive_output(timeout=20)
        await communicator.wait()
        return connected, closing

    connected, closing = async_to_sync(connect)()
    assert connected
    assert closing == {"type": "websocket.close", "code": TRY_AGAIN_LATER}
