"""A small disputed study: four annotators, six items, answers chosen so items differ in
disagreement (item 0 unanimous, 1 and 2 split, 3 a two-two tie)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
from apps.studies.models import Membership, Question, Study
from apps.studies.services import membership_add
from tests.factories import UserFactory, running_study

#: answers[annotator][item]: label keys of the sentiment scale (None: not answered)
ANSWERS = [
    ["positive", "positive", "negative", "negative", "neutral", None],
    ["positive", "negative", "negative", "negative", "neutral", None],
    ["positive", "positive", "positive", "positive", "neutral", None],
    ["positive", "positive", "negative", "positive", "neutral", None],
]


@dataclass
class Disputed:
    study: Study
    question: Question
    manager: Any
    reviewer: Any
    annotators: list[Any]
    items: list[Any]


@pytest.fixture
def disputed(db) -> Disputed:
    study, annotators = running_study(n_items=6, n_annotators=4)
    items = list(study.items.order_by("position"))
    annotations_import_finished(
        study=study,
        records=[
            FinishedAnnotation(items[i].external_id, user.username, "sentiment", label)
            for user, row in zip(annotators, ANSWERS, strict=True)
            for i, label in enumerate(row)
            if label is not None
        ],
    )
    reviewer = UserFactory()
    membership_add(study=study, user=reviewer, role=Membership.Role.REVIEWER)
    question = study.questions.get(key="sentiment")
    return Disputed(study, question, study.created_by, reviewer, annotators, items)
