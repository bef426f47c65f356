"""API token authentication (apps.accounts.authentication): knox's checks, one read per request."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from knox.models import AuthToken
from knox.signals import token_expired
from rest_framework.test import APIClient

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

URL = "/api/studies/"


def _get(header: str | bytes) -> int:
    client = APIClient()
    return client.get(URL, HTTP_AUTHORIZATION=header).status_code


def test_a_token_authenticates_its_user_in_one_read():
    user = UserFactory()
    _, token = AuthToken.objects.create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    with CaptureQueriesContext(connection) as queries:
        response = client.get(URL)
    assert response.status_code == 200
    token_reads = [q["sql"] for q in queries.captured_queries if "knox_authtoken" in q["sql"]]
    assert len(token_reads) == 1
    assert "auth_user" in token_reads[0]  # the user came with it


def test_a_wrong_secret_an_inactive_user_and_a_malformed_header_are_refused():
    user = UserFactory()
    _, token = AuthToken.objects.create(user=user)
    forged = token[:15] + ("0" if token[15] != "0" else "1") + token[16:]  # same key, not digest
    assert _get(f"Token {forged}") == 401
    assert _get("Token nothing-like-it") == 401
    # a header that is not UTF-8 (Django reads headers as latin-1): knox raised a 500
    assert _get("Token \xe9\xe9\xe9") == 401
    user.is_active = False
    user.save(update_fields=["is_active"])
    assert _get(f"Token {token}") == 401


def test_an_expired_token_is_refused_and_deleted():
    user = UserFactory()
    instance, token = AuthToken.objects.create(user=user)
    AuthToken.objects.filter(pk=instance.pk).update(expiry=timezone.now() - timedelta(seconds=1))
    heard: list[str] = []

    def listen(sender, username, source, **kwargs):
        heard.append(f"{username}:{source}")

    token_expired.connect(listen)
    try:
        assert _get(f"Token {token}") == 401
    finally:
        token_expired.disconnect(listen)
    assert not AuthToken.objects.filter(pk=instance.pk).exists()
    assert heard == [f"{user.username}:auth_token"]
