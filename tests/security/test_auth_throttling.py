"""Sign-in throttling (django-axes): the sign-in page and the API token endpoint.

Issue #10: 100 wrong passwords in 31 s all got 400 and the right one then worked. Now
``AXES_FAILURE_LIMIT`` failures from one address, or for one account from anywhere, lock that
address or account out until ``AXES_COOLOFF_TIME`` has passed since the last failure.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import F
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tests.factories import PASSWORD, UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("axes_on")]

LOGIN = reverse("login")
TOKEN = "/api/auth/token/"
ATTACKS = 100


def _sign_in(client: Client, username: str, password: str, ip: str = "10.0.0.1"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=ip)


def _token(client: APIClient, username: str, password: str, ip: str = "10.0.0.1"):
    return client.post(TOKEN, {"username": username, "password": password}, REMOTE_ADDR=ip)


def _cool_off_passes() -> None:
    """Move every recorded failure back past the cool-off, as if that time had passed."""
    AccessAttempt.objects.update(
        attempt_time=F("attempt_time") - settings.AXES_COOLOFF_TIME - timedelta(seconds=1)
    )


def test_settings_are_the_documented_ones() -> None:
    assert settings.AXES_FAILURE_LIMIT == 10
    assert timedelta(minutes=15) == settings.AXES_COOLOFF_TIME
    assert settings.AXES_LOCKOUT_PARAMETERS == ["ip_address", "username"]
    assert settings.AUTHENTICATION_BACKENDS[0] == "axes.backends.AxesStandaloneBackend"


def test_sign_in_page_locks_out_after_repeated_failures_even_the_right_password() -> None:
    user = UserFactory()
    client = Client()
    statuses = [_sign_in(client, user.username, f"wrong-{i}").status_code for i in range(ATTACKS)]
    limit = settings.AXES_FAILURE_LIMIT
    assert statuses[: limit - 1] == [200] * (limit - 1)  # the form again, with its error
    assert set(statuses[limit - 1 :]) == {429}
    assert "wrong-0" not in AccessAttempt.objects.get().post_data  # passwords are masked
    refused = _sign_in(client, user.username, PASSWORD)
    assert refused.status_code == 429
    assert refused["Retry-After"] == str(15 * 60)
    assert "Too many failed sign-ins" in refused.content.decode()
    assert "_auth_user_id" not in client.session

    _cool_off_passes()
    response = _sign_in(client, user.username, PASSWORD)
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(user.pk)


def test_token_endpoint_locks_out_with_a_json_429_even_the_right_password() -> None:
    user = UserFactory()
    client = APIClient()
    statuses = [_token(client, user.username, f"wrong-{i}").status_code for i in range(ATTACKS)]
    limit = settings.AXES_FAILURE_LIMIT
    assert statuses[: limit - 1] == [400] * (limit - 1)
    assert set(statuses[limit - 1 :]) == {429}
    refused = _token(client, user.username, PASSWORD)
    assert refused.status_code == 429
    assert refused["Retry-After"] == str(15 * 60)
    assert "Too many failed sign-ins" in refused.json()["detail"]
    assert "token" not in refused.json()

    _cool_off_passes()
    response = _token(client, user.username, PASSWORD)
    assert response.status_code == 200
    assert response.json()["token"]


def test_an_account_is_locked_whatever_the_address() -> None:
    user, bystander = UserFactory(), UserFactory()
    client = APIClient()
    for i in range(settings.AXES_FAILURE_LIMIT):
        assert _token(client, user.username, "wrong", ip=f"10.0.1.{i}").status_code in (400, 429)
    assert _token(client, user.username, PASSWORD, ip="10.0.2.1").status_code == 429
    assert _sign_in(Client(), user.username, PASSWORD, ip="10.0.2.2").status_code == 429
    # Each address failed once only: other accounts still sign in from them.
    assert _token(client, bystander.username, PASSWORD, ip="10.0.1.0").status_code == 200


def test_an_address_is_locked_whatever_the_account() -> None:
    sprayed = UserFactory.create_batch(settings.AXES_FAILURE_LIMIT)
    victim = UserFactory()
    client = Client()
    for user in sprayed:  # password spraying: one guess per account
        _sign_in(client, user.username, "Summer2026!")
    assert _sign_in(client, victim.username, PASSWORD).status_code == 429
    assert _sign_in(Client(), victim.username, PASSWORD, ip="10.0.3.1").status_code == 302


def test_a_few_typos_do_not_lock_anyone_out() -> None:
    user = UserFactory()
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _sign_in(client, user.username, "typo").status_code == 200
    assert _sign_in(client, user.username, PASSWORD).status_code == 302
