"""The model-arena demo study, built through the normal services.

``manage.py load_demo`` calls :func:`load_arena_demo`; running it again changes nothing.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from apps.arena.selectors import arena_state
from apps.arena.services import arena_vote_record
from apps.items.services import items_bulk_create
from apps.studies.models import Membership, Question, Study
from apps.studies.services import membership_add, question_create, study_create, study_set_status

ARENA_NAME = "Demo: which model answers better?"
ARENA_INSTRUCTIONS = """A prompt and two models' responses are shown side by side (the models are
not named, and their sides change). Choose the more **helpful** response, or *Tie*.

Keys: **←** A is better, **→** B is better, **=** tie.
"""
#: The demo's models, best first (their true log strengths).
STRENGTH = {"big-lm": 1.0, "mid-lm": 0.3, "tiny-lm": -1.3}
PROMPTS = [
    (
        "What is the boiling point of water at sea level?",
        {
            "big-lm": "100 °C (212 °F) at standard sea-level pressure; it is lower at altitude.",
            "mid-lm": "About 100 degrees Celsius.",
            "tiny-lm": "Water boils when it is hot.",
        },
    ),
    (
        "Give a synonym of 'rapid'.",
        {"big-lm": "Fast (also: quick, swift).", "mid-lm": "Quick.", "tiny-lm": "Rapidly."},
    ),
    (
        "How many days are in a leap year?",
        {
            "big-lm": "366: February has 29 days instead of 28.",
            "mid-lm": "366 days.",
            "tiny-lm": "365 days, like every year.",
        },
    ),
    (
        "Translate 'good morning' into French.",
        {"big-lm": "Bonjour.", "mid-lm": "Bonjour (or 'bon matin' in Quebec).", "tiny-lm": "Bon."},
    ),
    (
        "What is 12 x 12?",
        {"big-lm": "144.", "mid-lm": "12 x 12 = 144.", "tiny-lm": "124."},
    ),
    (
        "Name the largest planet of the solar system.",
        {
            "big-lm": "Jupiter, about 11 times Earth's diameter.",
            "mid-lm": "Jupiter.",
            "tiny-lm": "The Sun.",
        },
    ),
]


def _simulate(*, question: Question, annotator: AbstractBaseUser, noise: float, seed: int) -> int:
    """Vote on every pair the arena asks; ``noise`` is the chance of a random vote."""
    rng = random.Random(seed)
    count = 0
    while (task := arena_state(question=question, annotator=annotator).task) is not None:
        better = (STRENGTH[task.model_a] > STRENGTH[task.model_b]) * 2 - 1
        outcome = rng.choice((1, 0, -1)) if rng.random() < noise else better
        arena_vote_record(
            question=question,
            annotator=annotator,
            item_id=task.item.pk,
            model_a=task.model_a,
            model_b=task.model_b,
            outcome=outcome,
            idempotency_key=uuid.uuid4(),
            time_spent_ms=rng.randint(3000, 12000),
        )
        count += 1
    return count


@transaction.atomic
def load_arena_demo(*, manager: AbstractBaseUser, annotators: Iterable[AbstractBaseUser]) -> str:
    """A running arena of three models on six prompts; returns a one-line summary.

    The first annotator votes carefully, the second at random half of the time; any others are
    left to try the arena page.
    """
    study = Study.objects.filter(name=ARENA_NAME, created_by=manager).first()
    if study is not None:
        return f"{ARENA_NAME!r} is already there (study {study.pk})."
    study = study_create(creator=manager, name=ARENA_NAME, instructions=ARENA_INSTRUCTIONS)
    question = question_create(
        study=study,
        key="helpful",
        prompt="Which response is more helpful?",
        kind=Question.Kind.ARENA,
    )
    items_bulk_create(
        study=study,
        rows=[
            {"external_id": f"prompt-{k}", "text": text, "metadata": {"responses": responses}}
            for k, (text, responses) in enumerate(PROMPTS, start=1)
        ],
    )
    annotators = list(annotators)
    for user in annotators:
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    study_set_status(study=study, status=Study.Status.RUNNING)
    voted = sum(
        _simulate(question=question, annotator=user, noise=noise, seed=k + 1)
        for k, (user, noise) in enumerate(zip(annotators, (0.0, 0.5), strict=False))
    )
    return (
        f"{ARENA_NAME!r}: study {study.pk}, {len(PROMPTS)} prompts of {len(STRENGTH)} models, "
        f"{voted} votes; ranking at /studies/{study.pk}/arena/{question.key}/results/."
    )
