"""A simulated continuous study: annotators trace audio items, in two groups with their own
tendency, through the real recording path (chunks, then finish and resample to 1 Hz)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np

from apps.annotations.models import Assignment
from apps.continuous.services import trace_chunk_store, trace_finish
from apps.items.models import Item
from apps.studies.models import Membership, Question, Study
from apps.studies.services import membership_add, question_create, study_set_status
from tests.factories import ItemFactory, StudyFactory, UserFactory

SECONDS = 20
RECORDING_HZ = 10
GROUPS = (0, 0, 1, 1)


@dataclass
class TraceSimulation:
    study: Study
    question: Question
    usernames: list[str]
    items: list[str]
    traces: dict[tuple[int, int], np.ndarray]  # (annotator index, item index) -> 1 Hz trace


def _signal(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    phase, speed = rng.uniform(0, 6), rng.uniform(0.2, 0.6)
    return 0.5 + 0.3 * np.sin(speed * t + phase)


def trace_study(*, n_items: int = 6, seed: int = 5) -> TraceSimulation:
    """Group 0 follows each item's signal, group 1 its mirror image; plus personal noise."""
    study = StudyFactory()
    question = question_create(
        study=study, kind=Question.Kind.CONTINUOUS, key="arousal", prompt="How aroused?"
    )
    items = [
        ItemFactory(
            study=study,
            kind=Item.Kind.AUDIO,
            url=f"https://example.org/clip{i}.wav",
            text="",
            metadata={"duration": SECONDS},
        )
        for i in range(n_items)
    ]
    # In the study's annotator order (by username), as the selectors read them.
    users = sorted((UserFactory() for _ in GROUPS), key=lambda user: user.username)
    for user in users:
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    study_set_status(study=study, status=Study.Status.RUNNING)
    rng = np.random.default_rng(seed)
    times = np.arange(SECONDS * RECORDING_HZ + 1) / RECORDING_HZ
    traces = {}
    for i, item in enumerate(items):
        signal = _signal(rng, times)
        for k, (user, group) in enumerate(zip(users, GROUPS, strict=True)):
            values = signal if group == 0 else 1.0 - signal
            values = np.clip(values + rng.normal(0, 0.04, times.size), 0, 1)
            recording = uuid.uuid4()
            trace_chunk_store(
                annotator=user,
                assignment=Assignment.objects.get(annotator=user, item=item, round=1),
                question=question,
                recording_uuid=recording,
                sequence=0,
                times=times.tolist(),
                values=values.tolist(),
            )
            trace_finish(annotator=user, recording_uuid=recording)
            traces[k, i] = values[::RECORDING_HZ]
    return TraceSimulation(
        study, question, [u.username for u in users], [it.external_id for it in items], traces
    )


def trace_rows(sim: TraceSimulation, traces: dict[tuple[int, int], np.ndarray]) -> list[dict]:
    """Trace prediction rows (item, annotator, trace)."""
    return [
        {"item": sim.items[i], "annotator": sim.usernames[k], "trace": trace.tolist()}
        for (k, i), trace in traces.items()
    ]
