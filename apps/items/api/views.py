"""API of a study's items: read what you may annotate; managers import in bulk."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from apps.items.api.serializers import (
    ImportSummarySerializer,
    ManagedItemSerializer,
)
from apps.items.models import Item
from apps.items.services import items_bulk_create
from apps.studies.api.permissions import InStudyMixin, IsStudyManagerOrReadOnly
from apps.studies.models import Membership

_TEXT = {"type": "string"}
ITEM_ROWS_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["external_id"],
        "properties": {
            "external_id": {**_TEXT, "description": "Unique in the study; an existing id updates."},
            "kind": {**_TEXT, "enum": Item.Kind.values, "default": Item.Kind.TEXT},
            "text": _TEXT,
            "url": {**_TEXT, "format": "uri"},
            "metadata": {"type": "object", "additionalProperties": True},
        },
        "additionalProperties": {"description": "Any other key is kept in metadata."},
    },
}
_ROWS = serializers.ListField(child=serializers.DictField())


class ItemViewSet(InStudyMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, GenericViewSet):
    """Managers see every item of the study with its external id and position; annotators see
    the items they have answered, as the queue showed them (not their package ahead: its
    attention checks would stand out)."""

    serializer_class = ManagedItemSerializer
    permission_classes = [IsAuthenticated, IsStudyManagerOrReadOnly]

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        if not getattr(self, "swagger_fake_view", False):
            context["manager"] = self.study.role == Membership.Role.MANAGER
        return context

    def get_queryset(self) -> QuerySet[Item]:
        if getattr(self, "swagger_fake_view", False):
            return Item.objects.none()
        items = self.study.items.all()
        if self.study.role == Membership.Role.MANAGER:
            return items
        return items.filter(
            assignments__annotator=self.request.user, assignments__completed_at__isnull=False
        ).distinct()

    @extend_schema(
        request={"application/json": ITEM_ROWS_SCHEMA},
        responses=ImportSummarySerializer,
        description="Create or update items from a JSON list (same fields as a JSON Lines "
        "import). All or nothing: any bad row stores none and answers 400 naming each "
        "row (line = position in the list, from 1) and field.",
    )
    @action(detail=False, methods=["post"])
    def bulk(self, request: Request, study_pk: str) -> Response:
        rows = _ROWS.run_validation(request.data)
        summary = items_bulk_create(study=self.study, rows=rows)
        return Response(ImportSummarySerializer(summary).data)
