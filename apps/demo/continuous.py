"""Demo of continuous tracing: the shades-of-green calibration study with real traces.

``load_continuous_demo`` builds a running study with one continuous question, two gold items
whose canvas follows the true green intensity of the shades-of-green videos (Booth & Narayanan
2020, tasks A and B), and a short tone sweep made here with numpy and the stdlib ``wave``
module. The ten real annotators of that study ("green-ann1".."green-ann10") come pre-filled
with their 1 Hz traces, sent through the same chunk and finish services as the recorder uses,
so the manager page shows real traces and calibration figures at once.

The data set is read by :mod:`apps.continuous.green` from the data sets shipped with the studio
(:mod:`apps.studies.datasets`); without it (an empty ``$STUDIO_DATASETS_DIR``) the study is still
made, with no pre-filled traces.
"""

from __future__ import annotations

import io
import json
import uuid
import wave
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.files import File
from django.db import transaction
from numpy.typing import NDArray

from apps.annotations.models import Assignment, Revision
from apps.continuous.green import (
    GREEN_ANNOTATORS,
    GREEN_FOLDER,
    GREEN_TASKS,
    green_datasets_dir,
    green_signal_key,
    green_signal_save,
    green_task,
)
from apps.continuous.models import GoldSignal
from apps.continuous.services import trace_chunk_store, trace_finish
from apps.items.services import items_import
from apps.studies.models import Membership, Question, Study
from apps.studies.services import membership_add, question_create, study_create, study_set_status

DEMO_NAME = "Shades of green (continuous tracing)"
QUESTION_KEY = "intensity"
SWEEP_SECONDS = 8.0
CHUNK_SAMPLES = 60
INSTRUCTIONS = """Press **Play** and keep the slider at the intensity you perceive *right now*:
the brightness of the green screen, or the pitch of the tone. Use the mouse, a finger, or the
arrow keys. Your trace is saved every few seconds."""


def tone_sweep_wav(*, seconds: float = SWEEP_SECONDS, rate: int = 16_000) -> bytes:
    """A mono 16-bit WAV: a tone sweeping up from 220 to 880 Hz and back (exponentially)."""
    t = np.arange(int(seconds * rate)) / rate
    half = seconds / 2
    octaves = 2 * (1 - np.abs(t - half) / half)  # 0 -> 2 -> 0 octaves above 220 Hz
    phase = 2 * np.pi * np.cumsum(220.0 * 2.0**octaves) / rate
    fade = np.clip(np.minimum(t, seconds - t) / 0.05, 0, 1)
    samples = (0.4 * fade * np.sin(phase) * 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples.tobytes())
    return buffer.getvalue()


def prefill_trace(
    *,
    annotator: AbstractBaseUser,
    assignment: Assignment,
    question: Question,
    values: Sequence[float] | NDArray,
    rate_hz: float,
) -> Revision:
    """Send a ready-made trace through the recorder's services (chunks, then finish)."""
    recording = uuid.uuid5(uuid.NAMESPACE_URL, f"demo/{assignment.pk}/{question.pk}")
    times = np.arange(len(values)) / rate_hz
    for sequence, start in enumerate(range(0, len(values), CHUNK_SAMPLES)):
        trace_chunk_store(
            annotator=annotator,
            assignment=assignment,
            question=question,
            recording_uuid=recording,
            sequence=sequence,
            times=times[start : start + CHUNK_SAMPLES].tolist(),
            values=np.asarray(values[start : start + CHUNK_SAMPLES], dtype=float).tolist(),
        )
    revision, _ = trace_finish(
        annotator=annotator, recording_uuid=recording, source=Revision.Source.IMPORT
    )
    return revision


def _green_users() -> list[AbstractBaseUser]:
    User = get_user_model()
    users = []
    for name in GREEN_ANNOTATORS:
        user, created = User.objects.get_or_create(username=f"green-{name}")
        if created:
            user.set_unusable_password()  # real annotators' data; nobody signs in as them
            user.save(update_fields=["password"])
        users.append(user)
    return users


@transaction.atomic
def load_continuous_demo(
    *,
    manager: AbstractBaseUser,
    annotators: Sequence[AbstractBaseUser],
    datasets: Path | Literal["env"] | None = "env",
) -> Study:
    """Make the shades-of-green study once (found by name afterwards) and return it.

    ``annotators`` (the demo's own accounts) get the study in their queue to try the recorder;
    the ten real annotators come with their traces of both gold items when the data set exists.
    ``datasets`` is the folder holding ``green_intensity_2016`` (``"env"``:
    ``green_datasets_dir()``; ``None``: no real data, only the tone sweep).
    """
    existing = Study.objects.filter(name=DEMO_NAME, created_by=manager).first()
    if existing is not None:
        return existing
    study = study_create(creator=manager, name=DEMO_NAME, instructions=INSTRUCTIONS)
    question = question_create(
        study=study,
        kind=Question.Kind.CONTINUOUS,
        key=QUESTION_KEY,
        prompt="How intense is it right now?",
        settings={"label_min": "Dark / low", "label_max": "Bright / high", "sda_tolerance": 0.005},
    )
    if datasets == "env":
        datasets = green_datasets_dir()
    if datasets is not None and not (datasets / GREEN_FOLDER).is_dir():
        datasets = None
    tasks = {task: green_task(datasets, task) for task in GREEN_TASKS} if datasets else {}
    rows = [
        {
            "external_id": f"green-{task}",
            "text": f"Calibration: green intensity, {task} of the shades-of-green study.",
            "metadata": {"stimulus": "green", "signal": green_signal_key(task)},
        }
        for task in tasks
    ]
    for task, (truth, _) in tasks.items():
        green_signal_save(task, truth)
    rows.append(
        {
            "external_id": "tone-sweep",
            "kind": "audio",
            "media": "tone-sweep.wav",
            "text": "A tone that rises and falls in pitch.",
            "metadata": {"duration": SWEEP_SECONDS},
        }
    )
    stream = io.StringIO("\n".join(json.dumps(row) for row in rows))
    wav = File(io.BytesIO(tone_sweep_wav()), name="tone-sweep.wav")
    items_import(study=study, stream=stream, fmt="jsonl", files={"tone-sweep.wav": wav})
    green_users = _green_users() if tasks else []
    for user in [*annotators, *green_users]:
        membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    study_set_status(study=study, status=Study.Status.RUNNING)
    for task, (_, traces) in tasks.items():
        signal = GoldSignal.objects.get(key=green_signal_key(task))
        for user, name in zip(green_users, GREEN_ANNOTATORS, strict=True):
            assignment = Assignment.objects.get(
                study=study, annotator=user, item__external_id=f"green-{task}", round=1
            )
            prefill_trace(
                annotator=user,
                assignment=assignment,
                question=question,
                values=traces[name],
                rate_hz=signal.rate_hz,
            )
    return study
