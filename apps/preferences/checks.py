"""Hidden attention checks of pairwise questions: gold pairs mixed among the scheduler's pairs.

A gold pair (:class:`~apps.recruitment.models.GoldAnswer` of a pairwise question, value
``{"versus": "<external id>", "outcome": 1 | 0 | -1}``) with ``use="check"`` is a hidden
attention check for the study's recruited participants. Before each of the scheduler's pairs
(*slot* ``j``: after ``j`` scheduler judgements kept), a check is due with probability the
recruitment's ``check_rate`` (about ``check_rate`` checks per scheduler pair), drawn from the
session's seed and the slot, so that the pending pair stays the same until answered and a
replay finds the same places. The ``c``-th check of a session is gold pair
``order[c mod G]`` of a seeded shuffle of the ``G`` gold pairs, shown on seeded random sides
like every other pair. No check is due once the ranking is complete.

An answer to a check is stored as a :class:`~apps.preferences.models.Judgement` with phase
``check`` (append-only, undone like any other), never recorded into the scheduler; it is
scored by :func:`apps.recruitment.selectors.gold_accuracy`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from apps.items.models import Item
from apps.preferences.models import Judgement
from apps.recruitment.models import GoldAnswer, Participant
from apps.studies.models import Question
from core.types import Account

Pair = tuple[int, int]


@dataclass(frozen=True)
class CheckPlan:
    """A participant's attention checks on one pairwise question.

    Attributes
    ----------
    pairs : list of (int, int)
        The gold pairs as ``(item id, versus id)``, in gold-answer order.
    rate : float
        Chance that a check comes before a scheduler pair (the recruitment's check rate).
    """

    pairs: list[Pair]
    rate: float


def check_plan(*, question: Question, annotator: Account) -> CheckPlan | None:
    """The checks ``annotator`` meets on ``question``: ``None`` unless they are a recruited
    participant of its study whose recruitment has a check rate above 0 and the question has
    gold pairs with ``use="check"``. Two or three queries."""
    participant = (
        Participant.objects.filter(user_id=annotator.pk, study_id=question.study_id)
        .select_related("study__recruitment")
        .first()
    )
    if participant is None or participant.study.recruitment.check_rate <= 0:
        return None
    golds = list(
        GoldAnswer.objects.filter(question=question, use=GoldAnswer.Use.CHECK)
        .order_by("pk")
        .values_list("item_id", "value")
    )
    if not golds:
        return None
    versus = dict(
        Item.objects.filter(
            study_id=question.study_id, external_id__in=[value["versus"] for _, value in golds]
        ).values_list("external_id", "pk")
    )
    pairs = [(item, versus[v["versus"]]) for item, v in golds if v["versus"] in versus]
    if not pairs:
        return None
    return CheckPlan(pairs=pairs, rate=participant.study.recruitment.check_rate)


def check_due(plan: CheckPlan, *, seed: int, slot: int, answered: int) -> Pair | None:
    """The check pair shown before the scheduler's pair of ``slot`` (A side first), or
    ``None`` when none is due there.

    Parameters
    ----------
    plan : CheckPlan
    seed : int
        The session's seed.
    slot : int
        Scheduler judgements kept so far.
    answered : int
        Checks kept so far (which gold pair comes next).
    """
    draw = random.Random(f"pair-check-{seed}-{slot}")
    if draw.random() >= plan.rate:
        return None
    order = list(range(len(plan.pairs)))
    random.Random(f"pair-check-order-{seed}").shuffle(order)
    item, versus = plan.pairs[order[answered % len(order)]]
    return (item, versus) if draw.random() < 0.5 else (versus, item)


def checked_slots(phases: Sequence[str]) -> set[int]:
    """The slots whose check was answered, from an annotator's kept judgements' phases (in
    sequence order): a check's slot is the number of scheduler judgements before it."""
    slots, slot = set(), 0
    for phase in phases:
        if phase == Judgement.Phase.CHECK:
            slots.add(slot)
        else:
            slot += 1
    return slots


def expected_checks(plan: CheckPlan | None, remaining: int) -> int:
    """About how many checks come with ``remaining`` scheduler pairs."""
    return 0 if plan is None else round(remaining * plan.rate)
