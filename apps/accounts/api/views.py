"""API of invitation links: a manager invites without a mail server."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from apps.accounts.api.serializers import InvitationCreateSerializer, InvitationLinkSerializer
from apps.accounts.services import invitation_create
from apps.studies.api.permissions import STUDY_PK, InStudyMixin, IsStudyManager


@extend_schema(parameters=[STUDY_PK])
class InvitationViewSet(InStudyMixin, GenericViewSet):
    """One-time links that make whoever opens them a member of the study. Managers only."""

    serializer_class = InvitationCreateSerializer
    permission_classes = [IsAuthenticated, IsStudyManager]

    @extend_schema(responses={201: InvitationLinkSerializer})
    def create(self, request: Request, study_pk: str) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        invitation, token = invitation_create(
            study=self.study, created_by=request.user, **serializer.validated_data
        )
        link = {
            "id": invitation.pk,
            "role": invitation.role,
            "expires_at": invitation.expires_at,
            "url": request.build_absolute_uri(reverse("accounts:invitation", args=[token])),
        }
        return Response(InvitationLinkSerializer(link).data, status=status.HTTP_201_CREATED)
