"""Bulk import of finished annotations: rows, completion, validation, all or nothing."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from apps.annotations.exporting import annotation_export_rows
from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
from apps.annotations.models import Annotation, Assignment, Revision
from apps.studies.models import Membership
from apps.studies.services import membership_add
from tests.factories import ItemFactory, StudyFactory, UserFactory, categorical_question

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft():
    """A draft study with one question, three items and two annotators."""
    study = StudyFactory()
    categorical_question(study)
    items = [ItemFactory(study=study, position=10 + n) for n in range(3)]
    annotators = [UserFactory() for _ in range(2)]
    for user in annotators:
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    return study, items, annotators


def records(items, annotators, labels=("positive", "negative", "neutral")):
    return [
        FinishedAnnotation(item.external_id, user.username, "sentiment", label, time_spent_ms=700)
        for item, label in zip(items, labels, strict=True)
        for user in annotators
    ]


def test_import_stores_annotations_revisions_and_completed_assignments(draft):
    study, items, annotators = draft
    assert annotations_import_finished(study=study, records=records(items, annotators)) == 6
    annotations = Annotation.objects.filter(question__study=study)
    assert annotations.count() == 6
    assert not annotations.filter(current_revision__isnull=True).exists()
    assert annotations.filter(analysis_pending=True).count() == 6
    revision = Revision.objects.get(annotation__item=items[1], annotation__annotator=annotators[0])
    assert (revision.number, revision.value, revision.label.key) == (
        1,
        {"label": "negative"},
        "negative",
    )
    assert (revision.source, revision.time_spent_ms) == (Revision.Source.IMPORT, 700)
    assignments = Assignment.objects.filter(study=study)
    assert assignments.count() == 6
    assert not assignments.filter(completed_at__isnull=True).exists()
    assert sorted(set(assignments.values_list("position", flat=True))) == [10, 11, 12]
    exported = list(annotation_export_rows(study=study))
    assert {row["source"] for row in exported} == {"import"}


def test_existing_assignments_are_completed_not_duplicated(study_setup):
    study, annotators = study_setup
    before = Assignment.objects.filter(study=study).count()
    items = list(study.items.order_by("position")[:2])
    annotations_import_finished(
        study=study, records=records(items, annotators, labels=("positive", "neutral"))
    )
    assert Assignment.objects.filter(study=study).count() == before
    done = Assignment.objects.filter(study=study, round=1, completed_at__isnull=False)
    assert set(done.values_list("item_id", flat=True)) == {item.pk for item in items}


def test_problems_are_listed_by_record_and_nothing_is_stored(draft):
    study, items, annotators = draft
    outsider = UserFactory()
    bad = [
        *records(items[:1], annotators[:1], labels=("positive",)),
        FinishedAnnotation("nope", annotators[0].username, "sentiment", "positive"),
        FinishedAnnotation(items[1].external_id, outsider.username, "sentiment", "positive"),
        FinishedAnnotation(items[1].external_id, annotators[0].username, "mood", "positive"),
        FinishedAnnotation(items[1].external_id, annotators[0].username, "sentiment", "great"),
        *records(items[:1], annotators[:1], labels=("positive",)),
    ]
    with pytest.raises(ValidationError) as caught:
        annotations_import_finished(study=study, records=bad)
    messages = caught.value.messages
    assert [message.split(":")[0] for message in messages] == [f"record {n}" for n in range(2, 7)]
    assert "Unknown item 'nope'" in messages[0]
    assert "is not an annotator" in messages[1]
    assert "Unknown question 'mood'" in messages[2]
    assert "'great' is not a label" in messages[3]
    assert "second answer" in messages[4]
    assert not Annotation.objects.exists()
    assert not Assignment.objects.exists()


def test_a_study_with_annotations_is_refused(draft):
    study, items, annotators = draft
    annotations_import_finished(study=study, records=records(items, annotators))
    with pytest.raises(ValidationError, match="without any"):
        annotations_import_finished(study=study, records=records(items, annotators))
