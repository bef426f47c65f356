"""The websocket origin check compares scheme, host and port (issue 25).

Channels' ``AllowedHostsOriginValidator`` accepted ``Origin: http://localhost:9999`` for a
socket opened on ``localhost:8000``: another origin, which a browser keeps apart.
"""

from __future__ import annotations

import pytest

from annotate_site.origins import allowed_origin


def scope(origin: str | None, host: str = "localhost:8000", scheme: str = "ws", **extra: str):
    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    headers += [(name.encode(), value.encode()) for name, value in extra.items()]
    return {"type": "websocket", "scheme": scheme, "headers": headers}


@pytest.fixture(autouse=True)
def _hosts(settings):
    settings.ALLOWED_HOSTS = ["localhost", "studio.example.org"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://trusted.example.org"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")


@pytest.mark.parametrize(
    ("origin", "host", "scheme", "extra", "allowed"),
    [
        ("http://localhost:8000", "localhost:8000", "ws", {}, True),
        ("http://localhost:9999", "localhost:8000", "ws", {}, False),  # another port
        ("https://localhost:8000", "localhost:8000", "ws", {}, False),  # another scheme
        ("https://studio.example.org", "studio.example.org", "wss", {}, True),
        (
            "https://studio.example.org",
            "studio.example.org",
            "ws",
            {"x-forwarded-proto": "https"},
            True,
        ),
        ("http://studio.example.org", "studio.example.org", "wss", {}, False),
        ("http://evil.example.com", "evil.example.com", "ws", {}, False),  # host not allowed
        ("https://trusted.example.org", "localhost:8000", "ws", {}, True),  # trusted origin
        (None, "localhost:8000", "ws", {}, False),
        ("null", "localhost:8000", "ws", {}, False),
        ("http://localhost:99999", "localhost:8000", "ws", {}, False),  # not a port
    ],
)
def test_the_origin_must_be_the_sites_own(origin, host, scheme, extra, allowed):
    assert allowed_origin(scope(origin, host, scheme, **extra)) is allowed


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("origin", "connected"),
    [(b"http://localhost:8000", True), (b"http://localhost:9999", False)],
)
def test_the_application_opens_a_dashboard_socket_for_the_sites_own_page_only(
    client, origin, connected
):
    """Through the whole ASGI application, a manager's session: the dashboard socket opens for
    the page served on localhost:8000 and not for one served on another port."""
    from asgiref.sync import async_to_sync
    from channels.testing import WebsocketCommunicator

    from annotate_site.asgi import application
    from tests.factories import running_study

    study, _ = running_study(n_items=1, n_annotators=1)
    question = study.questions.get()
    client.force_login(study.created_by)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()

    async def connect() -> bool:
        communicator = WebsocketCommunicator(
            application,
            f"/ws/studies/{study.pk}/quality/?question={question.pk}",
            headers=[(b"host", b"localhost:8000"), (b"origin", origin), (b"cookie", cookie)],
        )
        opened, _ = await communicator.connect(timeout=20)
        await communicator.disconnect()
        return opened

    assert async_to_sync(connect)() is connected
