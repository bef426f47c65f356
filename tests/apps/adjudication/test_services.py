"""Adjudications are append-only, checked, and only managers and reviewers make them."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from analytics.models import ItemDisagreement
from analytics.publishing import quality_publish
from apps.adjudication.models import Adjudication
from apps.adjudication.selectors import (
    curated_aggregates,
    disputed_items,
    latest_adjudications,
    question_aggregates,
)
from apps.adjudication.services import adjudication_record, overlap_rule_set
from apps.categorical.quality import quality_process_pending
from apps.studies.services import question_create

pytestmark = pytest.mark.django_db


def test_reviewer_and_manager_adjudicate_and_the_latest_counts(disputed):
    item = disputed.items[1]
    first = adjudication_record(
        adjudicator=disputed.reviewer, question=disputed.question, item=item, label_key="negative"
    )
    second = adjudication_record(
        adjudicator=disputed.manager,
        question=disputed.question,
        item=item,
        label_key=None,
        note="Sarcasm: both readings hold.",
    )
    assert Adjudication.objects.filter(item=item).count() == 2  # nothing overwritten
    assert first.label.key == "negative"
    latest = latest_adjudications(question=disputed.question)
    assert latest[item.pk] == second
    assert second.ambiguous
    assert second.label is None


def test_annotators_cannot_adjudicate(disputed):
    with pytest.raises(PermissionDenied):
        adjudication_record(
            adjudicator=disputed.annotators[0],
            question=disputed.question,
            item=disputed.items[1],
            label_key="negative",
        )


def test_ambiguous_needs_a_note_and_labels_must_belong_to_the_question(disputed):
    with pytest.raises(ValidationError, match="genuinely ambiguous"):
        adjudication_record(
            adjudicator=disputed.manager,
            question=disputed.question,
            item=disputed.items[1],
            label_key=None,
            note="  ",
        )
    with pytest.raises(ValidationError, match="not a label"):
        adjudication_record(
            adjudicator=disputed.manager,
            question=disputed.question,
            item=disputed.items[1],
            label_key="joy",
        )
    assert not Adjudication.objects.exists()


def test_only_categorical_questions_are_adjudicated(disputed):
    trace = question_create(
        study=disputed.study, key="trace", prompt="How intense?", kind="continuous"
    )
    with pytest.raises(ValidationError, match="categorical"):
        adjudication_record(
            adjudicator=disputed.manager,
            question=trace,
            item=disputed.items[1],
            label_key=None,
            note="x",
        )


def test_disputed_items_are_sorted_by_disagreement_and_match_the_quality_state(disputed):
    """Without exclusions the figures are the quality state's own (ItemDisagreement)."""
    quality_process_pending(question_id=disputed.question.pk)
    quality_publish(question_id=disputed.question.pk, rebuild=True)
    found = curated_aggregates(question=disputed.question)
    rows = disputed_items(aggregates=found)
    by_id = {item.pk: i for i, item in enumerate(disputed.items)}
    assert [by_id[row["item_id"]] for row in rows] == [3, 1, 2]  # 2-2 tie, two 3-1 splits
    assert rows[0]["tied"]
    assert rows[0]["majority"] is None
    assert [row["majority"] for row in rows[1:]] == ["positive", "negative"]
    stored = dict(
        ItemDisagreement.objects.filter(question=disputed.question).values_list(
            "item_id", "aad_rmse"
        )
    )
    for row in rows:
        assert row["disagreement"] == pytest.approx(stored[row["item_id"]])


def test_left_out_annotators_do_not_count(disputed):
    odd_one = disputed.annotators[2]  # the only "positive" on items 2 and 3
    found = question_aggregates(question=disputed.question, left_out={odd_one.pk})
    assert odd_one.pk not in found.annotator_ids
    row = found.row(disputed.items[2].pk)
    assert found.aggregates.disagreement[row] == 0
    assert found.aggregates.n_answers[row] == 3


def test_overlap_rule_is_checked_and_for_managers(disputed):
    with pytest.raises(PermissionDenied):
        overlap_rule_set(
            manager=disputed.reviewer, question=disputed.question, base_k=2, k_max=4, threshold=0.5
        )
    with pytest.raises(ValidationError, match="k_max"):
        overlap_rule_set(
            manager=disputed.manager, question=disputed.question, base_k=4, k_max=3, threshold=0.5
        )
    rule = overlap_rule_set(
        manager=disputed.manager, question=disputed.question, base_k=2, k_max=4, threshold=0.5
    )
    assert (rule.base_k, rule.k_max) == (2, 4)
