"""Reads of studies and roles, always scoped to what the user may see."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from apps.studies.models import Membership, Study


def studies_for_user(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Study]:
    """Studies in which ``user`` has any role."""
    if not user.is_authenticated:
        return Study.objects.none()
    return Study.objects.filter(memberships__user=user).distinct()


def studies_managed_by(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Study]:
    if not user.is_authenticated:
        return Study.objects.none()
    return Study.objects.filter(
        memberships__user=user, memberships__role=Membership.Role.MANAGER
    ).distinct()


def study_role(*, user: AbstractBaseUser | AnonymousUser, study: Study) -> str | None:
    """The user's role in the study (``"manager"``, ``"annotator"``) or ``None``."""
    if not user.is_authenticated:
        return None
    return Membership.objects.filter(study=study, user=user).values_list("role", flat=True).first()


def study_annotators(*, study: Study) -> QuerySet:
    from django.contrib.auth import get_user_model

    return (
        get_user_model()
        .objects.filter(memberships__study=study, memberships__role=Membership.Role.ANNOTATOR)
        .order_by("username")
    )


def can_create_studies(*, user: AbstractBaseUser | AnonymousUser) -> bool:
    return user.is_authenticated and user.has_perm("studies.manage_studies")
