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
