"""A mixed study as issue 24 ran it: a Likert question on sentences, a trace question on audio
clips and green calibration items, a pairwise question on sentences; each with its own
instructions. ``scoped=False`` leaves every question on every item (the old behaviour)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from apps.items.models import Item
from apps.items.services import items_bulk_create
from apps.recruitment.services import item_gold_signal_set
from apps.studies.models import Question, Study
from apps.studies.services import question_create
from tests.factories import SENTIMENT_LABELS, StudyFactory

CLIP_SECONDS = 4.0
SENTENCES = {"metadata": {"group": "sentence"}}
TRACED = {"metadata": {"group": ["clip", "calibration"]}}


@dataclass
class Mixed:
    study: Study
    likert: Question
    trace: Question
    pairwise: Question
    sentences: list[Item]
    clips: list[Item]
    calibration: list[Item]


def mixed_study(
    *,
    n_sentences: int = 4,
    n_clips: int = 3,
    n_calibration: int = 2,
    scoped: bool = True,
    **study_fields: Any,
) -> Mixed:
    """The study in draft (items, questions, signals); the caller adds people and opens it."""
    study = StudyFactory(**study_fields)

    def scoped_as(scope: dict[str, Any], instructions: str) -> dict[str, Any]:
        # unscoped: the arguments of a study before scoping (the builder runs on that code)
        return {"scope": scope, "instructions": instructions} if scoped else {}

    likert = question_create(
        study=study,
        key="likert",
        prompt="How positive is the sentence?",
        ordered=True,
        labels=SENTIMENT_LABELS,
        **scoped_as(SENTENCES, "Pick the **sentiment** with a key."),
    )
    trace = question_create(
        study=study,
        key="arousal",
        prompt="Trace the arousal",
        kind=Question.Kind.CONTINUOUS,
        settings={"allow_seek": True},
        **scoped_as(TRACED, "Move the slider while the clip plays."),
    )
    pairwise = question_create(
        study=study,
        key="better",
        prompt="Which sentence is more positive?",
        kind=Question.Kind.PAIRWISE,
        **scoped_as(SENTENCES, "Choose the **more positive** sentence."),
    )
    rows: list[dict[str, Any]] = [
        {
            "external_id": f"s{n}",
            "text": f"Sentence {n} is fine.",
            "metadata": {"group": "sentence"},
        }
        for n in range(n_sentences)
    ]
    rows += [
        {
            "external_id": f"clip{n}",
            "kind": "audio",
            "url": f"https://media.example.org/clip{n}.ogg",
            "metadata": {"group": "clip", "duration": CLIP_SECONDS},
        }
        for n in range(n_clips)
    ]
    rows += [
        {
            "external_id": f"cal{n}",
            "text": "Calibration: follow the green",
            "metadata": {"group": "calibration"},
        }
        for n in range(n_calibration)
    ]
    items_bulk_create(study=study, rows=rows)
    for item in study.items.filter(external_id__startswith="cal"):
        item_gold_signal_set(
            item=item, values=np.linspace(0, 1, 41), rate_hz=10.0, description="ramp"
        )
    items = list(study.items.order_by("position"))
    return Mixed(
        study=study,
        likert=likert,
        trace=trace,
        pairwise=pairwise,
        sentences=[i for i in items if i.external_id.startswith("s")],
        clips=[i for i in items if i.external_id.startswith("clip")],
        calibration=[i for i in items if i.external_id.startswith("cal")],
    )
