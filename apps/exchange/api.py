"""Query and upload serializers of the exchange endpoints (Label Studio import and export),
and the OpenAPI responses of every tabular download."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from rest_framework import serializers

from apps.exchange.identity import IDENTITIES, USERNAMES

#: ``@extend_schema(responses=...)`` of an endpoint streaming CSV, JSON Lines or Parquet.
TABULAR_RESPONSES = {
    (200, "text/csv"): OpenApiTypes.STR,
    (200, "application/x-ndjson"): OpenApiTypes.STR,
    (200, "application/vnd.apache.parquet"): OpenApiTypes.BINARY,
}


class LabelStudioImportSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A Label Studio JSON export (a list of tasks).")
    name = serializers.CharField(max_length=200, help_text="The new study's name.")
    label_config = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        help_text="The project's labelling configuration (XML): the full scales, in order, "
        "including labels nobody chose. Without it the scales are read from the answers.",
    )


class LabelStudioExportQuerySerializer(serializers.Serializer):
    part = serializers.ChoiceField(
        choices=["tasks", "config"],
        default="tasks",
        help_text="tasks: the JSON list of tasks with annotations; config: the labelling "
        "configuration (XML) of a project that imports them.",
    )
    annotators = serializers.ChoiceField(
        choices=list(IDENTITIES),
        default=USERNAMES,
        help_text="How annotators are named in completed_by: usernames or pseudonyms.",
    )
