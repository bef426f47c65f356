"""API tokens (django-rest-knox): stored hashed, expiring, listed and revoked by their user.

Issue #10: DRF's authtoken kept every token in plain text, valid forever.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


def _new_token(user) -> str:
    response = APIClient().post(
        "/api/auth/token/", {"username": user.username, "password": PASSWORD}
    )
    assert response.status_code == 200, response.content
    return response.json()["token"]


def _client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def _works(token: str) -> bool:
    return _client(token).get("/api/studies/").status_code == 200


def test_the_plain_token_table_is_gone() -> None:
    assert "authtoken_token" not in connection.introspection.table_names()
    assert "rest_framework.authtoken" not in settings.INSTALLED_APPS


def test_only_a_digest_of_the_token_is_stored() -> None:
    user = UserFactory()
    token = _new_token(user)
    assert _works(token)
    stored = AuthToken.objects.get(user=user)
    assert token not in stored.digest
    assert len(stored.digest) == 128  # SHA-512
    rows = AuthToken.objects.values_list("digest", "token_key")
    assert not any(token in value for row in rows for value in row)


def test_a_token_expires_after_the_configured_days() -> None:
    user = UserFactory()
    before = timezone.now()
    response = APIClient().post(
        "/api/auth/token/", {"username": user.username, "password": PASSWORD}
    )
    expiry = AuthToken.objects.get(user=user).expiry
    assert settings.REST_KNOX["TOKEN_TTL"] == timedelta(days=30)
    assert before + timedelta(days=30) <= expiry <= timezone.now() + timedelta(days=30)
    assert response.json()["expiry"]
    token = response.json()["token"]
    AuthToken.objects.filter(user=user).update(expiry=timezone.now() - timedelta(seconds=1))
    response = _client(token).get("/api/studies/")
    assert response.status_code == 401
    assert not AuthToken.objects.filter(user=user).exists()  # expired tokens are deleted


def test_a_request_reads_only_its_own_token_and_a_new_token_sweeps_the_expired(
    django_assert_num_queries,
) -> None:
    """knox swept the user's other tokens on every request (a second query per API call);
    a request now reads its token with its user, and signing in deletes the expired ones."""
    user = UserFactory()
    stale, current = _new_token(user), _new_token(user)
    AuthToken.objects.filter(token_key=stale[:15]).update(
        expiry=timezone.now() - timedelta(seconds=1)
    )
    client = _client(current)
    with django_assert_num_queries(2):  # the token with its user, then the list
        assert client.get("/api/auth/tokens/").status_code == 200
    assert AuthToken.objects.filter(user=user).count() == 2  # the expired one is left
    assert not _works(stale)
    assert AuthToken.objects.filter(user=user).count() == 1  # ... until presented
    AuthToken.objects.filter(token_key=current[:15]).update(
        expiry=timezone.now() - timedelta(seconds=1)
    )
    fresh = _new_token(user)
    assert [token.token_key for token in AuthToken.objects.filter(user=user)] == [fresh[:15]]


def test_logout_revokes_the_token_used_and_logoutall_every_token() -> None:
    user = UserFactory()
    first, second, third = (_new_token(user) for _ in range(3))
    assert _client(first).post("/api/auth/logout/").status_code == 204
    assert not _works(first)
    assert _works(second)
    assert _works(third)
    assert _client(second).post("/api/auth/logoutall/").status_code == 204
    assert not _works(second)
    assert not _works(third)


def test_a_user_lists_and_revokes_their_tokens_through_the_api() -> None:
    user, other = UserFactory(), UserFactory()
    mine, spare = _new_token(user), _new_token(user)
    theirs = _new_token(other)
    listed = _client(mine).get("/api/auth/tokens/").json()
    assert len(listed) == 2
    assert {entry["key"] for entry in listed} == {mine[:15], spare[:15]}
    assert [entry["current"] for entry in listed if entry["key"] == mine[:15]] == [True]
    assert all(entry["expiry"] and entry["created"] for entry in listed)
    assert _client(mine).delete(f"/api/auth/tokens/{theirs[:15]}/").status_code == 404
    assert _works(theirs)
    assert _client(mine).delete(f"/api/auth/tokens/{spare[:15]}/").status_code == 204
    assert not _works(spare)
    assert _works(mine)


def test_the_tokens_page_lists_and_revokes(client) -> None:
    user, other = UserFactory(), UserFactory()
    kept, revoked = _new_token(user), _new_token(user)
    theirs = _new_token(other)
    client.force_login(user)
    url = reverse("accounts:api_tokens")
    html = client.get(url).content.decode()
    assert kept[:8] in html
    assert revoked[:8] in html
    assert theirs[:8] not in html
    assert kept not in html  # never the whole token
    client.post(url, {"key": theirs[:15]})
    assert _works(theirs)
    response = client.post(url, {"key": revoked[:15]}, follow=True)
    assert "1 token revoked." in response.content.decode()
    assert not _works(revoked)
    assert _works(kept)
    client.post(url, {"all": "on"})
    assert not _works(kept)
    assert "no API token that still works" in client.get(url).content.decode()
    assert client.post(url, {}).status_code == 400


def test_the_tokens_page_needs_a_signed_in_user(client, db) -> None:
    response = client.get(reverse("accounts:api_tokens"))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))
