"""Serializers of items: what an annotator is shown, and an import's outcome."""

from __future__ import annotations

from rest_framework import serializers

from apps.items.models import Item


class ItemSerializer(serializers.ModelSerializer):
    """An item as shown to annotators; its import metadata stays out of the API."""

    media = serializers.FileField(
        read_only=True, use_url=True, help_text="Absolute URL of the uploaded file, if any."
    )

    class Meta:
        model = Item
        fields = ["id", "external_id", "kind", "text", "url", "media", "position"]
        read_only_fields = fields


class ImportSummarySerializer(serializers.Serializer):
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
