"""The sufficient statistics of a categorical question, kept current answer by answer.

The submit transaction marks the annotation ``analysis_pending`` (the outbox);
:func:`quality_process_pending` (the kind's ``process``) locks the question's
:class:`~analytics.models.QualityState`, takes every pending annotation at once, replaces each
touched item's contribution (before -> after) in the :class:`CategoricalStats` and publishes
after the commit. :func:`quality_rebuild` computes the same statistics from scratch in one
vectorised pass (``manage.py rebuild_quality``, bulk imports); :func:`quality_stats` reads them
back (or recomputes them without storing, for the live = rebuild checks).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from numpy.typing import NDArray

from analytics.metrics.categorical import pairwise_confusion
from analytics.metrics.krippendorff import coincidence_matrix
from analytics.models import QualityState
from analytics.pipeline import publish_after_commit, state_for_update
from analytics.sufficient_stats import CategoricalStats, ItemView
from apps.annotations.models import Annotation
from apps.studies.models import Label, Question


class _Axes:
    """Annotator and value indices of a state; new annotators or labels extend them."""

    def __init__(self, state: QualityState, question_id: int) -> None:
        self.state = state
        self.annotators = {a: i for i, a in enumerate(state.annotator_ids)}
        self.values = {v: i for i, v in enumerate(state.value_keys)}
        if not self.values:  # label order fixes the codes of ordered scales
            keys = Question.objects.get(pk=question_id).labels.values_list("key", flat=True)
            self.values = {key: i for i, key in enumerate(keys)}

    def annotator(self, user_id: int) -> int:
        return self.annotators.setdefault(user_id, len(self.annotators))

    def value(self, value: dict[str, Any] | None) -> int | None:
        if value is None:
            return None
        return self.values.setdefault(value["label"], len(self.values))

    def load(self) -> CategoricalStats:
        return CategoricalStats.from_bytes(
            self.state.stats,
            n_annotators=len(self.state.annotator_ids),
            n_values=len(self.state.value_keys),
        ).grown(n_annotators=len(self.annotators), n_values=len(self.values))

    def save(self, stats: CategoricalStats, *, applied: int) -> None:
        stats = stats.grown(n_annotators=len(self.annotators), n_values=len(self.values))
        self.state.annotator_ids = list(self.annotators)
        self.state.value_keys = list(self.values)
        self.state.stats = stats.to_bytes()
        self.state.n_applied += applied
        self.state.save()


def _view(rows: list[dict[str, Any]], axes: _Axes, *, revision: str) -> ItemView:
    view: dict[tuple[int, int], tuple[int, int | None]] = {}
    for row in rows:
        code = axes.value(row[f"{revision}__value"])
        if code is not None:
            key = (axes.annotator(row["annotator_id"]), row["round"])
            view[key] = (code, row[f"{revision}__time_spent_ms"])
    return view


_ROW_FIELDS = (
    "id",
    "item_id",
    "annotator_id",
    "round",
    "analysed_revision__value",
    "analysed_revision__time_spent_ms",
    "current_revision__value",
    "current_revision__time_spent_ms",
)


@transaction.atomic
def quality_process_pending(*, question_id: int) -> int:
    """Apply every pending annotation of a question to its state; return how many."""
    state = state_for_update(question_id)
    pending = set(
        Annotation.objects.select_for_update()
        .filter(question_id=question_id, analysis_pending=True)
        .values_list("id", flat=True)
    )
    if not pending:
        return 0
    rows = Annotation.objects.filter(
        question_id=question_id,
        item_id__in=Annotation.objects.filter(pk__in=pending).values("item_id"),
    ).values(*_ROW_FIELDS)
    by_item: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_item[row["item_id"]].append(row)
    axes = _Axes(state, question_id)
    changes = []
    for item_rows in by_item.values():
        after_rows = [
            {
                **row,
                **{
                    f"analysed_revision__{f}": row[f"current_revision__{f}"]
                    for f in ("value", "time_spent_ms")
                },
            }
            if row["id"] in pending
            else row
            for row in item_rows
        ]
        changes.append(
            (
                _view(item_rows, axes, revision="analysed_revision"),
                _view(after_rows, axes, revision="analysed_revision"),
            )
        )
    stats = axes.load()
    for before, after in changes:
        stats.replace_item(before, after)
    Annotation.objects.filter(pk__in=pending).update(
        analysed_revision=F("current_revision"), analysis_pending=False
    )
    axes.save(stats, applied=len(pending))
    touched = list(by_item)
    publish_after_commit(question_id, item_ids=touched)
    return len(pending)


def _stats_from_scratch(question_id: int, axes: _Axes) -> CategoricalStats:
    """The statistics of every live annotation of a question, computed in one vectorised pass.

    Reads integer columns only (the revision's label id, not its JSON value: decoding 500,000
    JSON values was half the cost), then maps ids to axes with numpy.
    """
    rows = np.array(
        Annotation.objects.filter(question_id=question_id, current_revision__value__isnull=False)
        .order_by()
        .annotate(ms=Coalesce("current_revision__time_spent_ms", Value(-1)))
        .values_list("item_id", "annotator_id", "round", "current_revision__label_id", "ms"),
        dtype=np.int64,
    ).reshape(-1, 5)
    item_ids, user_ids, rounds, label_ids, ms = rows.T
    users = np.unique(user_ids)
    annotator = np.array([axes.annotator(int(u)) for u in users], dtype=np.intp)[
        np.searchsorted(users, user_ids)
    ]
    keys = dict(Label.objects.filter(question_id=question_id).values_list("id", "key"))
    labels = np.unique(label_ids)
    code = np.array([axes.value({"label": keys[int(i)]}) for i in labels], dtype=np.intp)[
        np.searchsorted(labels, label_ids)
    ]
    items, item = np.unique(item_ids, return_inverse=True)
    m, v = len(axes.annotators), len(axes.values)
    stats = CategoricalStats(m, v)
    if not rows.size:
        return stats
    domain = np.arange(v, dtype=np.float64)
    by_round = []
    for rnd in (1, 2):
        ratings = np.full((m, items.size), np.nan)
        mask = rounds == rnd
        ratings[annotator[mask], item[mask]] = code[mask]
        by_round.append(ratings)
    first, second = by_round
    stats.confusion = pairwise_confusion(first, values=domain)
    stats.coincidence = coincidence_matrix(first, values=domain)
    both = ~np.isnan(first) & ~np.isnan(second)
    who = np.nonzero(both)[0]
    np.add.at(stats.retest, (who, first[both].astype(np.intp), second[both].astype(np.intp)), 1.0)
    timed = ms >= 0
    stats.time_ms[:, 0] = np.bincount(annotator, weights=np.where(timed, ms, 0), minlength=m)
    stats.time_ms[:, 1] = np.bincount(annotator, weights=timed.astype(float), minlength=m)
    return stats


def answer_seconds(
    question_id: int, annotator_ids: Sequence[int]
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """The seconds of every live timed answer of a question (both rounds, as the state's
    ``time_ms`` counts them) and the index of its annotator in ``annotator_ids``."""
    rows = np.array(
        Annotation.objects.filter(
            question_id=question_id,
            annotator_id__in=annotator_ids,
            current_revision__value__isnull=False,
            current_revision__time_spent_ms__isnull=False,
        )
        .order_by()
        .values_list("annotator_id", "current_revision__time_spent_ms"),
        dtype=np.int64,
    ).reshape(-1, 2)
    position = {user: k for k, user in enumerate(annotator_ids)}
    who = np.array([position[int(u)] for u in rows[:, 0]], dtype=np.intp)
    return rows[:, 1] / 1000.0, who


@transaction.atomic
def quality_rebuild(*, question_id: int) -> CategoricalStats:
    """Recompute a question's state from scratch (``manage.py rebuild_quality``) and store it."""
    state = state_for_update(question_id)
    axes = _Axes(state, question_id)
    stats = _stats_from_scratch(question_id, axes)
    stale = Q(analysis_pending=True) | ~Q(analysed_revision=F("current_revision"))
    stale |= Q(analysed_revision__isnull=True, current_revision__isnull=False)
    Annotation.objects.filter(stale, question_id=question_id).update(
        analysed_revision=F("current_revision"), analysis_pending=False
    )
    state.n_applied = 0
    axes.save(stats, applied=Annotation.objects.filter(question_id=question_id).count())
    publish_after_commit(question_id, rebuild=True)
    return stats


def quality_stats(
    *, question_id: int, fresh: bool = False
) -> tuple[QualityState, CategoricalStats]:
    """The stored state of a question (or, with ``fresh``, one recomputed without storing)."""
    state = QualityState.objects.filter(question_id=question_id).first() or QualityState(
        question_id=question_id
    )
    axes = _Axes(state, question_id)
    stats = _stats_from_scratch(question_id, axes) if fresh else axes.load()
    return state, stats
