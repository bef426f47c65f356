"""A database that cannot be reached answers a clean 503 (JSON for the API, a page otherwise)."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.db.backends.base.base import BaseDatabaseWrapper
from rest_framework.test import APIClient

from tests.api.helpers import next_assignment_id, submit

pytestmark = pytest.mark.django_db


def _refused(*args, **kwargs):
    raise OperationalError('connection to server at "127.0.0.1", port 5432 failed: refused')


@pytest.fixture
def database_away(monkeypatch):
    """Every query from now on fails as with a stopped database server."""
    monkeypatch.setattr(BaseDatabaseWrapper, "ensure_connection", _refused)


def test_api_write_answers_503_json_when_the_database_is_away(study_setup, request):
    study, (annotator, *_) = study_setup
    assignment_id = next_assignment_id(study, annotator)
    api = APIClient(raise_request_exception=False)
    api.force_authenticate(user=annotator)
    request.getfixturevalue("database_away")
    response = submit(api, assignment_id)
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"].startswith("The database is unavailable")
    assert response["Retry-After"] == "5"


def test_page_answers_503_page_when_the_database_is_away(manager, client, request):
    client.force_login(manager)
    client.raise_request_exception = False
    request.getfixturevalue("database_away")  # the session lookup fails, before any view
    response = client.get("/")
    assert response.status_code == 503
    html = response.content.decode()
    assert "Unavailable for a moment" in html
    assert "Traceback" not in html


def test_other_errors_stay_500(manager, monkeypatch, client):
    client.force_login(manager)
    client.raise_request_exception = False

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr("core.sessions.SessionStore.load", broken)
    response = client.get("/")
    assert response.status_code == 500
    assert "Something went wrong" in response.content.decode()
