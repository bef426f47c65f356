"""The gold answers API (managers only) and what a participant's API token can see."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from apps.recruitment.models import GoldAnswer
from apps.recruitment.services import participant_start_work
from tests.apps.recruitment.setup import recruiting_study
from tests.apps.recruitment.test_services import qualified

pytestmark = pytest.mark.django_db


def gold_url(study) -> str:
    return f"/api/studies/{study.pk}/gold-answers/"


def test_managers_list_set_and_remove_gold_answers():
    study, _ = recruiting_study(n_training=1, n_checks=1)
    client = APIClient()
    client.force_authenticate(study.created_by)
    listed = client.get(gold_url(study)).json()["results"]
    assert [(g["item"], g["value"], g["use"]) for g in listed] == [
        ("train-0", {"label": "positive"}, "training"),
        ("check-0", {"label": "negative"}, "check"),
    ]
    made = client.post(
        gold_url(study),
        {"item": "item-0", "question": "sentiment", "value": "neutral", "reason": "flat"},
        format="json",
    )
    assert made.status_code == 201
    assert made.json()["value"] == {"label": "neutral"}
    assert GoldAnswer.objects.get(item__external_id="item-0").use == "check"
    bad = client.post(
        gold_url(study), {"item": "item-1", "question": "sentiment", "value": "joy"}, format="json"
    )
    assert bad.status_code == 400
    assert (
        client.post(
            gold_url(study),
            {"item": "nope", "question": "sentiment", "value": "neutral"},
            format="json",
        ).status_code
        == 404
    )
    assert client.delete(f"{gold_url(study)}{made.json()['id']}/").status_code == 204


def test_participants_see_neither_gold_answers_nor_other_packages():
    study, recruitment = recruiting_study(n_regular=6, items_per_participant=2, check_rate=0.5)
    study.overlap = 1
    study.save()
    mine = participant_start_work(participant=qualified(recruitment, "a"))
    theirs = participant_start_work(participant=qualified(recruitment, "b"))
    client = APIClient()
    client.force_authenticate(mine.user)
    assert client.get(gold_url(study)).status_code == 403
    listed = client.get(f"/api/studies/{study.pk}/items/").json()["results"]
    assert listed == []  # the package ahead is not listed: its checks would stand out
    own = set(mine.user.assignments.values_list("item_id", flat=True))
    other = set(theirs.user.assignments.values_list("item_id", flat=True))
    assert other - own  # the other package holds items this participant must not see
    first = mine.user.assignments.order_by("position").first()
    entry = client.get(f"/api/studies/{study.pk}/next/").json()
    assert entry["assignment"] == first.pk
    assert set(entry["item"]) == {"id", "kind", "text", "url", "media"}  # no position, no name
    question = study.questions.get()
    client.post(
        "/api/annotations/",
        {
            "assignment": first.pk,
            "answers": {question.key: "neutral"},
            "idempotency_key": str(uuid.uuid4()),
        },
        format="json",
    )
    listed = client.get(f"/api/studies/{study.pk}/items/").json()["results"]
    assert [item["id"] for item in listed] == [first.item_id]  # what they answered
    assert listed[0]["position"] is None  # null for annotators: nothing to single a check out
    assert listed[0]["external_id"] is None
    annotations = client.get("/api/annotations/", {"study": study.pk}).json()["results"]
    assert [a["item"] for a in annotations] == [first.item_id]  # their own answer only
