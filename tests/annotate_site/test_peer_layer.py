"""Without Redis the processes of one ``serve`` share group messages (annotate_site/peer_layer)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from annotate_site.peer_layer import PeerChannelLayer
from tests.annotate_site.helpers import REPO, child_env

pytestmark = pytest.mark.own_processes  # the same on every test database

SEND_FROM_ANOTHER_PROCESS = """
import django
django.setup()
from channels.layers import get_channel_layer
from analytics.events import dashboard_notify
print(type(get_channel_layer()).__name__)
dashboard_notify(study_id=7, question_id=3)
"""


def _notify_from_another_process(tmp_path, peers: str) -> str:
    env = {
        **child_env(tmp_path, STUDIO_CHANNEL_PEERS=peers),
        "DJANGO_SETTINGS_MODULE": "annotate_site.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", SEND_FROM_ANOTHER_PROCESS],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_group_message_sent_in_another_process_reaches_this_process_members(tmp_path):
    """What the quality worker's push does: the dashboard socket on a web process hears it."""
    peers = tmp_path / "peers"
    peers.mkdir()
    layer = PeerChannelLayer(peers_dir=str(peers))

    async def listen() -> dict:
        channel = await layer.new_channel()
        await layer.group_add("study_7", channel)
        sender = asyncio.to_thread(_notify_from_another_process, tmp_path, str(peers))
        assert await sender == "PeerChannelLayer"
        return await asyncio.wait_for(layer.receive(channel), timeout=10)

    message = asyncio.run(listen())
    assert message == {"type": "dashboard.update", "question_id": 3}


def test_without_peers_it_is_the_in_memory_layer_and_gone_peers_are_forgotten(tmp_path):
    alone = PeerChannelLayer()

    async def send_alone() -> dict:
        channel = await alone.new_channel()
        await alone.group_add("g", channel)
        await alone.group_send("g", {"type": "x"})
        return await alone.receive(channel)

    assert asyncio.run(send_alone()) == {"type": "x"}
    peers = tmp_path / "peers"
    peers.mkdir()
    (peers / "999999999").touch()  # a socket file whose process is gone
    asyncio.run(PeerChannelLayer(peers_dir=str(peers)).group_send("g", {"type": "x"}))
    assert not (peers / "999999999").exists()
