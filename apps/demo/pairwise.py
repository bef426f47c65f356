"""The pairwise-preference demo study, built through the normal services.

``manage.py load_demo`` calls :func:`load_pairwise_demo`; running it again changes nothing.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from apps.items.services import items_bulk_create
from apps.preferences.services import judgement_record, pair_next, pair_session_start
from apps.studies.models import Membership, Question, Study
from apps.studies.services import membership_add, question_create, study_create, study_set_status

PAIRWISE_NAME = "Demo: which sentence reads better?"
PAIRWISE_INSTRUCTIONS = """Two versions of a sentence are shown side by side.
Choose the one that reads more **fluently**, or *Equal* if you cannot tell them apart.

Keys: **←** A is better, **→** B is better, **=** equal.
"""
#: Sentences from most to least fluent; the last two read equally badly (a tie).
SENTENCES = [
    ("s1", "The committee approved the budget after a short debate.", 7),
    ("s2", "After a short debate, the committee approved the budget.", 6),
    ("s3", "The committee, after a debate that was short, approved the budget.", 5),
    ("s4", "The budget was approved by the committee after short debate.", 4),
    ("s5", "Approved the committee the budget after a short debate.", 3),
    ("s6", "The committee approve budget after debate short.", 2),
    ("s7", "Committee budget approved debate the short after.", 1),
    ("s8", "Budget committee the debate short approved after.", 1),
]
LEVELS = {external_id: level for external_id, _, level in SENTENCES}


def _simulate(*, question: Question, annotator: AbstractBaseUser, noise: float, seed: int) -> int:
    """Judge every pair the scheduler asks; ``noise`` is the chance of a random answer."""
    rng = random.Random(seed)
    pair_session_start(question=question, annotator=annotator, seed=seed)
    external = dict(question.study.items.values_list("pk", "external_id"))
    count = 0
    while (pair := pair_next(question=question, annotator=annotator).pending) is not None:
        a, b = (LEVELS[external[pk]] for pk in pair)
        outcome = rng.choice((1, 0, -1)) if rng.random() < noise else (a > b) - (a < b)
        judgement_record(
            question=question,
            annotator=annotator,
            item_a=pair[0],
            item_b=pair[1],
            outcome=outcome,
            idempotency_key=uuid.uuid4(),
            time_spent_ms=rng.randint(1500, 6000),
        )
        count += 1
    return count


@transaction.atomic
def load_pairwise_demo(*, manager: AbstractBaseUser, annotators: Iterable[AbstractBaseUser]) -> str:
    """A running pairwise study of eight sentences; returns a one-line summary.

    The first annotator ranks carefully, the second answers at random half of the time (so
    their transitivity kappa is likely to fall below the floor and pruning stops for them), and
    any others are left to try the comparison page.
    """
    study = Study.objects.filter(name=PAIRWISE_NAME, created_by=manager).first()
    if study is not None:
        return f"{PAIRWISE_NAME!r} is already there (study {study.pk})."
    study = study_create(creator=manager, name=PAIRWISE_NAME, instructions=PAIRWISE_INSTRUCTIONS)
    question = question_create(
        study=study,
        key="fluency",
        prompt="Which sentence reads more fluently?",
        kind=Question.Kind.PAIRWISE,
        settings={"calibration_triplets": 4, "audit_rate": 0.1, "kappa_floor": 0.4},
    )
    items_bulk_create(
        study=study, rows=[{"external_id": key, "text": text} for key, text, _ in SENTENCES]
    )
    annotators = list(annotators)
    for user in annotators:
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    study_set_status(study=study, status=Study.Status.RUNNING)
    judged = sum(
        _simulate(question=question, annotator=user, noise=noise, seed=k + 1)
        for k, (user, noise) in enumerate(zip(annotators, (0.0, 0.5), strict=False))
    )
    return (
        f"{PAIRWISE_NAME!r}: study {study.pk}, {len(SENTENCES)} items, {judged} judgements; "
        f"results at /studies/{study.pk}/preferences/{question.key}/."
    )
