"""Serializers of the aggregated-labels API: the query and the provenance record."""

from __future__ import annotations

from rest_framework import serializers

from apps.annotations.api.serializers import ProvenanceFileSerializer, ProvenanceSerializer
from apps.exchange.formats import CONTENT_TYPES


class AggregatedQuerySerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=list(CONTENT_TYPES), default="csv")
    curated = serializers.BooleanField(
        default=False,
        help_text="1: leave the annotators excluded on the quality dashboard out of every figure.",
    )


class AggregationSerializer(serializers.Serializer):
    """How each figure of the aggregated file was computed, in words."""

    answers = serializers.CharField()
    majority = serializers.CharField()
    dawid_skene = serializers.CharField()
    disagreement = serializers.CharField()
    adjudication = serializers.CharField()


class AggregatedProvenanceSerializer(ProvenanceSerializer):
    """The provenance of the answers export with the same options, plus the aggregated file."""

    answers_file = ProvenanceFileSerializer(
        help_text="The answers export the figures were computed from."
    )
    aggregation = AggregationSerializer()
