"""Fixtures of the pairwise-preference tests: a running study with one pairwise question."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from apps.items.models import Item
from apps.preferences.services import judgement_record, pair_next
from apps.studies.models import Membership, Question, Study
from apps.studies.services import membership_add, question_create, study_set_status
from tests.factories import ItemFactory, StudyFactory, UserFactory

Answerer = Callable[[int, int], int]


@dataclass
class PairwiseStudy:
    study: Study
    question: Question
    items: list[Item]
    annotators: list[Any]

    @property
    def manager(self) -> Any:
        return self.study.created_by


def make_pairwise_study(
    *, n_items: int = 5, n_annotators: int = 2, settings: dict[str, Any] | None = None
) -> PairwiseStudy:
    """A running study whose only question is pairwise; every annotator gets every item."""
    study = StudyFactory()
    question = question_create(
        study=study,
        key="fluency",
        prompt="Which sentence reads more fluently?",
        kind=Question.Kind.PAIRWISE,
        settings=settings if settings is not None else {},
    )
    items = Item.objects.bulk_create(ItemFactory.build_batch(n_items, study=study))
    annotators = [UserFactory() for _ in range(n_annotators)]
    for user in annotators:
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    study_set_status(study=study, status=Study.Status.RUNNING)
    return PairwiseStudy(study, question, items, annotators)


def by_level(levels: dict[int, int]) -> Answerer:
    """A truthful annotator: the item with the higher level is better, equal levels tie."""
    return lambda a, b: (levels[a] > levels[b]) - (levels[a] < levels[b])


def answer_all(question: Question, annotator: Any, answer: Answerer, limit: int = 500) -> int:
    """Judge pairs through the services until the ranking is complete; returns the count."""
    for count in range(limit):
        state = pair_next(question=question, annotator=annotator)
        if state.pending is None:
            return count
        a, b = state.pending
        judgement_record(
            question=question,
            annotator=annotator,
            item_a=a,
            item_b=b,
            outcome=answer(a, b),
            idempotency_key=uuid.uuid4(),
        )
    raise AssertionError(f"not done after {limit} judgements")


def cycle_maker() -> Answerer:
    """An inconsistent annotator: closes a cycle whenever two earlier answers allow it."""
    answers: dict[frozenset[int], tuple[int, int]] = {}  # pair -> (winner, loser)

    def answer(a: int, b: int) -> int:
        beats: dict[int, set[int]] = {}
        for winner, loser in answers.values():
            beats.setdefault(winner, set()).add(loser)
        if any(a in beats.get(c, ()) for c in beats.get(b, ())):  # b > c > a: say a > b
            outcome = 1
        elif any(b in beats.get(c, ()) for c in beats.get(a, ())):  # a > c > b: say b > a
            outcome = -1
        else:
            outcome = 1
        answers[frozenset((a, b))] = (a, b) if outcome == 1 else (b, a)
        return outcome

    return answer


@pytest.fixture
def pairwise(db) -> PairwiseStudy:
    """Five items, two annotators, no calibration and no audit (the quickest ranking)."""
    return make_pairwise_study(settings={"calibration_triplets": 0, "audit_rate": 0.0})
