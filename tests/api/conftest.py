"""API test fixtures: clients authenticated by token."""

from __future__ import annotations

from typing import Any

import pytest
from knox.models import AuthToken
from rest_framework.test import APIClient

from tests.api.helpers import ClientFor


@pytest.fixture
def client_for(db) -> ClientFor:
    """``client_for(user)``: an API client sending ``user``'s token; ``client_for()``: anonymous."""

    def make(user: Any = None) -> APIClient:
        client = APIClient()
        if user is not None:
            _, token = AuthToken.objects.create(user=user)
            client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        return client

    return make
