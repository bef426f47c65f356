"""Reads of queues, progress and current annotations."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Prefetch, Q, QuerySet

from apps.annotations.models import Annotation, Assignment, Revision
from apps.items.models import Item
from apps.studies.models import Study
from core.types import Account


def assignment_next(*, annotator: Account, study: Study) -> Assignment | None:
    """The annotator's next unfinished assignment: unskipped first, then the extra items of
    adaptive overlap, then in queue order."""
    return (
        Assignment.objects.filter(study=study, annotator=annotator, completed_at__isnull=True)
        .select_related("item")
        .order_by("skip_count", "-extra", "position", "round", "id")
        .first()
    )


@dataclass(frozen=True)
class AnswerShown:
    """An answered item as the undo names it: "‘Positive’ on item 12"."""

    assignment_id: int
    item: str
    labels: list[str]

    def __str__(self) -> str:
        return f"{', '.join(f'‘{name}’' for name in self.labels)} on item {self.item}"


def answer_shown(*, assignment: Assignment) -> AnswerShown | None:
    """The assignment's latest labels, the retracted ones included (``None`` if never answered).

    For an answered item these are its current labels; for an item reopened by an undo, the
    labels the undo retracted.
    """
    revisions = (
        Revision.objects.filter(
            annotation__item_id=assignment.item_id,
            annotation__annotator_id=assignment.annotator_id,
            annotation__round=assignment.round,
            annotation__question__study_id=assignment.study_id,
            label__isnull=False,
        )
        .order_by("annotation__question__position", "annotation_id", "-number")
        .values_list("annotation_id", "label__name")
    )
    latest: dict[int, str] = {}
    for annotation_id, name in revisions:
        latest.setdefault(annotation_id, name)
    if not latest:
        return None
    return AnswerShown(
        assignment_id=assignment.pk,
        item=assignment.item.external_id,
        labels=list(latest.values()),
    )


def undo_next(*, annotator: Account, study: Study) -> AnswerShown | None:
    """What the annotator's next undo retracts: their latest answered item (``None``: nothing).

    Each undo reopens that item, so the one after goes a step further back.
    """
    latest = answered_latest_first(annotator=annotator, study=study).select_related("item").first()
    return None if latest is None else answer_shown(assignment=latest)


def answered_latest_first(*, annotator: Account, study: Study) -> QuerySet[Assignment]:
    """The annotator's answered items, the latest answer first: the order undos take."""
    return Assignment.objects.filter(
        study=study, annotator=annotator, completed_at__isnull=False
    ).order_by("-completed_at", "-id")


def annotator_progress(*, annotator: Account, study: Study) -> dict[str, int]:
    """``{"done": n, "total": n, "percent": p}`` for one annotator's queue."""
    counts = Assignment.objects.filter(study=study, annotator=annotator).aggregate(
        total=Count("id"), done=Count("id", filter=Q(completed_at__isnull=False))
    )
    total, done = counts["total"], counts["done"]
    return {"done": done, "total": total, "percent": round(100 * done / total) if total else 0}


def study_progress(*, study: Study) -> QuerySet:
    """Per annotator: username, assigned, done, repeats and median-free mean time spent."""
    return (
        Assignment.objects.filter(study=study)
        .values("annotator_id", "annotator__username")
        .annotate(
            total=Count("id"),
            done=Count("id", filter=Q(completed_at__isnull=False)),
            repeats=Count("id", filter=Q(round=2)),
            skipped=Count("id", filter=Q(skip_count__gt=0, completed_at__isnull=True)),
        )
        .order_by("annotator__username")
    )


def item_coverage(*, study: Study) -> QuerySet:
    """Per item: assigned annotators and finished first-round assignments."""
    return study.items.annotate(
        assigned=Count("assignments", filter=Q(assignments__round=1), distinct=True),
        done=Count(
            "assignments",
            filter=Q(assignments__round=1, assignments__completed_at__isnull=False),
            distinct=True,
        ),
    ).order_by("position", "id")


def current_annotations(*, study: Study) -> QuerySet[Annotation]:
    """Live annotations (latest revision not a retraction) of a study, for export and analytics."""
    return (
        Annotation.objects.filter(question__study=study, current_revision__value__isnull=False)
        .select_related("question", "item", "annotator", "current_revision")
        .order_by("id")
    )


def revisions_of_study(*, study: Study) -> QuerySet[Revision]:
    """Every revision ever made in a study (the full audit history), oldest first."""
    return (
        Revision.objects.filter(annotation__question__study=study)
        .select_related("annotation__question", "annotation__item", "annotation__annotator")
        .order_by("annotation_id", "number")
    )


def item_history(*, item: Item) -> QuerySet[Annotation]:
    """Every annotation of an item (all questions, annotators and rounds) with its whole
    revision history, oldest revision first: what a manager reads to settle a disagreement."""
    return (
        Annotation.objects.filter(item=item)
        .select_related("question", "annotator", "current_revision")
        .prefetch_related(
            Prefetch(
                "revisions", queryset=Revision.objects.select_related("label").order_by("number")
            )
        )
        .order_by("question__position", "question_id", "annotator__username", "round")
    )
