"""Closing a package: no answers after its deadline, whatever the path (page, API, service),
and a Prolific link that must name the study's own Prolific study."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from apps.annotations.models import Revision
from apps.annotations.selectors import assignment_next
from apps.annotations.services import annotations_submit
from apps.recruitment.models import Participant
from apps.recruitment.services import participant_start_work
from tests.apps.recruitment.setup import recruiting_study
from tests.apps.recruitment.test_services import qualified

pytestmark = pytest.mark.django_db


def late(participant: Participant, minutes: int = 61) -> None:
    """Move the package's start back: its deadline has passed, it is not released yet."""
    Participant.objects.filter(pk=participant.pk).update(
        started_at=timezone.now() - timedelta(minutes=minutes)
    )
    participant.refresh_from_db()


def test_a_participant_cannot_submit_through_the_service_after_the_deadline():
    study, recruitment = recruiting_study(time_limit_minutes=60)
    participant = participant_start_work(participant=qualified(recruitment))
    assignment = assignment_next(annotator=participant.user, study=study)
    late(participant)
    with pytest.raises(ValidationError, match="time for this package ended"):
        annotations_submit(
            annotator=participant.user,
            assignment=assignment,
            answers={study.questions.get(): "neutral"},
            idempotency_key=uuid.uuid4(),
        )
    assert not Revision.objects.exists()
    assert participant.status == Participant.Status.WORKING  # not released yet


def test_a_participant_with_an_api_token_gets_a_400_after_the_deadline():
    study, recruitment = recruiting_study(time_limit_minutes=60)
    participant = participant_start_work(participant=qualified(recruitment))
    assignment = assignment_next(annotator=participant.user, study=study)
    _, token = AuthToken.objects.create(user=participant.user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    body = {"assignment": assignment.pk, "answers": {"sentiment": "neutral"}}
    ok = client.post(
        "/api/annotations/", {**body, "idempotency_key": str(uuid.uuid4())}, format="json"
    )
    assert ok.status_code == 201
    late(participant)
    refused = client.post(
        "/api/annotations/", {**body, "idempotency_key": str(uuid.uuid4())}, format="json"
    )
    assert refused.status_code == 400
    assert "time for this package ended" in str(refused.json())
    assert Revision.objects.count() == 1


def test_a_finished_participant_cannot_change_answers():
    study, recruitment = recruiting_study(time_limit_minutes=60)
    participant = participant_start_work(participant=qualified(recruitment))
    Participant.objects.filter(pk=participant.pk).update(status=Participant.Status.DONE)
    assignment = assignment_next(annotator=participant.user, study=study)
    with pytest.raises(ValidationError, match="package is closed"):
        annotations_submit(
            annotator=participant.user,
            assignment=assignment,
            answers={study.questions.get(): "neutral"},
            idempotency_key=uuid.uuid4(),
        )


def _join(client, recruitment, study_id: str):
    url = reverse("recruitment:join", args=[recruitment.token])
    return client.get(url, {"PROLIFIC_PID": "5f1a", "STUDY_ID": study_id, "SESSION_ID": "s"})


def test_a_prolific_link_must_name_the_configured_prolific_study(client):
    _, recruitment = recruiting_study(prolific_study_id="64abc")
    wrong = _join(client, recruitment, "other")
    assert wrong.status_code == 403
    assert b"another Prolific study" in wrong.content
    assert not Participant.objects.exists()
    assert _join(client, recruitment, "64abc").status_code == 302
    assert Participant.objects.get().platform_study_id == "64abc"


def test_without_a_configured_prolific_study_any_study_id_enters(client):
    _, recruitment = recruiting_study()
    assert _join(client, recruitment, "anything").status_code == 302
