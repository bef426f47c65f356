"""Answers over the API read the study's questions from the per-process cache
(apps.studies.selectors.study_questions_cached): a label or a queue question changed after the
cache filled is seen by the next answer."""

from __future__ import annotations

import pytest

from apps.studies.models import Question
from apps.studies.services import question_create, question_update
from tests.api.helpers import next_assignment_id, submit
from tests.factories import SENTIMENT_LABELS, running_study

pytestmark = pytest.mark.django_db


def test_an_answer_with_a_label_added_after_the_cache_filled(client_for) -> None:
    """Over the API: the answer reads the questions from the cache; a label added since is
    accepted, a label removed since refused."""
    study, (annotator, *_) = running_study(n_items=4, n_annotators=1)
    client = client_for(annotator)
    assert submit(client, next_assignment_id(study, annotator), "positive").status_code == 201
    question = Question.objects.get(study=study)
    mixed = {"key": "mixed", "name": "Mixed", "shortcut": "4"}
    question_update(question=question, labels=[*SENTIMENT_LABELS, mixed])
    assert submit(client, next_assignment_id(study, annotator), "mixed").status_code == 201
    calm = {"key": "calm", "name": "Calm", "shortcut": "5"}
    question_update(question=question, labels=[*SENTIMENT_LABELS, mixed, calm])
    assert submit(client, next_assignment_id(study, annotator), "neutral").status_code == 201
    question_update(question=question, labels=[*SENTIMENT_LABELS, mixed])  # calm unused: gone
    refused = submit(client, next_assignment_id(study, annotator), "calm")
    assert refused.status_code == 400
    assert "'calm' is not a label" in str(refused.data)


def test_a_queue_question_added_after_the_cache_filled_keeps_the_item_open(
    client_for,
) -> None:
    """The completion without a query trusts the cached list of queue questions: a question
    added since must be answered too before the item counts as done."""
    study, (annotator, *_) = running_study(n_items=4, n_annotators=1)
    client = client_for(annotator)
    assert submit(client, next_assignment_id(study, annotator)).status_code == 201
    question_create(study=study, key="topic", prompt="Topic?", labels=SENTIMENT_LABELS)
    shown = next_assignment_id(study, annotator)
    assert submit(client, shown).status_code == 201
    assert next_assignment_id(study, annotator) == shown  # still open: topic unanswered
    assert submit(client, shown, "neutral", question="topic").status_code == 201
    assert next_assignment_id(study, annotator) != shown
