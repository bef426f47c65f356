"""Study, question and label services."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from apps.studies.services import question_create, question_update
from tests.factories import SENTIMENT_LABELS, StudyFactory


@pytest.fixture
def question(db):
    return question_create(
        study=StudyFactory(), key="sentiment", prompt="?", labels=SENTIMENT_LABELS
    )


def test_labels_can_swap_shortcuts(question):
    swapped = [dict(label) for label in SENTIMENT_LABELS]
    swapped[0]["shortcut"], swapped[2]["shortcut"] = "3", "1"
    question_update(question=question, labels=swapped)
    assert dict(question.labels.values_list("key", "shortcut")) == {
        "negative": "3",
        "neutral": "2",
        "positive": "1",
    }


def test_repeated_shortcut_is_refused_and_nothing_changes(question):
    clash = [dict(label, shortcut="1") for label in SENTIMENT_LABELS]
    with pytest.raises(ValidationError, match="shortcut '1' is already label 1's"):
        question_update(question=question, labels=clash)
    assert sorted(question.labels.values_list("shortcut", flat=True)) == ["1", "2", "3"]


def test_categorical_question_needs_two_labels(db):
    with pytest.raises(ValidationError, match="at least two labels"):
        question_create(study=StudyFactory(), key="q", prompt="?", labels=SENTIMENT_LABELS[:1])


def test_labels_keep_their_order_and_coordinates(question):
    assert list(question.labels.values_list("key", "position", "valence")) == [
        ("negative", 0, -1.0),
        ("neutral", 1, 0.0),
        ("positive", 2, 1.0),
    ]


def test_membership_role_change_needs_consent(db):
    from apps.studies.models import Membership
    from apps.studies.services import membership_add

    study = StudyFactory()
    manager = study.created_by
    with pytest.raises(ValidationError, match="already manager"):
        membership_add(study=study, user=manager, role=Membership.Role.ANNOTATOR)
    assert membership_add(study=study, user=manager, role=Membership.Role.MANAGER).role == "manager"
    changed = membership_add(
        study=study, user=manager, role=Membership.Role.ANNOTATOR, change_role=True
    )
    assert changed.role == "annotator"
