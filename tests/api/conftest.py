"""API test fixtures: clients authenticated by token."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.api.helpers import ClientFor


@pytest.fixture
def client_for(db) -> ClientFor:
    """``client_for(user)``: an API client sending ``user``'s token; ``client_for()``: anonymous."""

    def make(user: Any = None) -> APIClient:
        client = APIClient()
        if user is not None:
            token, _ = Token.objects.get_or_create(user=user)
            client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        return client

    return make
