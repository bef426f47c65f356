"""The stored answer of a continuous question: a small pointer to a finished trace."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from apps.annotations.models import Assignment
from apps.continuous.models import TraceRecording
from apps.studies.models import Question

POINTER_KEYS = {"trace", "rate_hz", "n"}


def trace_pointer(recording: TraceRecording) -> dict[str, Any]:
    """``{"trace": uuid, "rate_hz": analysis rate, "n": samples}`` of a finished recording."""
    return {
        "trace": str(recording.uuid),
        "rate_hz": recording.analysis_rate_hz,
        "n": recording.n_resampled,
    }


def clean_trace_pointer(
    question: Question, value: Any, assignment: Assignment | None
) -> tuple[dict[str, Any], None]:
    """Accept only a pointer to the annotator's own finished recording of this item and
    question, as written on finish (never another annotator's trace)."""
    if assignment is None:
        raise ValidationError({"value": "Traces are answered by recording them."})
    if not isinstance(value, dict) or set(value) != POINTER_KEYS:
        raise ValidationError(
            {"value": 'A trace answer is {"trace": "<recording uuid>", "rate_hz": r, "n": n}.'}
        )
    recording = TraceRecording.objects.filter(
        uuid=str(value["trace"]),
        question=question,
        item_id=assignment.item_id,
        annotator_id=assignment.annotator_id,
        round=assignment.round,
        status=TraceRecording.Status.FINISHED,
    ).first()
    if recording is None:
        raise ValidationError({"value": "No finished trace of this question has that id."})
    pointer = trace_pointer(recording)
    if pointer != {**value, "trace": str(value["trace"])}:
        raise ValidationError({"value": "The rate or length does not match the stored trace."})
    return pointer, None
