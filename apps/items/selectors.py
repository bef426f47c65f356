"""Reads of items: the manager's items list (search, filters, sorting) and an item's neighbours.

Every figure of the list is a correlated subquery of the one SQL query that reads a page, so a
page costs the same few queries whatever the study's size; the indexes that serve them are the
foreign keys of answers and judgements and ``item_study_position``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import (
    Count,
    Exists,
    Expression,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.expressions import OrderBy
from django.db.models.functions import Coalesce
from django.db.models.lookups import GreaterThanOrEqual, LessThanOrEqual

from analytics.models import Flag
from analytics.selectors import active_exclusions
from apps.adjudication.models import PredictedDisagreement
from apps.annotations.models import Annotation
from apps.items.models import Item
from apps.preferences.models import Judgement
from apps.studies.models import Question, Study

SORTS: dict[str, tuple[str, tuple[str | OrderBy, ...]]] = {
    "position": ("Queue order", ("position", "id")),
    "external_id": ("External id, A to Z", ("external_id",)),
    "-external_id": ("External id, Z to A", ("-external_id",)),
    "-answers": ("Most answers first", ("-answers", "position", "id")),
    "answers": ("Fewest answers first", ("answers", "position", "id")),
    "-predicted": (
        "Predicted disagreement, highest first",
        (F("predicted").desc(nulls_last=True), "position", "id"),
    ),
}
"""The list's orders by key: their label and the fields (every one ends on a unique key)."""


@dataclass(frozen=True)
class ItemFilter:
    """What the items list shows: a search text (external id or text, any case), the item's
    kind, a range of answers, only disputed items, only items with a flagged annotator's
    answer, and the order (a key of :data:`SORTS`; ``-predicted``: the predicted disagreement
    of items nobody has answered enough, :mod:`apps.adjudication`, highest first)."""

    search: str = ""
    kind: str = ""
    min_answers: int | None = None
    max_answers: int | None = None
    disputed: bool = False
    flagged: bool = False
    sort: str = "position"


def _count(queryset: QuerySet) -> Coalesce:
    """``queryset``'s row count per outer item as a subquery (0 when it has none)."""
    counted = queryset.order_by().values(group=Value(1)).annotate(n=Count("*")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def _live_answers() -> QuerySet[Annotation]:
    return Annotation.objects.filter(item=OuterRef("pk"), current_revision__value__isnull=False)


def _figures(study: Study) -> dict[str, Any]:
    """The list's figures of each item as expressions: ``answers`` (live queue and trace
    answers, plus kept judgements in a study with pairwise questions), ``disputed`` (two live
    answers of one question with different labels) and ``flagged`` (a live answer by an
    annotator whose flag on that question holds and was not dismissed) and ``predicted``
    (the highest predicted disagreement of the item over the study's questions, if any)."""
    answers: Expression = _count(_live_answers())
    if study.questions.filter(kind=Question.Kind.PAIRWISE).exists():
        judged = Judgement.objects.filter(
            Q(item_a=OuterRef("pk")) | Q(item_b=OuterRef("pk")), retraction__isnull=True
        ).data()
        answers = answers + _count(judged)
    counted = _counted_labels(study)
    labelled = counted.filter(item=OuterRef("item"), question=OuterRef("question")).exclude(
        current_revision__label=OuterRef("current_revision__label")
    )
    disputed = counted.filter(Exists(labelled), item=OuterRef("pk"))
    flags = Flag.objects.filter(
        question=OuterRef("question"), annotator=OuterRef("annotator"), active=True
    ).exclude(status=Flag.Status.DISMISSED)
    predicted = PredictedDisagreement.objects.filter(item=OuterRef("pk")).order_by("-value")
    return {
        "answers": answers,
        "disputed": Exists(disputed),
        "flagged": Exists(_live_answers().filter(Exists(flags))),
        "predicted": Subquery(predicted.values("value")[:1]),
    }


DISPUTED = (
    "two counted answers of one question with different labels (first-round answers; the "
    "excluded annotators' answers do not count), as on the adjudication page"
)
"""What *disputed* means on every page: the items list's filter and column, and adjudication
(:func:`apps.adjudication.selectors.disputed_items` on the curated aggregates)."""


def _counted_labels(study: Study) -> QuerySet[Annotation]:
    """The labelled answers that count for agreement: live, first round, not by an annotator
    the study excluded (the answers adjudication aggregates)."""
    return Annotation.objects.filter(
        question__study=study, round=1, current_revision__label__isnull=False
    ).exclude(annotator_id__in=active_exclusions(study=study).values("annotator_id"))


def _disputed_item_ids(study: Study) -> QuerySet[Any, Any]:
    """Ids of the study's disputed items (:data:`DISPUTED`; the ``disputed`` of
    :func:`_figures`, for every item at once)."""
    return (
        _counted_labels(study)
        .values("item_id", "question_id")
        .annotate(labels=Count("current_revision__label", distinct=True))
        .filter(labels__gt=1)
        .values("item_id")
    )


def items_listed(*, study: Study, filters: ItemFilter) -> QuerySet[Item]:
    """The study's items that pass ``filters``, in its order (:data:`SORTS`).

    Only the figures the filters and the order need are computed, over every item (the
    filters as conditions, the order's as an annotation); the page's rows get theirs from
    :func:`items_with_figures`, so that a page far down a big study costs what its rows cost.
    """
    figures = _figures(study)
    ordered_by = {
        "answers": filters.sort in ("answers", "-answers"),
        "predicted": filters.sort == "-predicted",
    }
    items = study.items.annotate(**{key: figures[key] for key, need in ordered_by.items() if need})
    if filters.search:
        items = items.filter(
            Q(external_id__icontains=filters.search) | Q(text__icontains=filters.search)
        )
    if filters.kind:
        items = items.filter(kind=filters.kind)
    if filters.min_answers is not None:
        items = items.filter(GreaterThanOrEqual(figures["answers"], filters.min_answers))
    if filters.max_answers is not None:
        items = items.filter(LessThanOrEqual(figures["answers"], filters.max_answers))
    if filters.disputed:  # one grouped pass over the answers: cheaper than a test per item
        items = items.filter(pk__in=_disputed_item_ids(study))
    if filters.flagged:
        items = items.filter(figures["flagged"])
    return items.order_by(*SORTS.get(filters.sort, SORTS["position"])[1])


def items_with_figures(*, study: Study, ids: Sequence[int]) -> list[Item]:
    """The items of ``ids`` in that order, each with its ``answers``, ``disputed``,
    ``flagged`` and ``predicted`` (:func:`items_listed`), in one query."""
    found = study.items.filter(pk__in=ids).annotate(**_figures(study)).in_bulk()
    return [found[pk] for pk in ids]


def item_neighbours(
    *, study: Study, filters: ItemFilter, item: Item
) -> tuple[int | None, int | None, int, int]:
    """``(previous id, next id, position from 1, count)`` of ``item`` in the filtered list
    (``0`` as its position when the filters leave it out)."""
    ids = list(items_listed(study=study, filters=filters).values_list("pk", flat=True))
    if item.pk not in ids:
        return None, None, 0, len(ids)
    at = ids.index(item.pk)
    previous = ids[at - 1] if at > 0 else None
    following = ids[at + 1] if at + 1 < len(ids) else None
    return previous, following, at + 1, len(ids)
