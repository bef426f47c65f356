"""Serializers of items: what an annotator is shown, and an import's outcome."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.items.models import Item


class ItemSerializer(serializers.ModelSerializer):
    """An item as shown to annotators: what they need to answer it, nothing that tells one item
    from another beyond that. Its external id and queue position stay out (attention checks
    were spotted by them: imported last, they had the highest positions), as does its import
    metadata."""

    # A string, not a URLField: an item without a URL has "" here, which is no URI (schema).
    url = serializers.CharField(
        read_only=True, help_text="Where the media lives (an absolute URL), or empty."
    )
    media = serializers.SerializerMethodField(
        help_text="Absolute URL of the uploaded file, if any (served to the study's members)."
    )

    class Meta:
        model = Item
        fields = ["id", "kind", "text", "url", "media"]
        read_only_fields = fields

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_media(self, item: Item) -> str | None:
        if not item.media:
            return None
        request = self.context.get("request")
        return request.build_absolute_uri(item.media_url) if request else item.media_url


class ManagedItemSerializer(ItemSerializer):
    """An item in the items API: with its external id and queue position for the study's
    managers, and both ``null`` for annotators (``context["manager"]``), so that one schema
    describes the answer whoever asks."""

    external_id = serializers.SerializerMethodField(
        help_text="The item's id in your files; null unless you manage the study."
    )
    position = serializers.SerializerMethodField(
        help_text="Its place in the queue order; null unless you manage the study."
    )

    class Meta(ItemSerializer.Meta):
        fields = ["id", "external_id", "kind", "text", "url", "media", "position"]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_external_id(self, item: Item) -> str | None:
        return item.external_id if self.context.get("manager") else None

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_position(self, item: Item) -> int | None:
        return item.position if self.context.get("manager") else None


class ImportSummarySerializer(serializers.Serializer):
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
