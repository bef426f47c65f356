"""Reads of studies and roles, always scoped to what the user may see."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, F, Q, QuerySet

from apps.studies.models import Membership, Study


def studies_for_user(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Study]:
    """Studies in which ``user`` has any role."""
    if not user.is_authenticated:
        return Study.objects.none()
    return Study.objects.filter(memberships__user=user).distinct()


def studies_with_my_role(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Study]:
    """My studies in one query, each with ``my_role``, ``my_total`` and ``my_done`` (assignments)
    and its questions prefetched (the home page picks each question kind's page from them)."""
    if not user.is_authenticated:
        return Study.objects.none()
    mine = Q(assignments__annotator=user)
    return (
        Study.objects.filter(memberships__user=user)
        .annotate(
            my_role=F("memberships__role"),
            my_total=Count("assignments", filter=mine),
            my_done=Count("assignments", filter=mine & Q(assignments__completed_at__isnull=False)),
        )
        .prefetch_related("questions")
    )


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
