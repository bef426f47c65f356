"""core.sessions and core.auth: Django's database sessions and signed-in users, read with SQL
built once, read as Django's own store and backend read them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.auth.backends import ModelBackend as DjangoModelBackend
from django.contrib.sessions.backends.db import SessionStore as DjangoStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from core.auth import DJANGO_BACKEND, ModelBackend
from core.sessions import SessionStore
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _saved(data: dict) -> str:
    store = DjangoStore()
    store.update(data)
    store.save()
    return store.session_key


def test_a_session_reads_as_django_s_store_reads_it():
    key = _saved({"_auth_user_id": "7", "answers": [1, 2, 3], "name": "Zoë"})
    ours, theirs = SessionStore(key), DjangoStore(key)
    assert (
        ours.load() == theirs.load() == {"_auth_user_id": "7", "answers": [1, 2, 3], "name": "Zoë"}
    )
    assert ours.session_key == key


@pytest.mark.parametrize("key", ["expired", "unknown"])
def test_an_expired_or_unknown_session_reads_empty_and_its_key_is_forgotten(key):
    saved = _saved({"a": 1})
    if key == "expired":
        Session.objects.filter(pk=saved).update(expire_date=timezone.now() - timedelta(seconds=1))
    else:
        saved = "x" * 32
    ours, theirs = SessionStore(saved), DjangoStore(saved)
    assert ours.load() == theirs.load() == {}
    assert ours.session_key is None
    assert theirs.session_key is None


def test_a_tampered_session_reads_empty():
    key = _saved({"a": 1})
    Session.objects.filter(pk=key).update(session_data="garbage")
    assert SessionStore(key).load() == {}


def test_the_site_signs_in_through_it(client, settings):
    assert settings.SESSION_ENGINE == "core.sessions"
    user = UserFactory(password="a long passphrase 1")
    assert client.login(username=user.username, password="a long passphrase 1")
    assert client.get("/").wsgi_request.user == user
    client.logout()
    assert not client.get("/").wsgi_request.user.is_authenticated


def test_a_session_signed_in_through_django_s_backend_stays_signed_in(client):
    """Sessions from before core.auth name Django's ModelBackend, which the settings no longer
    list: the store reads that name as core.auth's subclass, so an upgrade signs no one out."""
    user = UserFactory()
    client.force_login(user, backend=DJANGO_BACKEND)
    stored = Session.objects.get().get_decoded()
    assert stored[BACKEND_SESSION_KEY] == DJANGO_BACKEND
    assert DJANGO_BACKEND not in settings.AUTHENTICATION_BACKENDS
    assert client.get("/").wsgi_request.user == user


def test_the_backend_reads_users_as_django_s_does():
    active, inactive = UserFactory(), UserFactory(is_active=False)
    ours, theirs = ModelBackend(), DjangoModelBackend()
    for pk in (active.pk, inactive.pk, 10**9, 2**63, "7", str(active.pk)):
        assert ours.get_user(pk) == theirs.get_user(pk), pk
    assert ours.get_user(active.pk) == active
