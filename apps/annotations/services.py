"""Every write to assignments and annotations: fill queues, submit, skip, undo.

Annotations are append-only: each submission appends a :class:`Revision`; a client-generated
idempotency key makes retries, double clicks and second tabs harmless.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from typing import Any

import numpy as np
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from analytics.pipeline import quality_schedule
from apps.annotations.models import Annotation, Assignment, Revision
from apps.annotations.values import QUEUE_KINDS, clean_value
from apps.studies.models import Question, Study
from apps.studies.selectors import study_annotators


def _choose_annotators(
    *, n_annotators: int, k: int, existing: list[set[int]], seed: int
) -> list[list[int]]:
    """Pick, per item, the annotators still needed so loads stay even and pairs share items.

    Greedy: each pick takes the annotator with the lowest load, ties broken by the fewest items
    already shared with the annotators chosen for this item, then by a seeded random jitter.
    """
    rng = np.random.default_rng(seed)
    load = np.zeros(n_annotators)
    shared = np.zeros((n_annotators, n_annotators))
    for chosen in existing:
        idx = list(chosen)
        load[idx] += 1
        shared[np.ix_(idx, idx)] += 1
    picks: list[list[int]] = []
    big = len(existing) * n_annotators + 1.0
    for chosen_set in existing:
        chosen = list(chosen_set)
        new: list[int] = []
        for _ in range(max(0, k - len(chosen))):
            score = load * big + shared[chosen].sum(axis=0) + rng.random(n_annotators) * 0.5
            score[chosen] = np.inf
            pick = int(np.argmin(score))
            load[pick] += 1
            shared[pick, chosen] += 1
            shared[chosen, pick] += 1
            chosen.append(pick)
            new.append(pick)
        picks.append(new)
    return picks


@transaction.atomic
def assignments_fill(*, study: Study) -> int:
    """Give every item its ``k`` annotators (all when ``overlap`` is empty), plus repeats.

    Existing assignments are kept; only missing ones are added, so this is safe to call again
    after items or annotators are added. Each annotator's queue follows the study's item order,
    so annotators share finished items early. A share ``repeat_rate`` of each annotator's new
    items is queued again as round 2, a quarter of the study later, for test-retest agreement.
    Returns the number of assignments created.
    """
    Study.objects.select_for_update().filter(pk=study.pk).first()  # one fill at a time
    annotator_ids = list(study_annotators(study=study).values_list("id", flat=True))
    if not annotator_ids:
        return 0
    index = {user_id: i for i, user_id in enumerate(annotator_ids)}
    items = list(study.items.order_by("position", "id").values_list("id", flat=True))
    existing: dict[int, set[int]] = {item_id: set() for item_id in items}
    for item_id, user_id in Assignment.objects.filter(study=study, round=1).values_list(
        "item_id", "annotator_id"
    ):
        if user_id in index:
            existing[item_id].add(index[user_id])
    k = min(study.overlap or len(annotator_ids), len(annotator_ids))
    picks = _choose_annotators(
        n_annotators=len(annotator_ids),
        k=k,
        existing=[existing[item_id] for item_id in items],
        seed=study.pk,
    )
    new = [
        Assignment(study=study, item_id=item_id, annotator_id=annotator_ids[a], position=pos)
        for pos, (item_id, chosen) in enumerate(zip(items, picks, strict=True))
        for a in chosen
    ]
    if study.repeat_rate > 0:
        gap = max(5, len(items) // 4)
        rng = random.Random(f"repeat-{study.pk}")
        new += [
            Assignment(
                study=study,
                item_id=a.item_id,
                annotator_id=a.annotator_id,
                round=2,
                position=a.position + gap,
            )
            for a in new
            if rng.random() < study.repeat_rate
        ]
    Assignment.objects.bulk_create(new, batch_size=2000, ignore_conflicts=True)
    return len(new)


def assignment_check_annotator(*, annotator: AbstractBaseUser, assignment: Assignment) -> None:
    """Refuse unless ``assignment`` is the annotator's own and its study is running."""
    if assignment.annotator_id != annotator.pk:
        raise PermissionDenied("This assignment belongs to another annotator.")
    if assignment.study.status != Study.Status.RUNNING:
        raise ValidationError({"study": "The study is not running; annotations are closed."})


def _annotation_for_update(*, question: Question, assignment: Assignment) -> Annotation:
    """Get or create the annotation row and lock it, safe against concurrent first submits."""
    lookup = {
        "question": question,
        "item_id": assignment.item_id,
        "annotator_id": assignment.annotator_id,
        "round": assignment.round,
    }
    annotation = Annotation.objects.filter(**lookup).first()
    if annotation is None:
        try:
            with transaction.atomic():
                annotation = Annotation.objects.create(**lookup)
        except IntegrityError:
            annotation = Annotation.objects.get(**lookup)
    return Annotation.objects.select_for_update().get(pk=annotation.pk)


def _revision_append(
    *,
    annotation: Annotation,
    value: Any,
    label_id: int | None,
    idempotency_key: uuid.UUID,
    time_spent_ms: int | None,
    source: str,
) -> Revision:
    """Append a revision to a locked annotation, or return the one this key already made."""
    previous = annotation.revisions.filter(idempotency_key=idempotency_key).first()
    if previous is not None:
        if previous.value != value:
            raise ValidationError(
                {"idempotency_key": "This key was already used for a different answer."}
            )
        return previous
    number = (annotation.revisions.aggregate(n=Max("number"))["n"] or 0) + 1
    revision = Revision.objects.create(
        annotation=annotation,
        number=number,
        value=value,
        label_id=label_id,
        idempotency_key=idempotency_key,
        time_spent_ms=time_spent_ms,
        source=source,
    )
    annotation.current_revision = revision
    annotation.analysis_pending = True
    annotation.save(update_fields=["current_revision", "analysis_pending"])
    quality_schedule(question_id=annotation.question_id)
    return revision


def _assignment_refresh_completion(*, assignment: Assignment) -> None:
    """Mark the assignment complete once every queue question has a live answer."""
    needed = set(
        assignment.study.questions.filter(kind__in=QUEUE_KINDS).values_list("id", flat=True)
    )
    answered = set(
        Annotation.objects.filter(
            question_id__in=needed,
            item_id=assignment.item_id,
            annotator_id=assignment.annotator_id,
            round=assignment.round,
            current_revision__value__isnull=False,
        ).values_list("question_id", flat=True)
    )
    done = needed <= answered
    if done != (assignment.completed_at is not None):
        assignment.completed_at = timezone.now() if done else None
        assignment.save(update_fields=["completed_at"])


@transaction.atomic
def annotations_submit(
    *,
    annotator: AbstractBaseUser,
    assignment: Assignment,
    answers: Mapping[Question, Any],
    idempotency_key: uuid.UUID,
    time_spent_ms: int | None = None,
    source: str = Revision.Source.UI,
) -> list[Revision]:
    """Record one annotator's answers to an assigned item, one revision per question.

    Re-sending the same ``idempotency_key`` returns the revisions it made the first time;
    answering again with a new key appends revisions (the latest counts). All or nothing: one
    bad answer stores none of them.
    """
    assignment = Assignment.objects.select_related("study").get(pk=assignment.pk)
    assignment_check_annotator(annotator=annotator, assignment=assignment)
    if not answers:
        raise ValidationError({"answers": "Answer at least one question."})
    if time_spent_ms is not None and time_spent_ms < 0:
        raise ValidationError({"time_spent_ms": "Time spent cannot be negative."})
    revisions = []
    for question, raw in answers.items():
        if question.study_id != assignment.study_id:
            raise ValidationError(
                {"question": f"{question.key!r} is not a question of this study."}
            )
        value, label = clean_value(question, raw, assignment=assignment)
        annotation = _annotation_for_update(question=question, assignment=assignment)
        revisions.append(
            _revision_append(
                annotation=annotation,
                value=value,
                label_id=label.pk if label else None,
                idempotency_key=idempotency_key,
                time_spent_ms=time_spent_ms,
                source=source,
            )
        )
    _assignment_refresh_completion(assignment=assignment)
    return revisions


@transaction.atomic
def assignment_skip(*, annotator: AbstractBaseUser, assignment: Assignment) -> Assignment:
    """Move an unfinished item behind the annotator's other unskipped items."""
    assignment = (
        Assignment.objects.select_for_update().select_related("study").get(pk=assignment.pk)
    )
    assignment_check_annotator(annotator=annotator, assignment=assignment)
    if assignment.completed_at is None:
        Assignment.objects.filter(pk=assignment.pk).update(skip_count=F("skip_count") + 1)
        assignment.refresh_from_db(fields=["skip_count"])
    return assignment


@transaction.atomic
def annotation_undo_last(
    *, annotator: AbstractBaseUser, study: Study, idempotency_key: uuid.UUID
) -> Assignment | None:
    """Retract the annotator's latest answered item and put it back at the front of the queue.

    The retraction is a revision with no value; the earlier revisions stay in the history.
    Re-sending the same key undoes nothing more. Returns the reopened assignment, or ``None``.
    """
    repeat = (
        Revision.objects.filter(
            idempotency_key=idempotency_key, annotation__annotator=annotator, value__isnull=True
        )
        .select_related("annotation")
        .first()
    )
    if repeat is not None:
        return Assignment.objects.filter(
            item_id=repeat.annotation.item_id,
            annotator=annotator,
            round=repeat.annotation.round,
        ).first()
    latest = (
        Assignment.objects.select_for_update()
        .select_related("study")
        .filter(study=study, annotator=annotator, completed_at__isnull=False)
        .order_by("-completed_at", "-id")
        .first()
    )
    if latest is None:
        return None
    assignment_check_annotator(annotator=annotator, assignment=latest)
    live = Annotation.objects.filter(
        item_id=latest.item_id,
        annotator=annotator,
        round=latest.round,
        question__study=study,
        current_revision__value__isnull=False,
    )
    for annotation in live.select_for_update():
        _revision_append(
            annotation=annotation,
            value=None,
            label_id=None,
            idempotency_key=idempotency_key,
            time_spent_ms=None,
            source=Revision.Source.UI,
        )
    latest.skip_count = 0
    latest.save(update_fields=["skip_count"])
    _assignment_refresh_completion(assignment=latest)
    return latest
