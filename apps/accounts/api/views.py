"""API of invitation links (a manager invites without a mail server) and of API tokens."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from knox.models import AuthToken
from knox.views import LoginView as KnoxLoginView
from knox.views import LogoutAllView as KnoxLogoutAllView
from knox.views import LogoutView as KnoxLogoutView
from rest_framework import mixins, status
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from apps.accounts.api.serializers import (
    CredentialsSerializer,
    InvitationCreateSerializer,
    InvitationLinkSerializer,
    TokenInfoSerializer,
    TokenSerializer,
)
from apps.accounts.authentication import TokenAuthentication
from apps.accounts.selectors import api_tokens_for
from apps.accounts.services import api_tokens_revoke, api_tokens_sweep_expired, invitation_create
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


class TokenLoginView(KnoxLoginView):
    """Trade a username and password for a new API token.

    The token is shown once (only its hash is stored) and expires after ``API_TOKEN_TTL_DAYS``;
    the user's expired tokens are deleted then. Sign-ins go through django-axes: too many
    failures lock the address or the account out.
    """

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    serializer_class = CredentialsSerializer

    @extend_schema(
        auth=[],
        request=CredentialsSerializer,
        responses={
            200: TokenSerializer,
            400: OpenApiResponse(description="Wrong username or password."),
            429: OpenApiResponse(
                description="Too many failed sign-ins from this address or for this account; "
                "`Retry-After` says how many seconds to wait."
            ),
        },
    )
    def post(self, request: Request, format: str | None = None) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        request.user = serializer.validated_data["user"]
        api_tokens_sweep_expired(user=request.user)
        return super().post(request, format)

    def get_serializer(self, *args: Any, **kwargs: Any) -> CredentialsSerializer:
        return CredentialsSerializer(*args, context={"request": self.request}, **kwargs)


@extend_schema_view(post=extend_schema(request=None, responses={204: None}))
class TokenLogoutView(KnoxLogoutView):
    """Revoke the token this request is authenticated with."""

    authentication_classes = [TokenAuthentication]


@extend_schema_view(post=extend_schema(request=None, responses={204: None}))
class TokenLogoutAllView(KnoxLogoutAllView):
    """Revoke every token of the caller."""

    authentication_classes = [TokenAuthentication]


class TokenViewSet(mixins.ListModelMixin, GenericViewSet):
    """The caller's API tokens that still work: key (first characters), made, expires."""

    serializer_class = TokenInfoSerializer
    pagination_class = None
    lookup_field = "token_key"
    lookup_url_kwarg = "key"

    def get_queryset(self) -> QuerySet[AuthToken]:
        if getattr(self, "swagger_fake_view", False):
            return AuthToken.objects.none()
        return api_tokens_for(user=self.request.user)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, key: str) -> Response:
        """Revoke one of the caller's tokens by its key."""
        if not api_tokens_revoke(user=request.user, keys=[key]):
            raise NotFound("You have no token with this key.")
        return Response(status=status.HTTP_204_NO_CONTENT)
