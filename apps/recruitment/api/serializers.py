"""Serializers of gold answers: read with item and question named by their keys."""

from __future__ import annotations

from rest_framework import serializers

from apps.recruitment.models import GoldAnswer


class GoldAnswerSerializer(serializers.ModelSerializer):
    """A known answer. Write it naming the item by ``external_id`` and the question by key."""

    item = serializers.SlugField(
        source="item.external_id", help_text="The item's external_id.", max_length=200
    )
    question = serializers.SlugField(source="question.key", help_text="The question's key.")
    value = serializers.JSONField(help_text='The answer, e.g. "positive" or {"label": "positive"}.')

    class Meta:
        model = GoldAnswer
        fields = ["id", "item", "question", "value", "reason", "use"]
        read_only_fields = ["id"]


class GoldSignalSerializer(serializers.Serializer):
    """An item's true signal (a gold trace). Upload it as a multipart form with ``file``: a
    CSV (one number in [0, 1] per line, an optional header) or a 1-D NumPy ``.npy`` array."""

    item = serializers.CharField(max_length=200, help_text="The item's external_id.")
    rate_hz = serializers.FloatField(help_text="Samples per second.")
    file = serializers.FileField(write_only=True, help_text=".csv or .npy, at most 4 MiB.")
    description = serializers.CharField(max_length=300, required=False, allow_blank=True)
    key = serializers.CharField(read_only=True)
    n_samples = serializers.IntegerField(read_only=True)
    duration = serializers.FloatField(read_only=True)
