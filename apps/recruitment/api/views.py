"""API of a study's gold answers (managers only): list, set, remove."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from apps.continuous.models import GoldSignal
from apps.items.models import Item
from apps.recruitment.api.serializers import GoldAnswerSerializer, GoldSignalSerializer
from apps.recruitment.models import GoldAnswer
from apps.recruitment.selectors import gold_signal_items, gold_signals_of
from apps.recruitment.services import gold_answer_set, item_gold_signal_set
from apps.recruitment.signal_files import MAX_SIGNAL_BYTES, signal_read
from apps.studies.api.permissions import InStudyMixin, IsStudyManager

STUDY_PK = OpenApiParameter("study_pk", OpenApiTypes.INT, OpenApiParameter.PATH)


@extend_schema(parameters=[STUDY_PK])
class GoldAnswerViewSet(
    InStudyMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    GenericViewSet,
):
    """Known answers for training and attention checks; annotators never see them.

    ``POST`` creates or replaces the answer for an (item, question) pair.
    """

    serializer_class = GoldAnswerSerializer
    permission_classes = [IsAuthenticated, IsStudyManager]

    def get_queryset(self) -> QuerySet[GoldAnswer]:
        if getattr(self, "swagger_fake_view", False):
            return GoldAnswer.objects.none()
        return GoldAnswer.objects.filter(item__study=self.study).select_related("item", "question")

    def create(self, request: Request, study_pk: str) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        gold = gold_answer_set(
            item=get_object_or_404(self.study.items, external_id=data["item"]["external_id"]),
            question=get_object_or_404(self.study.questions, key=data["question"]["key"]),
            value=data["value"],
            reason=data.get("reason", ""),
            use=data.get("use", GoldAnswer.Use.CHECK),
        )
        return Response(GoldAnswerSerializer(gold).data, status=status.HTTP_201_CREATED)


def _signal_row(item: Item, signal: GoldSignal) -> dict[str, Any]:
    return {
        "item": item.external_id,
        "key": signal.key,
        "rate_hz": signal.rate_hz,
        "n_samples": signal.n_samples,
        "duration": signal.duration,
        "description": signal.description,
    }


@extend_schema(parameters=[STUDY_PK])
class GoldSignalViewSet(InStudyMixin, GenericViewSet):
    """The true signals of the study's gold traces (managers only): list, upload or replace."""

    serializer_class = GoldSignalSerializer
    permission_classes = [IsAuthenticated, IsStudyManager]
    parser_classes = [MultiPartParser, FormParser]

    def list(self, request: Request, study_pk: str) -> Response:
        # capped pages, as every list of the API, cut in the database: only a page is read
        page = self.paginate_queryset(gold_signal_items(study=self.study))
        rows = [_signal_row(item, signal) for item, signal in gold_signals_of(items=page or [])]
        return self.get_paginated_response(GoldSignalSerializer(rows, many=True).data)

    def create(self, request: Request, study_pk: str) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        item = self.study.items.filter(external_id=data["item"]).first()
        if item is None:
            raise ValidationError({"item": f"No item {data['item']!r} in this study."})
        upload = data["file"]
        signal = item_gold_signal_set(
            item=item,
            values=signal_read(data=upload.read(MAX_SIGNAL_BYTES + 1), name=upload.name),
            rate_hz=data["rate_hz"],
            description=data.get("description", ""),
        )
        row = GoldSignalSerializer(_signal_row(item, signal)).data
        return Response(row, status=status.HTTP_201_CREATED)
