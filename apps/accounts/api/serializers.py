"""Serializers of invitation links and API tokens."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
from knox.models import AuthToken
from rest_framework import serializers

from apps.accounts.services import INVITED
from apps.studies.models import Membership


class InvitationCreateSerializer(serializers.Serializer):
    role = serializers.ChoiceField(
        choices=Membership.Role.choices, default=Membership.Role.ANNOTATOR
    )
    valid_days = serializers.IntegerField(min_value=1, max_value=90, default=14)


class InvitationAddressedSerializer(serializers.Serializer):
    """An invitation to a username: the same answer whether or not such an account exists."""

    username = serializers.CharField(source="invitee_username")
    role = serializers.ChoiceField(choices=Membership.Role.choices)
    expires_at = serializers.DateTimeField()
    detail = serializers.SerializerMethodField()

    def get_detail(self, invitation: Any) -> str:
        return INVITED


class InvitationLinkSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    role = serializers.ChoiceField(choices=Membership.Role.choices)
    expires_at = serializers.DateTimeField()
    url = serializers.URLField(
        help_text="The one-time link. Only a hash of its token is stored: it is shown only now."
    )


class CredentialsSerializer(serializers.Serializer):
    """Username and password, checked through Django's backends (django-axes first)."""

    username = serializers.CharField(write_only=True)
    password = serializers.CharField(
        write_only=True, trim_whitespace=False, style={"input_type": "password"}
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        request = self.context["request"]
        user = authenticate(
            # Django's request, not DRF's: django-axes flags it for its middleware.
            request=request._request,
            username=attrs["username"],
            password=attrs["password"],
        )
        if user is None:
            raise serializers.ValidationError(
                "Unable to sign in with these credentials.", code="authorization"
            )
        return {"user": user}


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(
        help_text="Send it as `Authorization: Token <token>`. Shown only now: only a hash is kept."
    )
    expiry = serializers.DateTimeField(help_text="When the token stops working.")


class TokenInfoSerializer(serializers.ModelSerializer):
    key = serializers.CharField(
        source="token_key", help_text="The token's first characters: its public name."
    )
    current = serializers.SerializerMethodField(
        help_text="Whether this request authenticated with this token."
    )

    class Meta:
        model = AuthToken
        fields = ["key", "created", "expiry", "current"]

    def get_current(self, token: AuthToken) -> bool:
        return token == self.context["request"].auth
