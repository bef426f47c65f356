"""Adaptive overlap: a disputed item is queued for one more annotator, first in their queue."""

from __future__ import annotations

import uuid

import pytest

from analytics.models import Flag
from analytics.services import annotator_exclude
from apps.adjudication.services import overlap_rule_set
from apps.annotations.models import Assignment
from apps.annotations.selectors import assignment_next
from apps.annotations.services import annotations_submit
from tests.factories import running_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def adaptive():
    study, _ = running_study(n_items=4, n_annotators=4, overlap=2)
    question = study.questions.get()
    overlap_rule_set(manager=study.created_by, question=question, base_k=2, k_max=3, threshold=0.5)
    return study, question


def answer(study, question, user, item, label: str) -> None:
    annotations_submit(
        annotator=user,
        assignment=Assignment.objects.get(item=item, annotator=user, round=1),
        answers={question: label},
        idempotency_key=uuid.uuid4(),
    )


def first_pair(study):
    item = study.items.order_by("position").first()
    users = [a.annotator for a in Assignment.objects.filter(item=item).order_by("annotator_id")]
    return item, users


def test_a_disputed_item_reaches_a_third_annotator_first_in_their_queue(adaptive):
    study, question = adaptive
    item, (first, second) = first_pair(study)
    answer(study, question, first, item, "negative")
    assert not Assignment.objects.filter(extra=True).exists()  # one answer: nothing to judge
    answer(study, question, second, item, "positive")
    extra = Assignment.objects.get(extra=True)
    assert extra.item == item
    assert extra.annotator not in (first, second)
    assert assignment_next(annotator=extra.annotator, study=study) == extra
    answer(study, question, extra.annotator, item, "positive")
    assert Assignment.objects.filter(item=item, round=1).count() == 3  # k_max reached


def test_agreeing_items_keep_their_k(adaptive):
    study, question = adaptive
    item, (first, second) = first_pair(study)
    answer(study, question, first, item, "neutral")
    answer(study, question, second, item, "neutral")
    assert not Assignment.objects.filter(extra=True).exists()


@pytest.mark.parametrize("how", ["excluded", "flagged"])
def test_excluded_and_flagged_annotators_answers_do_not_count(adaptive, how):
    study, question = adaptive
    item, (first, second) = first_pair(study)
    if how == "excluded":
        annotator_exclude(study=study, annotator=first, by=study.created_by, reason="spam")
    else:
        Flag.objects.create(
            study=study, question=question, annotator=first, indicator="kappa", reason="low"
        )
    answer(study, question, first, item, "negative")
    answer(study, question, second, item, "positive")
    assert not Assignment.objects.filter(extra=True).exists()  # one counted answer only


def test_a_rule_set_mid_study_extends_the_items_already_disputed():
    study, _ = running_study(n_items=4, n_annotators=4, overlap=2)
    question = study.questions.get()
    item, (first, second) = first_pair(study)
    answer(study, question, first, item, "negative")
    answer(study, question, second, item, "positive")
    assert not Assignment.objects.filter(extra=True).exists()  # no rule yet
    overlap_rule_set(manager=study.created_by, question=question, base_k=2, k_max=3, threshold=0.5)
    assert list(Assignment.objects.filter(extra=True).values_list("item", flat=True)) == [item.pk]
