"""Recruitment for studies without a categorical question: work packages of traces or of
pairwise comparisons complete, and the participant is sent to the right page."""

from __future__ import annotations

import uuid
from datetime import timedelta

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from apps.annotations.models import Assignment
from apps.continuous.services import trace_chunk_store, trace_finish
from apps.items.services import items_bulk_create
from apps.preferences.services import judgement_record, pair_next
from apps.recruitment.models import Participant
from apps.recruitment.selectors import participant_page
from apps.recruitment.services import (
    participant_consent,
    participant_enter,
    participant_finish,
    participant_start_work,
    participant_training_finish,
    recruitment_update,
)
from apps.recruitment.sessions import SESSION_KEY
from apps.studies.models import Question, Study
from apps.studies.services import question_create, study_set_status
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db
Status = Participant.Status
SECONDS = 4.0


def kind_study(kind: str, *, n_items: int = 4, per_participant: int = 3):
    """A running study whose only question is of ``kind``, open to recruitment."""
    study = StudyFactory()
    settings = {"allow_seek": True} if kind == Question.Kind.CONTINUOUS else {}
    question = question_create(study=study, kind=kind, key="q", prompt="?", settings=settings)
    rows = [
        {"external_id": f"item-{n}", "text": f"Sentence {n}.", "metadata": {"duration": SECONDS}}
        for n in range(n_items)
    ]
    items_bulk_create(study=study, rows=rows)
    study_set_status(study=study, status=Study.Status.RUNNING)
    recruitment = recruitment_update(
        study=study, is_open=True, items_per_participant=per_participant, check_rate=0.0
    )
    return study, question, recruitment


def working(recruitment, pid: str = "P1") -> Participant:
    participant = participant_enter(recruitment=recruitment, platform_id=pid).participant
    participant_consent(participant=participant, agree=True)
    participant_training_finish(participant=participant)
    return participant_start_work(participant=participant)


def trace(participant: Participant, question: Question, assignment: Assignment) -> None:
    recording = uuid.uuid4()
    times = np.arange(0, SECONDS + 0.05, 0.1)
    trace_chunk_store(
        annotator=participant.user,
        assignment=assignment,
        question=question,
        recording_uuid=recording,
        sequence=0,
        times=list(times),
        values=list(np.full(times.size, 0.5)),
    )
    trace_finish(annotator=participant.user, recording_uuid=recording)


def judge_all(participant: Participant, question: Question) -> None:
    for _ in range(100):
        state = pair_next(question=question, annotator=participant.user)
        if state.pending is None:
            return
        a, b = state.pending
        judgement_record(
            question=question,
            annotator=participant.user,
            item_a=a,
            item_b=b,
            outcome=1 if a < b else -1,
            idempotency_key=uuid.uuid4(),
        )
    raise AssertionError("the ranking never finished")


def test_a_trace_package_sends_the_participant_to_the_recorder_and_completes():
    study, question, recruitment = kind_study(Question.Kind.CONTINUOUS)
    participant = working(recruitment)
    assert participant_page(participant=participant) == reverse(
        "continuous:record_next", args=[study.pk, question.key]
    )
    for assignment in Assignment.objects.filter(annotator=participant.user):
        trace(participant, question, assignment)
    assert participant_page(participant=participant) == reverse("recruitment:end", args=[study.pk])
    assert participant_finish(participant=participant).status == Status.DONE


def test_a_pairwise_package_sends_the_participant_to_the_comparisons_and_completes():
    study, question, recruitment = kind_study(Question.Kind.PAIRWISE)
    participant = working(recruitment)
    assert participant_page(participant=participant) == reverse(
        "preferences:compare", args=[study.pk, question.key]
    )
    judge_all(participant, question)
    assert participant_page(participant=participant) == reverse("recruitment:end", args=[study.pk])
    assert participant_finish(participant=participant).status == Status.DONE


def test_the_recorder_and_the_comparisons_send_a_finished_participant_to_the_end(client):
    for kind, page in (
        (Question.Kind.CONTINUOUS, "continuous:record_next"),
        (Question.Kind.PAIRWISE, "preferences:compare"),
    ):
        study, question, recruitment = kind_study(kind)
        participant = working(recruitment, pid=f"p-{kind}")
        client.force_login(participant.user)
        session = client.session
        session[SESSION_KEY] = participant.pk
        session.save()
        url = reverse(page, args=[study.pk, question.key])
        assert client.get(url).status_code == 200
        Participant.objects.filter(pk=participant.pk).update(
            started_at=timezone.now() - timedelta(hours=2)
        )
        assert client.get(url)["Location"] == reverse("recruitment:end", args=[study.pk])


def test_no_pairwise_judgement_after_the_deadline():
    _, question, recruitment = kind_study(Question.Kind.PAIRWISE)
    participant = working(recruitment)
    a, b = pair_next(question=question, annotator=participant.user).pending
    Participant.objects.filter(pk=participant.pk).update(
        started_at=timezone.now() - timedelta(hours=2)
    )
    participant.refresh_from_db()
    with pytest.raises(ValidationError, match="time for this package ended"):
        judgement_record(
            question=question,
            annotator=participant.user,
            item_a=a,
            item_b=b,
            outcome=1,
            idempotency_key=uuid.uuid4(),
        )
