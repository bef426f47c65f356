"""Reads of the adjudication app: a question's aggregates, disputed items, answers, decisions."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db.models import F, OuterRef, QuerySet, Subquery
from numpy.typing import NDArray

from analytics.models import Flag
from analytics.selectors import excluded_annotator_ids, question_ratings
from apps.adjudication.aggregation import (
    ItemAggregates,
    aggregate_items,
    kappa_sda_spread,
    posterior_entropy,
)
from apps.adjudication.models import (
    Adjudication,
    DisagreementForecast,
    OverlapRule,
    PredictedDisagreement,
)
from apps.annotations.models import Annotation
from apps.categorical.indicators import label_scale
from apps.continuous.config import trace_settings
from apps.continuous.selectors import current_traces
from apps.items.models import Item
from apps.studies.models import Question, Study


@dataclass(frozen=True)
class QuestionAggregates:
    """:class:`ItemAggregates` of one question with the ids and keys of their axes.

    ``item_ids`` (N) are the items with at least one counted round-1 answer, ``annotator_ids``
    (M) the annotators counted, ``value_keys`` (V) the question's labels in scale order;
    ``left_out`` the annotators whose answers were not counted.
    """

    question: Question
    item_ids: NDArray[np.int64]
    annotator_ids: list[int]
    value_keys: list[str]
    label_names: list[str]
    left_out: frozenset[int]
    aggregates: ItemAggregates

    def row(self, item_id: int) -> int | None:
        """The position of ``item_id`` on the item axis, or ``None`` if nobody counted answered."""
        at = int(np.searchsorted(self.item_ids, item_id))
        return at if at < self.item_ids.size and self.item_ids[at] == item_id else None

    def key(self, code: int) -> str | None:
        """The label key of a value code; ``None`` for ``-1`` (tied or unanswered)."""
        return self.value_keys[code] if code >= 0 else None


def categorical_questions(*, study: Study) -> QuerySet[Question]:
    """The study's categorical questions (the ones adjudication and aggregation apply to)."""
    return study.questions.filter(kind=Question.Kind.CATEGORICAL).order_by("position", "id")


def flagged_annotator_ids(*, question: Question) -> set[int]:
    """Annotators with a flag on the question that still holds and was not dismissed."""
    return set(
        Flag.objects.filter(question=question, annotator__isnull=False, active=True)
        .exclude(status=Flag.Status.DISMISSED)
        .values_list("annotator_id", flat=True)
    )


def question_aggregates(
    *,
    question: Question,
    left_out: Collection[int] = (),
    item_ids: Collection[int] | None = None,
) -> QuestionAggregates:
    """Majority, Dawid-Skene and disagreement of the question's items over the round-1 live
    answers of every annotator not in ``left_out`` (of the items ``item_ids`` only, if given:
    Dawid-Skene is then fitted on those items alone)."""
    answers = Annotation.objects.filter(
        question=question, round=1, current_revision__value__isnull=False
    )
    annotator_ids = sorted(
        set(answers.values_list("annotator_id", flat=True).distinct()) - set(left_out)
    )
    labels = list(question.labels.order_by("position", "id").values("key", "name"))
    value_keys = [label["key"] for label in labels]
    items, ratings = question_ratings(
        question_id=question.pk,
        annotator_ids=annotator_ids,
        value_keys=value_keys,
        item_ids=None if item_ids is None else list(item_ids),
    )
    scale = label_scale(question, value_keys)
    return QuestionAggregates(
        question=question,
        item_ids=items,
        annotator_ids=annotator_ids,
        value_keys=value_keys,
        label_names=[label["name"] for label in labels],
        left_out=frozenset(left_out),
        aggregates=aggregate_items(ratings, points=scale.points),
    )


def curated_aggregates(*, question: Question) -> QuestionAggregates:
    """:func:`question_aggregates` without the study's excluded annotators (curated)."""
    return question_aggregates(
        question=question, left_out=excluded_annotator_ids(study=question.study)
    )


def latest_adjudications(*, question: Question) -> dict[int, Adjudication]:
    """The latest adjudication of each adjudicated item of the question, by item id."""
    latest: dict[int, Adjudication] = {}
    rows = (
        Adjudication.objects.filter(question=question)
        .select_related("label", "adjudicator")
        .order_by("item_id", "-created_at", "-id")
    )
    for adjudication in rows:
        latest.setdefault(adjudication.item_id, adjudication)
    return latest


def adjudication_history(*, question: Question, item: Item) -> QuerySet[Adjudication]:
    """Every adjudication of one item, newest first."""
    return (
        Adjudication.objects.filter(question=question, item=item)
        .select_related("label", "adjudicator")
        .order_by("-created_at", "-id")
    )


def disputed_items(
    *, aggregates: QuestionAggregates, adjudicated: Collection[int] = ()
) -> list[dict[str, Any]]:
    """Items with at least two counted answers that disagree (AAD-RMSE > 0), most disputed
    first; each with ``item_id``, ``disagreement``, ``n``, ``majority`` (label key or ``None``
    when tied), ``tied``, ``ds_label`` and ``adjudicated`` (whether ``adjudicated`` holds it)."""
    agg = aggregates.aggregates
    disputed = np.flatnonzero(np.nan_to_num(agg.disagreement, nan=0.0) > 0)
    order = disputed[np.lexsort((aggregates.item_ids[disputed], -agg.disagreement[disputed]))]
    return [
        {
            "item_id": int(aggregates.item_ids[i]),
            "disagreement": float(agg.disagreement[i]),
            "n": int(agg.n_answers[i]),
            "majority": aggregates.key(int(agg.majority[i])),
            "tied": bool(agg.tied[i]),
            "ds_label": aggregates.key(int(agg.ds_label[i])),
            "adjudicated": int(aggregates.item_ids[i]) in adjudicated,
        }
        for i in order
    ]


def item_answers(*, question: Question, item: Item) -> QuerySet[Annotation]:
    """The item's live round-1 answers to the question, with annotator and label, by username."""
    return (
        Annotation.objects.filter(
            question=question, item=item, round=1, current_revision__value__isnull=False
        )
        .select_related("annotator", "current_revision__label")
        .order_by("annotator__username", "id")
    )


def overlap_rule(*, question: Question) -> OverlapRule | None:
    """The question's adaptive-overlap rule, if it has one.

    Read through the question: no query when it was loaded with
    ``select_related("overlap_rule")`` (the queue's and the API's questions are), one otherwise.
    """
    try:
        return question.overlap_rule
    except OverlapRule.DoesNotExist:
        return None


def _trace_spreads(
    question: Question, *, left_out: Collection[int], item_ids: Collection[int] | None
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Per item with a counted current round-1 trace: the number of them and their
    :func:`kappa_sda_spread` (at the question's SDA tolerance)."""
    recordings = (
        current_traces(question=question).filter(round=1).exclude(annotator_id__in=list(left_out))
    )
    if item_ids is not None:
        recordings = recordings.filter(item_id__in=list(item_ids))
    by_item: dict[int, list[NDArray[np.float64]]] = {}
    for recording in recordings:
        by_item.setdefault(recording.item_id, []).append(recording.trace())
    tol = trace_settings(question).sda_tolerance
    ids = np.array(sorted(by_item), dtype=np.int64)
    n = np.array([len(by_item[i]) for i in ids], dtype=np.int64)
    spread = np.array(
        [
            kappa_sda_spread(
                np.vstack([t[: min(map(len, by_item[i]))] for t in by_item[i]]), tol=tol
            )
            for i in ids
        ],
        dtype=float,
    )
    return ids, n, spread


def rule_readings(
    *, rule: OverlapRule, left_out: Collection[int], item_ids: Collection[int] | None = None
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """What the rule compares: item ids, counted answers and disagreement by the rule's
    measure, of the items with a counted answer (of ``item_ids`` only, if given).

    AAD-RMSE reads only the items asked for; the Dawid-Skene posterior's entropy needs the fit
    on every item of the question (one item's answers say nothing of its annotators'
    competence); the trace kappa_SDA spread reads the items' current traces.
    """
    question = rule.question
    if rule.measure == OverlapRule.Measure.KAPPA_SDA_SPREAD:
        return _trace_spreads(question, left_out=left_out, item_ids=item_ids)
    whole = rule.measure == OverlapRule.Measure.DS_ENTROPY
    found = question_aggregates(
        question=question, left_out=left_out, item_ids=None if whole else item_ids
    )
    agg = found.aggregates
    value = posterior_entropy(agg.posteriors) if whole else agg.disagreement
    keep = np.ones(found.item_ids.size, dtype=bool)
    if item_ids is not None:
        keep = np.isin(found.item_ids, list(item_ids))
    return found.item_ids[keep], agg.n_answers[keep], value[keep]


def disagreement_forecasts(*, study: Study) -> QuerySet[DisagreementForecast]:
    """The study's disagreement forecasts, one per categorical question that has one."""
    return (
        DisagreementForecast.objects.filter(question__study=study)
        .select_related("question")
        .order_by("question__position", "question_id")
    )


def with_predicted_disagreement(
    items: QuerySet[Item], *, forecast: DisagreementForecast, most_first: bool = False
) -> QuerySet[Item]:
    """``items`` with ``predicted`` (the forecast's AAD-RMSE; ``None`` for items it did not
    predict); ``most_first`` orders them by it, highest first, unpredicted last."""
    predicted = PredictedDisagreement.objects.filter(forecast=forecast, item=OuterRef("pk"))
    items = items.annotate(predicted=Subquery(predicted.values("value")[:1]))
    if most_first:
        items = items.order_by(F("predicted").desc(nulls_last=True), "position", "id")
    return items
