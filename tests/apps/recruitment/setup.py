"""A running study open to recruitment: regular items, training items and attention checks."""

from __future__ import annotations

from typing import Any

from apps.items.services import items_bulk_create
from apps.recruitment.models import Recruitment
from apps.recruitment.services import recruitment_update
from apps.studies.models import Study
from apps.studies.services import study_set_status
from tests.factories import StudyFactory, categorical_question

TRAINING_ANSWER = "positive"
CHECK_ANSWER = "negative"


def recruiting_study(
    *, n_regular: int = 6, n_training: int = 2, n_checks: int = 2, **settings: Any
) -> tuple[Study, Recruitment]:
    """A running study with one categorical question and an open recruitment link.

    Gold items come through the item import's gold columns: training items (known answer
    ``positive``, with a reason) first, then regular items, then attention checks (``negative``).
    """
    study = StudyFactory()
    categorical_question(study)
    rows: list[dict[str, Any]] = [
        {
            "external_id": f"train-{n}",
            "text": f"Training sentence {n}: a lovely day.",
            "gold": TRAINING_ANSWER,
            "gold_reason": "the sentence praises the day",
            "gold_use": "training",
        }
        for n in range(n_training)
    ]
    rows += [
        {"external_id": f"item-{n}", "text": f"Regular sentence {n}."} for n in range(n_regular)
    ]
    rows += [
        {"external_id": f"check-{n}", "text": f"Check sentence {n}: awful.", "gold": CHECK_ANSWER}
        for n in range(n_checks)
    ]
    items_bulk_create(study=study, rows=rows)
    study_set_status(study=study, status=Study.Status.RUNNING)
    options = {
        "is_open": True,
        "platform": "prolific",
        "completion_code": "C0MPLETE",
        "screen_out_code": "SCREEN0UT",
        "items_per_participant": 4,
        "max_participants": 5,
        "check_rate": 0.5,
        "qualification_threshold": 0.5,
        **settings,
    }
    return study, recruitment_update(study=study, **options)
