"""Reads of the analytics app: exclusions, ratings matrices, snapshots, flags, hot items."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypedDict

import numpy as np
from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KeyTextTransform
from numpy.typing import NDArray

from analytics.models import Exclusion, Flag, ItemDisagreement, QualitySnapshot
from apps.annotations.models import Annotation
from apps.studies.models import Membership, Question, Study
from core.types import Visitor


def active_exclusions(*, study: Study) -> QuerySet[Exclusion]:
    """The study's exclusions in force (not revoked), with annotator and manager, by username."""
    return (
        Exclusion.objects.filter(study=study, revoked_at__isnull=True)
        .select_related("annotator", "by")
        .order_by("annotator__username")
    )


def excludable_annotators(*, study: Study) -> QuerySet[Any]:
    """Who a manager may exclude: the study's members and anyone whose answers it holds (a
    removed member's answers stay, and so does the choice to leave them out)."""
    answered = Annotation.objects.filter(question__study=study, annotator=OuterRef("pk"))
    return (
        get_user_model()
        .objects.filter(Q(memberships__study=study) | Q(Exists(answered)))
        .distinct()
    )


def excluded_annotator_ids(*, study: Study) -> set[int]:
    """Annotators a manager excluded from the study (not revoked): curated exports skip them."""
    return set(active_exclusions(study=study).values_list("annotator_id", flat=True))


def is_study_manager(*, user: Visitor, study_id: int) -> bool:
    """Whether the user manages the study (the only people who see its quality dashboard)."""
    if not user.is_authenticated:
        return False
    return Membership.objects.filter(
        study_id=study_id, user_id=user.pk, role=Membership.Role.MANAGER
    ).exists()


def question_ratings(
    *,
    question_id: int,
    annotator_ids: Sequence[int],
    value_keys: Sequence[str],
    item_ids: Sequence[int] | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Round-1 current labels as a ratings matrix on the quality state's axes.

    Returns the item ids ``(N,)`` and ratings ``(M, N)`` (value codes, nan = not annotated),
    restricted to ``item_ids`` when given. Annotators or labels not on the axes yet (their
    annotation is still pending) are left out.
    """
    rows = Annotation.objects.filter(
        question_id=question_id, round=1, current_revision__value__isnull=False
    )
    if item_ids is not None:
        rows = rows.filter(item_id__in=item_ids)
    annotator_index = {a: i for i, a in enumerate(annotator_ids)}
    value_index = {v: i for i, v in enumerate(value_keys)}
    # the label key as text in SQL: no JSON decoding of every row in Python
    labelled = rows.annotate(label_key=KeyTextTransform("label", "current_revision__value"))
    triples = [
        (item, annotator_index.get(user), value_index.get(key))
        for item, user, key in labelled.values_list(
            "item_id", "annotator_id", "label_key"
        ).iterator(chunk_size=20_000)
    ]
    kept = np.array([t for t in triples if t[1] is not None and t[2] is not None], dtype=np.int64)
    if kept.size == 0:
        return np.zeros(0, dtype=np.int64), np.full((len(annotator_ids), 0), np.nan)
    items, column = np.unique(kept[:, 0], return_inverse=True)
    ratings = np.full((len(annotator_ids), items.size), np.nan)
    ratings[kept[:, 1], column] = kept[:, 2]
    return items, ratings


def latest_snapshot(*, question: Question, matrices: bool = True) -> QualitySnapshot | None:
    """The question's newest snapshot; without ``matrices`` its pair matrices are left in the
    database (read if asked for): 175 KB of JSON with 128 annotators, which only the plots
    draw, decoded on every light push."""
    snapshots = QualitySnapshot.objects.filter(question=question)
    if not matrices:
        snapshots = snapshots.defer("matrices")
    return snapshots.order_by("-created_at", "-id").first()


def latest_interval_records() -> list[tuple[int, int, dict[str, Any] | None]]:
    """Per question with a snapshot: its id, the answers its latest snapshot counts and that
    snapshot's record of its intervals (``None``: none yet)."""
    latest = QualitySnapshot.objects.filter(question=OuterRef("question")).order_by(
        "-created_at", "-id"
    )
    return list(
        QualitySnapshot.objects.filter(pk=Subquery(latest.values("pk")[:1])).values_list(
            "question_id", "n_annotations", "indicators__study__intervals"
        )
    )


class SnapshotPoint(TypedDict):
    """A past snapshot on the dashboard's trends: when, its annotators, one indicator's value
    per annotator (in the annotators' order; [] if absent) and the study figures asked for."""

    created_at: datetime
    annotators: list[int]
    values: list[float | None]
    study: dict[str, Any]


def snapshot_history(
    *, question: Question, indicator: str, study_keys: Sequence[str], limit: int = 40
) -> list[SnapshotPoint]:
    """The newest ``limit`` snapshots' points of the trends, oldest first.

    The database extracts the parts the trends draw (the annotators, the ``indicator``'s
    series, the ``study_keys`` figures): a snapshot's indicators are about 30 KB of JSON with
    64 annotators, nearly all of it intervals and other series, and decoding 40 of them
    whole took a sixth of a live dashboard push's CPU.
    """
    rows = (
        QualitySnapshot.objects.filter(question=question)
        .order_by("-created_at", "-id")
        .values_list(
            "created_at",
            "indicators__annotators",
            f"indicators__values__{indicator}",
            *(f"indicators__study__{key}" for key in study_keys),
        )[:limit]
    )
    return [
        SnapshotPoint(
            created_at=created_at,
            annotators=annotators or [],
            values=values or [],
            study=dict(zip(study_keys, figures, strict=True)),
        )
        for created_at, annotators, values, *figures in list(rows)[::-1]
    ]


def question_flags(*, question: Question) -> QuerySet[Flag]:
    return Flag.objects.filter(question=question).select_related("annotator")


def top_disagreements(*, question: Question, limit: int = 10) -> QuerySet[ItemDisagreement]:
    """Items whose round-1 answers disagree most (AAD-RMSE), most disputed first."""
    return (
        ItemDisagreement.objects.filter(question=question, aad_rmse__isnull=False)
        .select_related("item")
        .order_by("-aad_rmse", "item_id")[:limit]
    )


def study_flags(*, study: Study) -> QuerySet[Flag]:
    """Every flag of the study (any status), with annotator and question, in a stable order."""
    return (
        Flag.objects.filter(study=study)
        .select_related("annotator", "question")
        .order_by("annotator__username", "question__key", "indicator", "id")
    )
