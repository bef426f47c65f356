"""Serializers of invitation links."""

from __future__ import annotations

from rest_framework import serializers

from apps.studies.models import Membership


class InvitationCreateSerializer(serializers.Serializer):
    role = serializers.ChoiceField(
        choices=Membership.Role.choices, default=Membership.Role.ANNOTATOR
    )
    valid_days = serializers.IntegerField(min_value=1, max_value=90, default=14)


class InvitationLinkSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    role = serializers.ChoiceField(choices=Membership.Role.choices)
    expires_at = serializers.DateTimeField()
    url = serializers.URLField(
        help_text="The one-time link. Only a hash of its token is stored: it is shown only now."
    )
