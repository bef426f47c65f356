"""API of the aggregated labels: one row per item and categorical question, with provenance."""

from __future__ import annotations

from django.http import HttpResponseBase
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from annotate_site.api_downloads import FileDownloadNegotiation
from apps.adjudication.api.serializers import (
    AggregatedProvenanceSerializer,
    AggregatedQuerySerializer,
)
from apps.adjudication.exporting import aggregated_provenance, aggregated_response
from apps.exchange.api import TABULAR_RESPONSES
from apps.studies.api.permissions import STUDY_PK, InStudyMixin, IsStudyManager


@extend_schema(parameters=[STUDY_PK])
class AggregatedLabelsViewSet(InStudyMixin, GenericViewSet):
    """The study's aggregated labels (majority, Dawid-Skene, adjudication, disagreement) as a
    file, and the provenance record of that file. Managers only."""

    permission_classes = [IsAuthenticated, IsStudyManager]
    content_negotiation_class = FileDownloadNegotiation
    serializer_class = AggregatedQuerySerializer

    def _query(self, request: Request) -> AggregatedQuerySerializer:
        query = AggregatedQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return query

    @extend_schema(
        parameters=[AggregatedQuerySerializer],
        responses=TABULAR_RESPONSES,
        description="Download the aggregated labels, streamed: per item and categorical "
        "question the majority (ties marked), the Dawid-Skene posterior and label, the latest "
        "adjudication, the number of answers and the disagreement (AAD-RMSE). `format` picks "
        "the file format (`Accept` is ignored); `curated=1` leaves the excluded annotators "
        "out; `provenance/` with the same query describes the file.",
    )
    def list(self, request: Request, study_pk: str) -> HttpResponseBase:
        """The aggregated-labels file. Managers only."""
        query = self._query(request).validated_data
        return aggregated_response(
            request=request, study=self.study, fmt=query["format"], curated=query["curated"]
        )

    @extend_schema(
        parameters=[AggregatedQuerySerializer],
        responses=AggregatedProvenanceSerializer,
        description="The provenance record of the aggregated file with the same query: the "
        "record of the answers export it was computed from (exclusions and why, open flags, "
        "software), the file's columns, rows and SHA-256, and how each figure is computed.",
    )
    @action(detail=False, methods=["get"])
    def provenance(self, request: Request, study_pk: str) -> Response:
        """Provenance of the aggregated-labels file. Managers only."""
        query = self._query(request).validated_data
        record = aggregated_provenance(
            study=self.study, fmt=query["format"], curated=query["curated"]
        )
        return Response(AggregatedProvenanceSerializer(record).data)
