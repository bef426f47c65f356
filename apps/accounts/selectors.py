"""Reads of the accounts app: a user's API tokens and the invitations waiting for them."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.utils import timezone
from knox.models import AuthToken

from apps.accounts.models import Invitation
from core.types import Account


def api_tokens_for(*, user: Account) -> QuerySet[AuthToken]:
    """The user's API tokens that still work (not expired), newest first."""
    return AuthToken.objects.filter(
        Q(expiry__isnull=True) | Q(expiry__gt=timezone.now()), user=user
    ).order_by("-created")


def invitations_for(*, user: Account) -> QuerySet[Invitation]:
    """Open invitations addressed to the user by a study's manager, newest first."""
    return Invitation.objects.filter(
        invitee=user, used_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
    ).select_related("study", "created_by")
