"""The ASGI handler runs a request's middleware and view in one handover to its thread.

Django's ASGIHandler ran each synchronous middleware's request and response halves through
``sync_to_async``: an API answer crossed between the event loop and its thread about 16 times.
"""

from __future__ import annotations

import json

import pytest
from asgiref import sync
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator
from django.core.handlers.asgi import ASGIHandler

from annotate_site.http_handler import SyncMiddlewareASGIHandler
from tests.factories import running_study


@pytest.fixture
def handovers(monkeypatch) -> list[str]:
    """The name of every function handed from the event loop to a thread (``sync_to_async``)."""
    seen: list[str] = []
    original = sync.SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        seen.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(sync.SyncToAsync, "__call__", counted)
    return seen


def next_item(application, study, token: str) -> tuple[int, dict]:
    communicator = HttpCommunicator(
        application,
        "GET",
        f"/api/studies/{study.pk}/next/",
        headers=[(b"authorization", f"Token {token}".encode()), (b"host", b"testserver")],
    )
    response = async_to_sync(communicator.get_response)(timeout=20)
    return response["status"], json.loads(response["body"])


@pytest.mark.django_db(transaction=True)
def test_a_request_is_handed_to_its_thread_once(handovers) -> None:
    from knox.models import AuthToken

    study, (annotator, *_) = running_study(n_items=2, n_annotators=1)
    token = AuthToken.objects.create(user=annotator)[1]
    status, body = next_item(SyncMiddlewareASGIHandler(), study, token)
    assert status == 200
    assert body["progress"] == {"done": 0, "total": 2, "percent": 0}
    # the request_started receivers, the middleware and the view, closing the response
    assert handovers.count("BaseHandler.get_response") == 1
    assert len(handovers) <= 4, handovers
    ours = len(handovers)
    handovers.clear()
    status, _ = next_item(ASGIHandler(), study, token)  # Django's own, for comparison
    assert status == 200
    assert len(handovers) > 3 * ours, handovers


@pytest.mark.django_db(transaction=True)
def test_the_middleware_still_does_its_work() -> None:
    """Sessions, CSRF and the security headers pass through the synchronous chain."""
    communicator = HttpCommunicator(
        SyncMiddlewareASGIHandler(), "GET", "/accounts/login/", headers=[(b"host", b"testserver")]
    )
    response = async_to_sync(communicator.get_response)(timeout=20)
    assert response["status"] == 200
    headers = {name.decode().lower(): value.decode() for name, value in response["headers"]}
    assert "csrftoken=" in headers.get("set-cookie", "")
    assert headers["x-frame-options"] == "DENY"
    assert "content-security-policy" in headers
