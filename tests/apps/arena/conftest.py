"""Fixtures of the model-arena tests: a running study with one arena question."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from apps.arena.selectors import arena_state
from apps.arena.services import arena_vote_record
from apps.items.models import Item
from apps.studies.models import Membership, Question, Study
from apps.studies.services import membership_add, question_create, study_set_status
from tests.factories import ItemFactory, StudyFactory, UserFactory

MODELS = ("alpaca", "bison", "camel", "dingo")
#: The true log strengths of the simulated models (alpaca best).
STRENGTH = {"alpaca": 1.2, "bison": 0.4, "camel": 0.0, "dingo": -1.0}


@dataclass
class ArenaStudy:
    study: Study
    question: Question
    items: list[Item]
    annotators: list[Any]

    @property
    def manager(self) -> Any:
        return self.study.created_by


def responses(k: int, models: tuple[str, ...] = MODELS) -> dict[str, str]:
    return {model: f"{model} answers prompt {k}." for model in models}


def make_arena_study(
    *,
    n_prompts: int = 4,
    n_annotators: int = 2,
    models: tuple[str, ...] = MODELS,
    settings: dict[str, Any] | None = None,
) -> ArenaStudy:
    """A running study whose only question is an arena; every annotator gets every prompt
    (the default overlap)."""
    study = StudyFactory()
    question = question_create(
        study=study,
        key="helpful",
        prompt="Which response is more helpful?",
        kind=Question.Kind.ARENA,
        settings=settings or {},
    )
    items = [
        ItemFactory(
            study=study,
            external_id=f"prompt-{k}",
            text=f"Prompt number {k}?",
            metadata={"responses": responses(k, models)},
        )
        for k in range(n_prompts)
    ]
    annotators = [UserFactory() for _ in range(n_annotators)]
    for user in annotators:
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    if items:  # a study without items cannot open
        study_set_status(study=study, status=Study.Status.RUNNING)
    return ArenaStudy(study, question, items, annotators)


def truthful(model_a: str, model_b: str) -> int:
    """The stronger model's response is better."""
    return 1 if STRENGTH[model_a] > STRENGTH[model_b] else -1


def vote_all(question: Question, annotator: Any, answer=truthful, limit: int = 500) -> int:
    """Vote through the services on every pair the arena asks; returns the count."""
    for count in range(limit):
        task = arena_state(question=question, annotator=annotator).task
        if task is None:
            return count
        arena_vote_record(
            question=question,
            annotator=annotator,
            item_id=task.item.pk,
            model_a=task.model_a,
            model_b=task.model_b,
            outcome=answer(task.model_a, task.model_b),
            idempotency_key=uuid.uuid4(),
        )
    raise AssertionError(f"not done after {limit} votes")
