"""Every write of the continuous app: gold signals, trace chunks and finishing.

Continuous questions are made with ``apps.studies.services.question_create(kind="continuous")``;
their settings are validated by ``apps.continuous.config.clean_trace_settings`` through the
kind's object (``apps.continuous.kind.CONTINUOUS``, listed in ``settings.QUESTION_KINDS``).

Upload path: ``trace_chunk_store`` validates one chunk and stores it whole or not at all;
``(recording, sequence)`` makes a retried chunk harmless, and samples that overlap the stored
ones are dropped (kept once, never refused). ``trace_finish`` merges the chunks,
resamples them to the analysis rate (``analytics.metrics.resample``), stores the result and
appends it as a revision of the annotation, through the same submit path as every answer;
the live pipeline then takes the trace into the question's quality statistics after the commit
(:func:`apps.continuous.quality.quality_traces_process`, where ``QUALITY_UPDATES`` says).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from analytics.metrics.resample import merge_segments, resample_hold
from apps.annotations.models import Assignment, Revision
from apps.annotations.selectors import assignments_to_answer
from apps.annotations.services import annotations_submit, assignment_check_annotator
from apps.continuous.config import trace_settings
from apps.continuous.models import (
    TIME_DTYPE,
    VALUE_DTYPE,
    GoldSignal,
    TraceChunk,
    TraceRecording,
    pack,
    unpack,
)
from apps.continuous.selectors import has_trace, recording_samples, stimulus_duration
from apps.continuous.validation import Chunk, chunk_check
from apps.continuous.values import trace_pointer
from apps.studies.models import Question
from apps.studies.selectors import question_covers
from core.types import Account

MAX_CLIENT_DURATION_S = 6 * 3600.0


@transaction.atomic
def gold_signal_save(
    *, key: str, rate_hz: float, values: Sequence[float] | np.ndarray, description: str = ""
) -> GoldSignal:
    """Create or replace the known signal ``key`` (values on [0, 1], at ``rate_hz``)."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or not np.isfinite(array).all() or (array < 0).any() or (array > 1).any():
        raise ValidationError({"values": "A gold signal is a 1-D list of numbers in [0, 1]."})
    signal = GoldSignal.objects.filter(key=key).first() or GoldSignal(key=key)
    signal.rate_hz = float(rate_hz)
    signal.values = pack(array, VALUE_DTYPE)
    signal.n_samples = array.size
    signal.description = description
    signal.full_clean()
    signal.save()
    return signal


@dataclass(frozen=True)
class ChunkReceipt:
    """What the client learns about a stored chunk; identical when a retry is replayed."""

    recording: uuid.UUID
    sequence: int
    n_samples: int
    last_time: float
    next_sequence: int


def _digest(chunk: Chunk) -> str:
    payload = json.dumps(
        [chunk.times.tolist(), chunk.values.tolist(), chunk.events], sort_keys=True
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _receipt(recording: TraceRecording, chunk: TraceChunk) -> ChunkReceipt:
    times = unpack(chunk.times, TIME_DTYPE)
    return ChunkReceipt(
        recording=recording.uuid,
        sequence=chunk.sequence,
        n_samples=int(times.size),
        last_time=float(times[-1]),
        next_sequence=chunk.sequence + 1,
    )


def _recording_for_update(
    *,
    recording_uuid: uuid.UUID,
    question: Question,
    assignment: Assignment,
    client_duration: float | None,
) -> TraceRecording:
    """Get or create the recording and lock it; it must be this assignment's."""
    recording = TraceRecording.objects.filter(uuid=recording_uuid).first()
    if recording is None:
        if not trace_settings(question).allow_redo and has_trace(
            assignment=assignment, question=question
        ):
            raise ValidationError(
                {"recording": "This item is traced; this question does not allow tracing again."}
            )
        duration = stimulus_duration(assignment.item) or client_duration
        if duration is None or not 0 < duration <= MAX_CLIENT_DURATION_S:
            raise ValidationError(
                {"duration": "Give the media duration in seconds (the server does not know it)."}
            )
        try:
            with transaction.atomic():
                recording = TraceRecording.objects.create(
                    uuid=recording_uuid,
                    question=question,
                    item_id=assignment.item_id,
                    annotator_id=assignment.annotator_id,
                    round=assignment.round,
                    duration=duration,
                )
        except IntegrityError:
            recording = TraceRecording.objects.get(uuid=recording_uuid)
    recording = TraceRecording.objects.select_for_update().get(pk=recording.pk)
    same = (recording.question_id, recording.item_id, recording.annotator_id, recording.round)
    if same != (question.pk, assignment.item_id, assignment.annotator_id, assignment.round):
        raise ValidationError({"recording": "This recording id belongs to another trace."})
    return recording


def _checked_assignment(
    *, annotator: Account, assignment: Assignment, question: Question
) -> Assignment:
    assignment = assignments_to_answer().select_related("item").get(pk=assignment.pk)
    assignment_check_annotator(annotator=annotator, assignment=assignment)
    if question.study_id != assignment.study_id or question.kind != Question.Kind.CONTINUOUS:
        raise ValidationError({"question": "Not a continuous question of this study."})
    if not question_covers(question, assignment.item):
        raise ValidationError(
            {"question": f"{question.key!r} is not asked about this item (its scope)."}
        )
    return assignment


@transaction.atomic
def trace_chunk_store(
    *,
    annotator: Account,
    assignment: Assignment,
    question: Question,
    recording_uuid: uuid.UUID,
    sequence: int,
    times: Sequence[float],
    values: Sequence[float],
    events: Sequence[dict[str, Any]] = (),
    duration: float | None = None,
) -> tuple[ChunkReceipt, bool]:
    """Validate and store one chunk of samples; return its receipt and whether it is new.

    A chunk already stored under ``(recording, sequence)`` with the same content returns the
    same receipt and stores nothing; the same sequence with other content is refused. Chunk
    numbers must increase (``sequence`` at least the recording's ``next_sequence``; numbers
    may be skipped), so a closing page can send what it has not had acknowledged as one chunk
    that no earlier upload can overtake. Leading samples at or before the recording's last
    stored time (a page that resumed from an older point, or that merged an upload which
    landed meanwhile) are dropped and the rest stored; a chunk with nothing after that time
    stores nothing and its receipt (``n_samples`` 0) names the stored last time. A bad chunk
    raises ``ValidationError`` and stores nothing (not even a new recording).
    ``duration`` is the client's media duration, used only when the server does not know it.
    """
    assignment = _checked_assignment(annotator=annotator, assignment=assignment, question=question)
    chunk = Chunk(
        times=np.asarray(times, dtype=np.float64),
        values=np.asarray(values, dtype=np.float64),
        events=[dict(event) for event in events],
    )
    recording = _recording_for_update(
        recording_uuid=recording_uuid,
        question=question,
        assignment=assignment,
        client_duration=duration,
    )
    digest = _digest(chunk)
    stored = recording.chunks.filter(sequence=sequence).first()
    if stored is not None:
        if stored.digest != digest:
            raise ValidationError(
                {"sequence": f"Chunk {sequence} was already stored with other samples."}
            )
        return _receipt(recording, stored), False
    if recording.status == TraceRecording.Status.FINISHED:
        raise ValidationError({"recording": "This recording is finished; start a new one."})
    if sequence < recording.next_sequence:
        raise ValidationError(
            {"sequence": f"Expected chunk {recording.next_sequence} or above, got {sequence}."}
        )
    checked = chunk_check(
        chunk,
        settings=trace_settings(question),
        duration=recording.duration,
        previous_time=recording.last_time,
    )
    new = checked.chunk
    if new.times.size == 0:  # all of it stored before, so the recording has a last sample
        assert recording.last_time is not None
        receipt = ChunkReceipt(
            recording=recording.uuid,
            sequence=sequence,
            n_samples=0,
            last_time=float(recording.last_time),
            next_sequence=recording.next_sequence,
        )
        return receipt, False
    stored = TraceChunk.objects.create(
        recording=recording,
        sequence=sequence,
        times=pack(new.times, TIME_DTYPE),
        values=pack(new.values, VALUE_DTYPE),
        segment_starts=checked.segment_starts,
        events=new.events,
        digest=digest,
    )
    recording.next_sequence = sequence + 1
    recording.n_samples += new.times.size
    recording.last_time = float(new.times[-1])
    recording.last_value = float(new.values[-1])
    recording.save(update_fields=["next_sequence", "n_samples", "last_time", "last_value"])
    return _receipt(recording, stored), True


@transaction.atomic
def trace_finish(
    *,
    annotator: Account,
    recording_uuid: uuid.UUID,
    time_spent_ms: int | None = None,
    source: str = Revision.Source.UI,
) -> tuple[Revision, bool]:
    """Resample a recording to the analysis rate and record it as the annotation's revision.

    The trace must reach the end of the stimulus (its last sample within ``max_gap_s`` of the
    end). Returns the revision and ``created``: finishing again returns the same revision and
    ``False`` (the recording's uuid is the revision's idempotency key; the recording's row lock
    orders racing finishes). A new recording of the same item appends a new revision.
    """
    recording = (
        TraceRecording.objects.select_for_update(of=("self", "question"))
        .select_related("question__overlap_rule")
        .filter(uuid=recording_uuid)
        .first()
    )
    if recording is None:
        raise ValidationError({"recording": "No recording has this id."})
    if recording.annotator_id != annotator.pk:
        raise PermissionDenied("This recording belongs to another annotator.")
    assignment = Assignment.objects.get(
        item_id=recording.item_id, annotator_id=recording.annotator_id, round=recording.round
    )
    if recording.status == TraceRecording.Status.FINISHED:
        revision = Revision.objects.get(
            annotation__annotator=annotator, idempotency_key=recording.uuid
        )
        return revision, False
    settings = trace_settings(recording.question)
    times, values, starts = recording_samples(recording)
    if times.size < 2:
        raise ValidationError({"recording": "Record at least two samples before finishing."})
    times, values = merge_segments(times, values, segment_starts=starts)
    if times[-1] < recording.duration - settings.max_gap_s:
        raise ValidationError(
            {
                "recording": f"The trace stops at {times[-1]:.1f} s of {recording.duration:.1f} s; "
                "play the stimulus to the end before finishing."
            }
        )
    trace = resample_hold(
        times, values, rate_hz=settings.analysis_rate_hz, duration=recording.duration
    )
    recording.status = TraceRecording.Status.FINISHED
    recording.analysis_rate_hz = settings.analysis_rate_hz
    recording.resampled = pack(trace, VALUE_DTYPE)
    recording.n_resampled = trace.size
    recording.finished_at = timezone.now()
    recording.save()
    (revision,), created = annotations_submit(
        annotator=annotator,
        assignment=assignment,
        answers={recording.question: trace_pointer(recording)},
        idempotency_key=recording.uuid,
        time_spent_ms=time_spent_ms,
        source=source,
    )
    return revision, created
