"""Accounts for annotators and one-time invitation links (no mail server needed)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import Invitation
from apps.studies.models import Membership, Study
from apps.studies.services import membership_add


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _user_create(*, username: str, password: str) -> AbstractBaseUser:
    User = get_user_model()
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationError({"username": "That username is taken."})
    user = User(username=username)
    user.full_clean(exclude=["password"])
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise ValidationError({"password": exc.messages}) from exc
    user.set_password(password)
    user.save()
    return user


@transaction.atomic
def annotator_create(*, study: Study, username: str, password: str) -> AbstractBaseUser:
    """Create an annotator account and add it to ``study``."""
    user = _user_create(username=username, password=password)
    membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    return user


@transaction.atomic
def invitation_create(
    *,
    study: Study,
    created_by: AbstractBaseUser,
    role: str = Membership.Role.ANNOTATOR,
    valid_days: int = 14,
) -> tuple[Invitation, str]:
    """Make a one-time link; returns the invitation and the secret token (shown only now)."""
    if role not in Membership.Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}."})
    token = secrets.token_urlsafe(24)
    invitation = Invitation.objects.create(
        study=study,
        role=role,
        token_hash=_token_hash(token),
        created_by=created_by,
        expires_at=timezone.now() + timedelta(days=valid_days),
    )
    return invitation, token


def invitation_lookup(*, token: str) -> Invitation:
    """The usable invitation behind ``token``; ``ValidationError`` if unknown, used or expired."""
    invitation = (
        Invitation.objects.select_related("study").filter(token_hash=_token_hash(token)).first()
    )
    if invitation is None or not invitation.is_usable:
        raise ValidationError("This invitation link is unknown, used or expired.")
    return invitation


@transaction.atomic
def invitation_accept(
    *, token: str, user: AbstractBaseUser | None = None, username: str = "", password: str = ""
) -> AbstractBaseUser:
    """Use an invitation once: join as ``user``, or create the account named by the form."""
    invitation = Invitation.objects.select_for_update().get(pk=invitation_lookup(token=token).pk)
    if not invitation.is_usable:  # lost a race with another acceptance
        raise ValidationError("This invitation link is unknown, used or expired.")
    if user is None:
        user = _user_create(username=username, password=password)
    membership_add(study=invitation.study, user=user, role=invitation.role)
    invitation.used_at = timezone.now()
    invitation.used_by = user
    invitation.save(update_fields=["used_at", "used_by"])
    return user
