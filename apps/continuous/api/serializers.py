"""Serializers of the trace API: chunk upload, finish, resume state, traces and calibration."""

from __future__ import annotations

import math
from typing import Any

from rest_framework import serializers

from apps.annotations.models import Assignment
from apps.continuous.selectors import RESUME_POINTS
from apps.continuous.validation import EVENT_TYPES
from apps.exchange.identity import IDENTITIES, USERNAMES
from apps.studies.models import Question

MAX_SAMPLES = 20_000


class _InStudy(serializers.Serializer):
    """Resolves ``assignment`` (the caller's own) and ``question`` (a key) in the view's study."""

    assignment = serializers.IntegerField()
    question = serializers.SlugField(help_text="The continuous question's key.")

    def validate_assignment(self, value: int) -> Assignment:
        assignment = Assignment.objects.filter(
            pk=value, study=self.context["study"], annotator=self.context["request"].user
        ).first()
        if assignment is None:
            raise serializers.ValidationError("No assignment of yours in this study has this id.")
        return assignment

    def validate_question(self, value: str) -> Question:
        question = (
            self.context["study"].questions.filter(key=value, kind=Question.Kind.CONTINUOUS).first()
        )
        if question is None:
            raise serializers.ValidationError("No continuous question of this study has this key.")
        return question


class EventSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=EVENT_TYPES)
    index = serializers.IntegerField(
        min_value=0, help_text="Index in this chunk of the first sample taken after the event."
    )
    time = serializers.FloatField(help_text="Media time of the event, seconds.")


class ChunkUploadSerializer(_InStudy):
    recording = serializers.UUIDField(help_text="Chosen by the client when recording starts.")
    sequence = serializers.IntegerField(
        min_value=0, help_text="0, 1, 2 ... per recording: increasing, numbers may be skipped."
    )
    times = serializers.ListField(
        child=serializers.FloatField(), max_length=MAX_SAMPLES, help_text="Media times, s."
    )
    values = serializers.ListField(child=serializers.FloatField(), max_length=MAX_SAMPLES)
    events = EventSerializer(many=True, required=False, default=list)
    duration = serializers.FloatField(
        required=False,
        allow_null=True,
        help_text="Media duration, s; used only when the server does not know it.",
    )


class ChunkReceiptSerializer(serializers.Serializer):
    recording = serializers.UUIDField()
    sequence = serializers.IntegerField()
    n_samples = serializers.IntegerField(
        help_text="Samples stored from this chunk (those after the stored last time)."
    )
    last_time = serializers.FloatField(
        help_text="Media time of the last stored sample (of this chunk, or before it when "
        "nothing in it was new)."
    )
    next_sequence = serializers.IntegerField(help_text="The lowest number the next chunk may take.")


class FinishSerializer(serializers.Serializer):
    recording = serializers.UUIDField()
    time_spent_ms = serializers.IntegerField(min_value=0, required=False)


class FinishedSerializer(serializers.Serializer):
    annotation = serializers.IntegerField(source="annotation_id")
    revision = serializers.IntegerField(source="number")
    value = serializers.JSONField()


class ResumeQuerySerializer(_InStudy):
    pass


class ResumeStateSerializer(serializers.Serializer):
    recording = serializers.UUIDField(
        allow_null=True, help_text="The unfinished recording to continue, or null: start anew."
    )
    next_sequence = serializers.IntegerField()
    last_time = serializers.FloatField(allow_null=True, help_text="Seek here to continue.")
    last_value = serializers.FloatField(allow_null=True, help_text="Put the slider here.")
    duration = serializers.FloatField(allow_null=True)
    finished = serializers.IntegerField(help_text="Finished recordings of this item so far.")
    times = serializers.ListField(
        child=serializers.FloatField(),
        help_text=f"The trace so far, to redraw: media times (s), at most {RESUME_POINTS} of "
        "them, evenly spread, the first and the last included.",
    )
    values = serializers.ListField(
        child=serializers.FloatField(), help_text="Slider values at those times."
    )
    traced = serializers.BooleanField(
        help_text="Nothing to resume: times and values are the item's finished trace that "
        "counts (redraw it; allow_redo says whether it may be traced again)."
    )


class TraceQuerySerializer(serializers.Serializer):
    question = serializers.SlugField(help_text="The continuous question's key.")
    item = serializers.IntegerField(required=False, help_text="Only this item's traces.")


class TraceExportQuerySerializer(TraceQuerySerializer):
    format = serializers.ChoiceField(choices=["csv", "json", "jsonl", "parquet"], default="csv")
    annotators = serializers.ChoiceField(
        choices=list(IDENTITIES),
        default=USERNAMES,
        help_text="CSV, JSON Lines, Parquet: name annotators by usernames or by stable "
        "per-study pseudonyms.",
    )


class TraceSerializer(serializers.Serializer):
    recording = serializers.UUIDField(source="uuid")
    item = serializers.IntegerField(source="item_id")
    item_external_id = serializers.CharField(source="item.external_id")
    annotator = serializers.CharField(source="annotator.username")
    round = serializers.IntegerField()
    rate_hz = serializers.FloatField(source="analysis_rate_hz")
    n = serializers.IntegerField(source="n_resampled")
    values = serializers.SerializerMethodField()

    def get_values(self, recording: Any) -> list[float]:
        return [round(float(v), 6) for v in recording.trace()]


class FiniteFloatField(serializers.FloatField):
    """A read-only float that is ``null`` where the metric is undefined (nan)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, allow_null=True, **kwargs)

    def to_representation(self, value: float) -> float | None:
        value = float(value)
        return None if math.isnan(value) else round(value, 6)


class ItemCalibrationSerializer(serializers.Serializer):
    item_id = serializers.IntegerField()
    item = serializers.CharField()
    signal = serializers.CharField()
    n = serializers.IntegerField()
    lag_seconds = FiniteFloatField()
    lag_correlation = FiniteFloatField()
    cubic_r2 = FiniteFloatField()
    cubic_increasing = serializers.BooleanField()
    sign_agreement = FiniteFloatField()
    f1 = FiniteFloatField()
    mcc = FiniteFloatField()
    sda = FiniteFloatField()
    kappa_sda = FiniteFloatField()


class AnnotatorCalibrationSerializer(serializers.Serializer):
    annotator_id = serializers.IntegerField()
    username = serializers.CharField()
    lag_seconds = FiniteFloatField()
    cubic_r2 = FiniteFloatField()
    sign_agreement = FiniteFloatField()
    sda = FiniteFloatField()
    kappa_sda = FiniteFloatField()
    f1 = FiniteFloatField()
    mcc = FiniteFloatField()
    items = ItemCalibrationSerializer(many=True)
