"""Fixtures of the continuous-trace tests: a running study with a gold item and an audio item."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from apps.annotations.models import Assignment
from apps.continuous.services import gold_signal_save, trace_chunk_store, trace_finish
from apps.items.models import Item
from apps.studies.models import Membership, Question, Study
from apps.studies.services import membership_add, question_create, study_set_status
from tests.factories import ItemFactory, StudyFactory, UserFactory

GOLD_SECONDS = 30
AUDIO_SECONDS = 20.0


@dataclass
class TraceStudy:
    study: Study
    question: Question
    gold_item: Item
    audio_item: Item
    annotators: list[Any]

    def assignment(self, annotator: Any, item: Item) -> Assignment:
        return Assignment.objects.get(annotator=annotator, item=item, round=1)

    def send(
        self,
        annotator: Any,
        item: Item,
        recording: uuid.UUID,
        sequence: int,
        times: Any,
        values: Any,
        events: Any = (),
        question: Question | None = None,
    ):
        return trace_chunk_store(
            annotator=annotator,
            assignment=self.assignment(annotator, item),
            question=question or self.question,
            recording_uuid=recording,
            sequence=sequence,
            times=list(np.asarray(times, dtype=float)),
            values=list(np.asarray(values, dtype=float)),
            events=list(events),
        )

    def trace_gold(self, annotator: Any, values: Callable[[np.ndarray], np.ndarray]) -> None:
        """A whole trace of the gold item at 2 Hz, ``values`` of the media times, finished."""
        recording = uuid.uuid4()
        times = np.round(np.arange(0, GOLD_SECONDS + 0.05, 0.5), 6)
        self.send(annotator, self.gold_item, recording, 0, times, values(times))
        trace_finish(annotator=annotator, recording_uuid=recording)


def make_trace_study(
    *, settings: dict[str, Any] | None = None, n_annotators: int = 2
) -> TraceStudy:
    study = StudyFactory()
    question = question_create(
        study=study,
        kind=Question.Kind.CONTINUOUS,
        key="arousal",
        prompt="How aroused?",
        settings={"allow_seek": True, **(settings or {})},
    )
    t = np.arange(GOLD_SECONDS + 1)
    gold_signal_save(key="test-wave", rate_hz=1.0, values=0.5 + 0.4 * np.sin(t / 3.0))
    gold_item = ItemFactory(study=study, metadata={"stimulus": "green", "signal": "test-wave"})
    audio_item = ItemFactory(
        study=study,
        kind=Item.Kind.AUDIO,
        url="https://example.org/clip.wav",
        text="",
        metadata={"duration": AUDIO_SECONDS},
    )
    annotators = [UserFactory() for _ in range(n_annotators)]
    for user in annotators:
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    study_set_status(study=study, status=Study.Status.RUNNING)
    return TraceStudy(study, question, gold_item, audio_item, annotators)


@pytest.fixture
def trace_study(db) -> TraceStudy:
    return make_trace_study()
