"""Every count, size and depth a user controls is checked against a stated limit before the
work (issue 25): just over each limit answers 400 naming it, quickly, and stores nothing.

Before: a 300-byte Label Studio file with ``maxRating="10000"`` took 194 s and 10 GB, a
question of 6,000 labels 3.1 GB for one answer; ``annotations: [1]``, a ``lead_time`` of 1e308
and a deeply nested file answered 500.
"""

from __future__ import annotations

import io
import json
import time

import pytest
from rest_framework.test import APIClient

from apps.studies.models import Question, Study
from tests.factories import StudyFactory, UserFactory

pytestmark = pytest.mark.django_db


def _task(result: dict | None = None, **annotation: object) -> dict:
    answer = result or {
        "type": "choices",
        "from_name": "sentiment",
        "to_name": "text",
        "value": {"choices": ["Positive"]},
    }
    return {
        "id": 1,
        "data": {"text": "A sentence."},
        "annotations": [{"id": 1, "completed_by": 7, "result": [answer], **annotation}],
    }


def _import(client: APIClient, content: bytes, label_config: str = "") -> tuple[int, str, float]:
    upload = io.BytesIO(content)
    upload.name = "export.json"
    started = time.perf_counter()
    response = client.post(
        "/api/studies/import/label-studio/",
        {"file": upload, "name": "LS", "label_config": label_config},
        format="multipart",
    )
    return response.status_code, json.dumps(response.json()), time.perf_counter() - started


@pytest.fixture
def manager_client() -> APIClient:
    client = APIClient()
    client.force_authenticate(UserFactory(manager=True))
    return client


RATING = {"type": "rating", "from_name": "stars", "to_name": "text", "value": {"rating": 3}}


@pytest.mark.parametrize(
    ("content", "config", "says"),
    [
        (json.dumps([_task(RATING)]), '<View><Rating name="stars" maxRating="101"/></View>', "101"),
        (
            json.dumps([_task(RATING)]),
            '<View><Rating name="stars" maxRating="99999999999999999999"/></View>',
            "QUESTION_MAX_LABELS",
        ),
        (json.dumps([_task({**RATING, "value": {"rating": 10_000}})]), "", "QUESTION_MAX_LABELS"),
        (json.dumps([{"id": 1, "data": {"text": "x"}, "annotations": [1]}]), "", "not an object"),
        (json.dumps([{"id": 1, "data": {"text": "x"}, "annotations": "a"}]), "", "not a list"),
        ("[" * 100_000 + "]" * 100_000, "", "nested too deeply"),
    ],
    ids=["max-rating", "max-rating-huge", "rating", "annotation-int", "annotations-str", "deep"],
)
def test_label_studio_files_over_a_limit_are_a_400(manager_client, content, config, says):
    status, body, seconds = _import(manager_client, content.encode(), config)
    assert status == 400, body
    assert says in body
    assert seconds < 1
    assert not Study.objects.exists()


def test_a_label_studio_lead_time_beyond_a_day_stores_no_time(manager_client):
    status, body, _ = _import(manager_client, json.dumps([_task(lead_time=1e308)]).encode())
    assert status == 400, body  # a single choice makes no scale without the configuration
    config = '<View><Choices name="sentiment"><Choice value="Positive"/><Choice value="No"/>'
    status, body, _ = _import(
        manager_client, json.dumps([_task(lead_time=1e308)]).encode(), config + "</Choices></View>"
    )
    assert status == 201, body


def test_a_question_over_the_label_limit_is_a_400(settings):
    settings.QUESTION_MAX_LABELS = 5
    study = StudyFactory()
    client = APIClient()
    client.force_authenticate(study.created_by)
    labels = [{"key": f"l{n}", "name": f"L{n}"} for n in range(6)]
    response = client.post(
        f"/api/studies/{study.pk}/questions/",
        {"key": "q", "prompt": "?", "kind": "categorical", "labels": labels},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "QUESTION_MAX_LABELS" in json.dumps(response.json())
    assert not Question.objects.exists()
    response = client.post(
        f"/api/studies/{study.pk}/questions/",
        {"key": "q", "prompt": "?", "kind": "categorical", "labels": labels[:5]},
        format="json",
    )
    assert response.status_code == 201, response.content
