"""Submission, revisions, idempotency, skip, undo and queue filling."""

from __future__ import annotations

import uuid

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from apps.annotations.models import Annotation, Assignment, Revision
from apps.annotations.selectors import annotator_progress, assignment_next
from apps.annotations.services import (
    annotation_undo_last,
    annotations_submit,
    assignment_skip,
    assignments_fill,
)
from apps.studies.models import Membership, Study
from apps.studies.services import membership_add, study_set_status
from tests.factories import ItemFactory, UserFactory, running_study


def submit(study, user, label, *, key=None):
    assignment = assignment_next(annotator=user, study=study)
    question = study.questions.get()
    revisions, _ = annotations_submit(
        annotator=user,
        assignment=assignment,
        answers={question: {"label": label}},
        idempotency_key=key or uuid.uuid4(),
        time_spent_ms=1200,
    )
    return assignment, revisions


def test_submit_completes_assignment_and_advances(study_setup):
    study, (ann, *_) = study_setup
    first, (revision,) = submit(study, ann, "positive")
    assert revision.number == 1
    assert revision.label.key == "positive"
    first.refresh_from_db()
    assert first.completed_at is not None
    assert assignment_next(annotator=ann, study=study).pk != first.pk
    assert annotator_progress(annotator=ann, study=study) == {"done": 1, "total": 6, "percent": 17}


def test_same_key_twice_makes_one_revision(study_setup):
    study, (ann, *_) = study_setup
    key = uuid.uuid4()
    assignment, (rev1,) = submit(study, ann, "neutral", key=key)
    (rev2,), created = annotations_submit(
        annotator=ann,
        assignment=assignment,
        answers={study.questions.get(): "neutral"},
        idempotency_key=key,
    )
    assert rev1.pk == rev2.pk
    assert not created
    assert Revision.objects.count() == 1


def test_same_key_different_answer_is_refused(study_setup):
    study, (ann, *_) = study_setup
    key = uuid.uuid4()
    assignment, _ = submit(study, ann, "neutral", key=key)
    with pytest.raises(ValidationError, match="different answer"):
        annotations_submit(
            annotator=ann,
            assignment=assignment,
            answers={study.questions.get(): "positive"},
            idempotency_key=key,
        )


def test_edit_appends_a_revision_and_latest_counts(study_setup):
    study, (ann, *_) = study_setup
    assignment, (rev1,) = submit(study, ann, "neutral")
    (rev2,), created = annotations_submit(
        annotator=ann,
        assignment=assignment,
        answers={study.questions.get(): "negative"},
        idempotency_key=uuid.uuid4(),
    )
    assert created
    annotation = Annotation.objects.get()
    assert [r.number for r in annotation.revisions.all()] == [1, 2]
    assert annotation.current_revision == rev2
    assert Revision.objects.get(pk=rev1.pk).value == {"label": "neutral"}  # never overwritten


def test_bad_label_stores_nothing(study_setup):
    study, (ann, *_) = study_setup
    assignment = assignment_next(annotator=ann, study=study)
    with pytest.raises(ValidationError, match="not a label"):
        annotations_submit(
            annotator=ann,
            assignment=assignment,
            answers={study.questions.get(): "furious"},
            idempotency_key=uuid.uuid4(),
        )
    assert not Annotation.objects.exists()


def test_another_annotators_assignment_is_refused(study_setup):
    study, (ann, other, _) = study_setup
    assignment = assignment_next(annotator=other, study=study)
    with pytest.raises(PermissionDenied):
        annotations_submit(
            annotator=ann,
            assignment=assignment,
            answers={study.questions.get(): "neutral"},
            idempotency_key=uuid.uuid4(),
        )


def test_closed_study_refuses_annotations(study_setup):
    study, (ann, *_) = study_setup
    assignment = assignment_next(annotator=ann, study=study)
    study_set_status(study=study, status=Study.Status.CLOSED)
    with pytest.raises(ValidationError, match="not running"):
        annotations_submit(
            annotator=ann,
            assignment=assignment,
            answers={study.questions.get(): "neutral"},
            idempotency_key=uuid.uuid4(),
        )


def test_skip_moves_item_behind_the_others(study_setup):
    study, (ann, *_) = study_setup
    first = assignment_next(annotator=ann, study=study)
    assignment_skip(annotator=ann, assignment=first)
    assert assignment_next(annotator=ann, study=study).pk != first.pk


def test_undo_retracts_and_reopens_once_per_key(study_setup):
    study, (ann, *_) = study_setup
    submit(study, ann, "positive")
    second, _ = submit(study, ann, "negative")
    key = uuid.uuid4()
    reopened = annotation_undo_last(annotator=ann, study=study, idempotency_key=key)
    again = annotation_undo_last(annotator=ann, study=study, idempotency_key=key)
    assert reopened.pk == again.pk == second.pk
    assert annotator_progress(annotator=ann, study=study)["done"] == 1
    assert assignment_next(annotator=ann, study=study).pk == reopened.pk
    retracted = Annotation.objects.get(item=reopened.item, annotator=ann)
    assert retracted.current_revision.is_retraction
    assert retracted.revisions.count() == 2  # the label stays in the history


def test_fill_balances_load_and_covers_every_pair(db):
    study, annotators = running_study(n_items=60, n_annotators=6, overlap=2)
    per_annotator = [
        Assignment.objects.filter(study=study, annotator=a).count() for a in annotators
    ]
    assert sum(per_annotator) == 120
    assert max(per_annotator) - min(per_annotator) <= 1
    pairs = set()
    for item in study.items.all():
        ids = sorted(item.assignments.values_list("annotator_id", flat=True))
        assert len(ids) == 2
        pairs.add(tuple(ids))
    assert len(pairs) == 15  # all 6 * 5 / 2 pairs share at least one item


def test_fill_is_idempotent_and_serves_late_items_and_annotators(db):
    study, _ = running_study(n_items=4, n_annotators=2)
    assert assignments_fill(study=study) == 0
    ItemFactory(study=study)
    late = UserFactory()
    membership_add(study=study, user=late, role=Membership.Role.ANNOTATOR)
    assert Assignment.objects.filter(annotator=late).count() == 5
    assert Assignment.objects.filter(study=study).count() == 15


def test_repeat_rate_queues_round_two_later(db):
    _, (ann,) = running_study(n_items=40, n_annotators=1, repeat_rate=0.25)
    repeats = Assignment.objects.filter(annotator=ann, round=2)
    assert repeats.count() == 10  # exactly the share: 40 x 0.25
    for repeat in repeats:
        original = Assignment.objects.get(annotator=ann, item=repeat.item, round=1)
        assert repeat.position >= original.position + 10


def test_every_annotator_gets_the_same_number_of_repeats_and_no_long_stimulus(db, settings):
    """A 10 % rate gave one annotator 6 repeats and another 1 (each answer drawn with the
    rate's chance), and repeated a 266 s trace: now the rounded share each, at most
    STUDY_MAX_REPEATS, and never a stimulus longer than REPEAT_MAX_SECONDS."""
    from apps.items.models import Item

    settings.STUDY_MAX_REPEATS = 3
    settings.REPEAT_MAX_SECONDS = 60
    study, annotators = running_study(n_items=40, n_annotators=4, repeat_rate=0.1)
    counts = [Assignment.objects.filter(annotator=a, round=2).count() for a in annotators]
    assert counts == [3, 3, 3, 3]  # 4 expected, capped at 3, the same for everyone
    long_clip = Item.objects.create(
        study=study,
        external_id="long",
        kind="audio",
        url="https://example.org/a.wav",
        metadata={"duration": 266},
        position=100,
    )
    Assignment.objects.filter(study=study).delete()
    settings.STUDY_MAX_REPEATS = 100
    study.repeat_rate = 1.0
    study.save()
    from apps.annotations.services import assignments_fill

    assignments_fill(study=study)
    assert not Assignment.objects.filter(item=long_clip, round=2).exists()
    assert Assignment.objects.filter(round=2).exclude(item=long_clip).count() == 4 * 40


def test_a_replayed_key_after_an_undo_leaves_the_item_open(study_setup):
    """A replay returns the key's first revision, which an undo has retracted since: the item
    stays open (the completion is decided by the database, not by the replayed revision)."""
    study, (ann, *_) = study_setup
    key = uuid.uuid4()
    first, _ = submit(study, ann, "positive", key=key)
    annotation_undo_last(annotator=ann, study=study, idempotency_key=uuid.uuid4())
    question = study.questions.get()
    revisions, created = annotations_submit(
        annotator=ann,
        assignment=Assignment.objects.get(pk=first.pk),
        answers={question: {"label": "positive"}},
        idempotency_key=key,
    )
    assert created is False
    assert revisions[0].number == 1
    first.refresh_from_db()
    assert first.completed_at is None
    assert assignment_next(annotator=ann, study=study) == first


def test_an_answer_after_an_undo_appends_to_the_same_annotation(study_setup):
    """An open item usually has no annotation yet, so the insert comes first; after an undo it
    has one: the insert fails, and the existing row takes the new revision."""
    study, (ann, *_) = study_setup
    first, _ = submit(study, ann, "positive")
    annotation_undo_last(annotator=ann, study=study, idempotency_key=uuid.uuid4())
    again, (revision,) = submit(study, ann, "negative")
    assert again == first
    assert revision.number == 3  # answer, retraction, answer
    annotation = Annotation.objects.get(item=first.item, annotator=ann)
    assert annotation.current_revision == revision
    assert list(annotation.revisions.values_list("number", flat=True)) == [1, 2, 3]
    again.refresh_from_db()
    assert again.completed_at is not None
