"""Reads of studies and roles, always scoped to what the user may see."""

from __future__ import annotations

from django.contrib.auth.models import Permission
from django.db.models import Count, F, QuerySet

from apps.studies.models import Membership, Question, Study
from core.types import Visitor


def studies_for_user(*, user: Visitor) -> QuerySet[Study]:
    """Studies in which ``user`` has any role."""
    if not user.is_authenticated:
        return Study.objects.none()
    return Study.objects.filter(memberships__user=user).distinct()


def studies_with_role(*, user: Visitor) -> QuerySet[Study]:
    """The user's studies, each annotated with ``role``: the user's role in it.

    One join: a user has one membership per study (``one_role_per_study_and_user``), so the
    join yields each study once, without ``DISTINCT`` or a subquery per row.
    """
    if not user.is_authenticated:
        return Study.objects.none()
    return Study.objects.filter(memberships__user=user).annotate(role=F("memberships__role"))


def studies_with_my_role(*, user: Visitor) -> QuerySet[Study]:
    """My studies in one query, each with ``my_role`` and its questions prefetched (the home
    page lists a task and its progress per question kind's page from them)."""
    if not user.is_authenticated:
        return Study.objects.none()
    return (
        Study.objects.filter(memberships__user=user)
        .annotate(my_role=F("memberships__role"))
        .prefetch_related("questions")
    )


def studies_managed_by(*, user: Visitor) -> QuerySet[Study]:
    if not user.is_authenticated:
        return Study.objects.none()
    return Study.objects.filter(
        memberships__user=user, memberships__role=Membership.Role.MANAGER
    ).distinct()


def study_role(*, user: Visitor, study: Study) -> str | None:
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


def can_create_studies(*, user: Visitor) -> bool:
    return user.is_authenticated and user.has_perm("studies.manage_studies")


def study_creation_permission() -> Permission:
    """The permission that lets its holders create studies (and so manage them)."""
    return Permission.objects.get(codename="manage_studies", content_type__app_label="studies")


def label_answer_counts(*, question: Question) -> dict[str, int]:
    """How many answer revisions use each label of ``question``, by label key (used ones)."""
    from apps.annotations.models import Revision

    used = (
        Revision.objects.filter(label__question=question)
        .values_list("label__key")
        .annotate(n=Count("id"))
    )
    return dict(used)
