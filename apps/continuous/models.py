"""Slider traces recorded during media playback, and the known signals of calibration stimuli.

A :class:`TraceRecording` is one attempt of one annotator to trace one item for one continuous
question. Samples arrive in numbered :class:`TraceChunk` rows, each holding its samples as two
packed little-endian arrays (media times float64, slider values float32): about 12 bytes a
sample instead of a row per sample. Finishing a recording resamples it to the question's
analysis rate, stores that trace (float32) on the recording, and appends a revision to the
annotation whose value points at the recording; re-recording appends another revision.
"""

from __future__ import annotations

import uuid

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from numpy.typing import NDArray

from apps.items.models import Item
from apps.studies.models import Question

TIME_DTYPE = np.dtype("<f8")
VALUE_DTYPE = np.dtype("<f4")


def pack(values: NDArray, dtype: np.dtype) -> bytes:
    """Pack an array as little-endian bytes of ``dtype``."""
    return np.ascontiguousarray(values, dtype=dtype).tobytes()


def unpack(data: bytes | memoryview, dtype: np.dtype) -> NDArray[np.float64]:
    """Unpack bytes written by :func:`pack` into a float64 array."""
    return np.frombuffer(bytes(data), dtype=dtype).astype(np.float64)


class GoldSignal(models.Model):
    """A known target signal (e.g. the true green intensity of a calibration stimulus).

    An item becomes a gold item of a continuous study when its metadata names a signal:
    ``{"signal": "<key>"}``. The calibration report compares its traces with the signal. An
    item without audio or video is shown as a canvas whose green intensity follows the
    signal; an audio or video item plays its own media.
    """

    key = models.SlugField(max_length=80, unique=True)
    description = models.CharField(max_length=300, blank=True)
    rate_hz = models.FloatField()
    values = models.BinaryField(help_text="float32 little-endian samples on [0, 1].")
    n_samples = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key

    @property
    def duration(self) -> float:
        """Seconds from the first to the last sample."""
        return (self.n_samples - 1) / self.rate_hz

    def array(self) -> NDArray[np.float64]:
        return unpack(self.values, VALUE_DTYPE)

    def clean(self) -> None:
        if not self.rate_hz > 0:
            raise ValidationError({"rate_hz": "The rate must be above 0 Hz."})
        if self.n_samples < 2:
            raise ValidationError({"values": "A signal needs at least two samples."})


class TraceRecording(models.Model):
    """One attempt to trace an item; ``uuid`` is chosen by the client and names it in uploads."""

    class Status(models.TextChoices):
        RECORDING = "recording", "Recording"
        FINISHED = "finished", "Finished"

    uuid = models.UUIDField(unique=True, default=uuid.uuid4)
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="recordings")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="recordings")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="trace_recordings"
    )
    round = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=9, choices=Status.choices, default=Status.RECORDING)
    duration = models.FloatField(help_text="Media duration in seconds.")
    next_sequence = models.PositiveIntegerField(default=0)
    n_samples = models.PositiveIntegerField(default=0)
    last_time = models.FloatField(null=True, blank=True, help_text="Media time of the last sample.")
    last_value = models.FloatField(null=True, blank=True)
    analysis_rate_hz = models.FloatField(null=True, blank=True)
    resampled = models.BinaryField(null=True, blank=True, help_text="float32 at the analysis rate.")
    n_resampled = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(
                fields=["question", "item", "annotator", "round", "status"],
                name="recording_lookup",
            )
        ]

    def __str__(self) -> str:
        return f"recording {self.uuid} of {self.annotator} on {self.item}"

    def trace(self) -> NDArray[np.float64]:
        """The finished trace at the analysis rate (empty while recording)."""
        return unpack(self.resampled or b"", VALUE_DTYPE)


class TraceChunk(models.Model):
    """One upload of samples; ``(recording, sequence)`` is its idempotency key."""

    recording = models.ForeignKey(TraceRecording, on_delete=models.CASCADE, related_name="chunks")
    sequence = models.PositiveIntegerField()
    times = models.BinaryField(help_text="float64 little-endian media times (s).")
    values = models.BinaryField(help_text="float32 little-endian slider values.")
    segment_starts = models.JSONField(
        default=list, help_text="Indices in this chunk where a seek started a new segment."
    )
    events = models.JSONField(default=list)
    digest = models.CharField(max_length=64, help_text="SHA-256 of the chunk as received.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["recording_id", "sequence"]
        constraints = [
            models.UniqueConstraint(fields=["recording", "sequence"], name="chunk_sequence_unique")
        ]

    def __str__(self) -> str:
        return f"chunk {self.sequence} of {self.recording_id}"
