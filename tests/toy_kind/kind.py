"""The toy "rating" kind: an integer from 0 to 10 per item, answered in the annotator's queue.

Its quality state keeps, per annotator, how many items they rated and the sum of their ratings,
and per annotator pair the items both rated and the sum of their absolute differences (round 1
only). The one flagged indicator is the closeness to the others, 1 - mean |difference| / 10.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from numpy.typing import NDArray

from analytics.indicators import (
    Derived,
    FlagRule,
    Indicator,
    Json,
    json_counts,
    json_ready,
    pair_matrices,
    ratio,
)
from analytics.models import QualityState
from analytics.pipeline import annotator_index, publish_after_commit, state_for_update
from apps.annotations.exporting import annotation_export_rows
from apps.annotations.models import Annotation, Assignment
from apps.studies.kinds import QuestionKind
from apps.studies.models import Label, Question

SCALE_MAX = 10
RATINGS = Indicator("ratings_done", "Ratings", "{:.0f}", explanation="Items rated.")
MEAN_RATING = Indicator("mean_rating", "Mean rating", "{:.1f}", explanation="Average rating given.")
CLOSENESS = Indicator(
    "closeness",
    "Closeness to others",
    direction="higher",
    rule=FlagRule("closeness to others", floor=0.5),
    explanation="One minus the mean distance to the others' ratings, scaled to 0-1.",
)


def _load(state: QualityState, m: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-annotator (n, sum) ``(M, 2)`` and per-pair (n, sum |diff|) ``(M, M, 2)``."""
    own, pairs = np.zeros((m, 2)), np.zeros((m, m, 2))
    if state.stats:
        stored = np.load(io.BytesIO(bytes(state.stats)))
        k = stored["own"].shape[0]
        own[:k], pairs[:k, :k] = stored["own"], stored["pairs"]
    return own, pairs


def _add(own: NDArray, pairs: NDArray, view: Mapping[int, int], sign: float) -> None:
    rows = np.fromiter(view, dtype=np.intp, count=len(view))
    values = np.fromiter(view.values(), dtype=float, count=len(view))
    own[rows, 0] += sign
    own[rows, 1] += sign * values
    pairs[np.ix_(rows, rows)] += sign * np.stack(
        [np.ones((rows.size, rows.size)), np.abs(values[:, None] - values[None, :])], axis=-1
    )


class RatingKind(QuestionKind):
    key = "rating"
    label = "Rating from 0 to 10"
    queue = True
    indicators = (RATINGS, MEAN_RATING, CLOSENESS)
    count = RATINGS.key
    agreement = CLOSENESS.key
    answers_label = "Ratings (first round)"
    heatmap_note = "Closeness (1 - mean absolute difference / 10) of each pair on shared items"
    export_functions = {"answers": annotation_export_rows}

    def clean_value(
        self, question: Question, value: Any, assignment: Assignment | None
    ) -> tuple[dict[str, int], Label | None]:
        rating = value.get("rating") if isinstance(value, dict) else value
        if isinstance(rating, bool) or not isinstance(rating, int) or not 0 <= rating <= 10:
            raise ValidationError({"value": "Give a whole number from 0 to 10."})
        return {"rating": rating}, None

    @transaction.atomic
    def process(self, *, question_id: int) -> int:
        state = state_for_update(question_id)
        pending = Annotation.objects.select_for_update().filter(
            question_id=question_id, analysis_pending=True
        )
        pending_ids = set(pending.values_list("id", flat=True))
        if not pending_ids:
            return 0
        touched = Annotation.objects.filter(pk__in=pending_ids, round=1).values("item_id")
        rows = list(
            Annotation.objects.filter(question_id=question_id, round=1, item_id__in=touched).values(
                "id",
                "item_id",
                "annotator_id",
                "analysed_revision__value",
                "current_revision__value",
            )
        )
        index = annotator_index(state, *(r["annotator_id"] for r in rows))
        own, pairs = _load(state, len(index))
        by_item: dict[int, list[dict[str, Any]]] = {}
        for row in rows:
            by_item.setdefault(row["item_id"], []).append(row)
        for item_rows in by_item.values():
            before, after = {}, {}
            for row in item_rows:
                old = row["analysed_revision__value"]
                new = row["current_revision__value"] if row["id"] in pending_ids else old
                for view, value in ((before, old), (after, new)):
                    if value is not None:
                        view[index[row["annotator_id"]]] = value["rating"]
            _add(own, pairs, before, -1.0)
            _add(own, pairs, after, 1.0)
        pending.update(analysed_revision=F("current_revision"), analysis_pending=False)
        buffer = io.BytesIO()
        np.savez(buffer, own=own, pairs=pairs)
        state.annotator_ids = list(index)
        state.stats = buffer.getvalue()
        state.n_applied += len(pending_ids)
        state.save()
        publish_after_commit(question_id, item_ids=list(by_item))
        return len(pending_ids)

    @transaction.atomic
    def rebuild(self, *, question_id: int) -> Any:
        state = state_for_update(question_id)
        state.stats, state.n_applied = b"", 0
        state.save()
        Annotation.objects.filter(question_id=question_id).update(
            analysed_revision=None, analysis_pending=True
        )
        return self.process(question_id=question_id)

    def derive(self, state: QualityState, question: Question, *, layout: Json | None) -> Derived:
        own, pairs = _load(state, len(state.annotator_ids))
        closeness = 1.0 - ratio(pairs[..., 1], pairs[..., 0]) / SCALE_MAX
        others = ~np.eye(len(own), dtype=bool)
        shared = np.where(others, pairs[..., 0], 0.0)
        mean_others = (
            1.0 - ratio((pairs[..., 1] * others).sum(axis=1), shared.sum(axis=1)) / SCALE_MAX
        )
        return Derived(
            annotators=list(state.annotator_ids),
            indicators={
                RATINGS.key: json_ready(own[:, 0]),
                MEAN_RATING.key: json_ready(ratio(own[:, 1], own[:, 0])),
                CLOSENESS.key: json_ready(mean_others),
            },
            evidence={"items": [int(n) for n in own[:, 0]]},
            study={"n_ratings": int(own[:, 0].sum()), "n_annotators": int((own[:, 0] > 0).sum())},
            matrices={
                "kappa": json_ready(closeness),
                "overlap": json_counts(pairs[..., 0]),
                **pair_matrices(closeness, keep=layout),
            },
        )


RATING = RatingKind()
