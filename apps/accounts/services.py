"""Accounts for annotators, invitations (no mail server needed) and API tokens."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from knox.models import AuthToken

from apps.accounts.models import Invitation
from apps.studies.models import Membership, Study
from apps.studies.selectors import study_creation_permission
from apps.studies.services import membership_add
from core.types import Account

INVALID_LINK = "This invitation link is unknown, used or expired."
REVOKED_LINK = "This invitation was revoked by the study's manager."
# What a manager is told after inviting a username, whether or not an account has it.
INVITED = (
    "Invitation saved. If an account has this username, it sees the invitation on its home "
    "page and joins the study when it accepts."
)


def invitation_token_hash(token: str) -> str:
    """The SHA-256 of an invitation link's token: what is stored, and kept in the session."""
    return hashlib.sha256(token.encode()).hexdigest()


def _user_create(*, username: str, password: str, email: str = "") -> Account:
    User = get_user_model()
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationError({"username": "That username is taken."})
    user = User(username=username, email=email)
    user.full_clean(exclude=["password"])
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise ValidationError({"password": exc.messages}) from exc
    user.set_password(password)
    user.save()
    return user


@transaction.atomic
def annotator_create(*, study: Study, username: str, password: str) -> Account:
    """Create an annotator account and add it to ``study``."""
    user = _user_create(username=username, password=password)
    membership_add(study=study, user=user, role=Membership.Role.ANNOTATOR)
    return user


@transaction.atomic
def invitation_create(
    *,
    study: Study,
    created_by: Account,
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
        token_hash=invitation_token_hash(token),
        created_by=created_by,
        expires_at=timezone.now() + timedelta(days=valid_days),
    )
    return invitation, token


@transaction.atomic
def invitation_address(
    *,
    study: Study,
    created_by: Account,
    username: str,
    role: str = Membership.Role.ANNOTATOR,
    valid_days: int = 14,
) -> Invitation:
    """Invite the account named ``username``: it joins ``study`` only if it accepts.

    The account sees the invitation on its home page. The invitation is stored whether or not
    an active account has that username (``invitee`` stays empty if none has, and it expires
    unused), so the result tells the caller nothing about which usernames exist. A member
    already seen on the study's member list is refused; an open invitation of the same
    username to the same role is returned rather than repeated.
    """
    if role not in Membership.Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}."})
    invitee = get_user_model().objects.filter(username=username, is_active=True).first()
    member = study.memberships.filter(user=invitee).first() if invitee else None
    if member is not None:
        raise ValidationError(
            {"username": f"{username} is already a {member.get_role_display().lower()} here."}
        )
    pending = study.invitations.filter(
        invitee_username=username,
        role=role,
        used_at__isnull=True,
        revoked_at__isnull=True,
        expires_at__gt=timezone.now(),
    ).first()
    if pending is not None:
        return pending
    return Invitation.objects.create(
        study=study,
        role=role,
        invitee_username=username,
        invitee=invitee,
        created_by=created_by,
        expires_at=timezone.now() + timedelta(days=valid_days),
    )


def invitation_lookup(*, token_hash: str) -> Invitation:
    """The usable link invitation whose token hashes to ``token_hash``.

    Raises ``ValidationError`` if it is unknown, used or expired.
    """
    invitation = (
        Invitation.objects.select_related("study").filter(token_hash=token_hash).first()
        if token_hash
        else None
    )
    if invitation is not None and invitation.revoked_at is not None:
        raise ValidationError(REVOKED_LINK, code="revoked")
    if invitation is None or not invitation.is_usable:
        raise ValidationError(INVALID_LINK)
    return invitation


@transaction.atomic
def invitation_revoke(*, study: Study, invitation_id: int, by: Account) -> Invitation:
    """Withdraw a pending invitation of ``study``: its link and its home-page entry stop working.

    Revoking twice changes nothing; a used invitation cannot be revoked (remove the member
    instead). Raises ``ValidationError`` then, or when the invitation is not the study's.
    """
    invitation = (
        Invitation.objects.select_for_update().filter(pk=invitation_id, study=study).first()
    )
    if invitation is None:
        raise ValidationError("This study has no such invitation.")
    if invitation.used_at is not None:
        raise ValidationError("This invitation was used already: remove the member instead.")
    if invitation.revoked_at is None:
        invitation.revoked_at = timezone.now()
        invitation.revoked_by = by
        invitation.save(update_fields=["revoked_at", "revoked_by"])
    return invitation


def _invitation_use(*, invitation: Invitation, user: Account) -> None:
    """Make ``user`` a member in the invitation's role and mark it used (caller holds its lock)."""
    membership_add(study=invitation.study, user=user, role=invitation.role)
    invitation.used_at = timezone.now()
    invitation.used_by = user
    invitation.save(update_fields=["used_at", "used_by"])


@transaction.atomic
def invitation_accept(
    *,
    token_hash: str,
    user: Account | None = None,
    username: str = "",
    password: str = "",
) -> Account:
    """Use a link invitation once: join as ``user``, or create the account named by the form."""
    pk = invitation_lookup(token_hash=token_hash).pk
    invitation = Invitation.objects.select_for_update().select_related("study").get(pk=pk)
    if not invitation.is_usable:  # lost a race with another acceptance
        raise ValidationError(INVALID_LINK)
    if user is None:
        user = _user_create(username=username, password=password)
    _invitation_use(invitation=invitation, user=user)
    return user


@transaction.atomic
def invitation_join(*, invitation_id: int, user: Account) -> Invitation:
    """The invitee accepts an invitation addressed to them and becomes a member now."""
    invitation = (
        Invitation.objects.select_for_update()
        .select_related("study")
        .filter(pk=invitation_id, invitee=user)
        .first()
    )
    if invitation is None or not invitation.is_usable:
        raise ValidationError("This invitation is not yours, was used or has expired.")
    _invitation_use(invitation=invitation, user=user)
    return invitation


@transaction.atomic
def api_tokens_revoke(*, user: Account, keys: list[str] | None = None) -> int:
    """Revoke the user's API tokens whose public key is in ``keys`` (all if ``None``).

    Returns how many were revoked. A key of another user's token revokes nothing.
    """
    tokens = AuthToken.objects.filter(user=user)
    if keys is not None:
        tokens = tokens.filter(token_key__in=keys)
    deleted, _ = tokens.delete()
    return deleted


def api_tokens_sweep_expired(*, user: Account) -> int:
    """Delete the user's expired API tokens (requests only check the token they present:
    :mod:`apps.accounts.authentication`); returns how many were deleted."""
    deleted, _ = AuthToken.objects.filter(user=user, expiry__lt=timezone.now()).delete()
    return deleted


@transaction.atomic
def manager_create(*, username: str, password: str, email: str = "") -> Account:
    """Create an account that may create studies: the first manager of a new installation.

    Raises ``ValidationError`` (by field) for a taken username, a bad e-mail address or a
    password the validators refuse; nothing is created then.
    """
    user = _user_create(username=username, password=password, email=email)
    user.user_permissions.add(study_creation_permission())
    return user
