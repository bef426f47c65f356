"""Export rows of an arena question: its votes as preference pairs for training a model.

The rows have the columns of the pairwise kind's preference export
(:data:`apps.preferences.exporting.PREFERENCE_SCHEMA`: ``prompt``, ``chosen``, ``rejected``,
``tie``, ...), so one reader takes both; ``chosen_id``/``rejected_id`` name the models and
``bt_margin`` is the arena ranking's log-strength difference, chosen minus rejected.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator
from typing import Any

from apps.annotations.models import Annotation, Revision
from apps.arena.models import item_responses
from apps.arena.selectors import ArenaResults, votes_of
from apps.exchange.identity import same_name
from apps.preferences.exporting import CHUNK_SIZE
from apps.studies.models import Question


def arena_preference_rows(
    *,
    question: Question,
    results: ArenaResults,
    name: Callable[[str], str] = same_name,
    left_out: Collection[int] = (),
    ties: bool = False,
) -> Iterator[dict[str, Any]]:
    """One row per current vote of ``question`` (keys of ``PREFERENCE_SCHEMA``): the preferred
    response ``chosen``, the other ``rejected``; ties left out unless ``ties`` (then flagged
    ``tie``, ``chosen`` the response shown as A); the annotators ``left_out`` (ids) never.

    ``annotator_weight`` and ``bt_margin`` come from ``results``
    (:func:`~apps.arena.selectors.arena_results`, fitted on the same annotators' votes); NaN
    where the fit gives none.
    """
    weights = {row.username: row.weight for row in results.annotators}
    strength = {row.model: row.log_strength for row in results.rows}
    answers = (
        Annotation.objects.filter(question=question, current_revision__value__isnull=False)
        .exclude(annotator_id__in=list(left_out))
        .select_related("annotator", "item", "current_revision")
        .order_by("annotator__username", "id")
    )
    # vote k of an answer was added by its revision k (votes are only ever appended)
    added = {
        (annotation, number): created
        for annotation, number, created in Revision.objects.filter(
            annotation__question=question
        ).values_list("annotation_id", "number", "created_at")
    }
    for answer in answers.iterator(chunk_size=CHUNK_SIZE):
        current = answer.current_revision
        if current is None:  # never: the query keeps live answers
            continue
        responses = item_responses(answer.item.metadata)
        username = answer.annotator.get_username()
        for k, vote in enumerate(votes_of(current.value), start=1):
            if vote["outcome"] == 0 and not ties:
                continue
            chosen, rejected = vote["model_a"], vote["model_b"]
            if vote["outcome"] == -1:
                chosen, rejected = rejected, chosen
            yield {
                "prompt": answer.item.text,
                "chosen": responses.get(chosen, ""),
                "rejected": responses.get(rejected, ""),
                "tie": vote["outcome"] == 0,
                "chosen_id": chosen,
                "rejected_id": rejected,
                "annotator": name(username),
                "annotator_weight": weights.get(username, math.nan),
                "bt_margin": strength.get(chosen, math.nan) - strength.get(rejected, math.nan),
                "question": question.key,
                "created_at": added.get((answer.pk, k), current.created_at),
            }
