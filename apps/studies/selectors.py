"""Reads of studies and roles, always scoped to what the user may see."""

from __future__ import annotations

import copy
import threading
from typing import Any

from django.contrib.auth.models import Permission
from django.core.exceptions import ObjectDoesNotExist
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


# study id -> ((created_at, questions_version), the study's questions as loaded then); one
# entry per study. created_at tells a new study from a deleted one whose id was reused.
_QUESTIONS: dict[int, tuple[tuple[Any, int], list[Question]]] = {}
_QUESTIONS_LOCK = threading.Lock()
_QUESTIONS_MAX_STUDIES = 512


def study_questions_cached(*, study: Study) -> list[Question]:
    """The study's questions in order, with their labels (prefetched) and adaptive-overlap
    rule (selected): what an answer reads, from a per-process cache (no query when cached).

    The cache is keyed on ``study.questions_version``, which the database raises whenever a
    question, label or overlap rule of the study is written, and on ``study.created_at`` (a
    deleted study's id may be given to a new one)
    (:func:`apps.studies.services.study_questions_changed`), so ``study`` must be read in the
    same request (the answer paths read it with the assignment or with the user's role): a
    stale instance would read a stale version. Every call returns new question instances
    (their own ``study``, the caller's; their own rule) sharing the cached labels, which are
    read-only. Two queries on a miss.
    """
    version = (study.created_at, study.questions_version)
    with _QUESTIONS_LOCK:
        cached = _QUESTIONS.get(study.pk)
    if cached is None or cached[0] != version:
        loaded = list(
            Question.objects.filter(study_id=study.pk)
            .select_related("overlap_rule")
            .prefetch_related("labels")
        )
        cached = (version, loaded)
        with _QUESTIONS_LOCK:
            if len(_QUESTIONS) >= _QUESTIONS_MAX_STUDIES:
                _QUESTIONS.clear()
            _QUESTIONS[study.pk] = cached
    return [_question_copy(question, study=study) for question in cached[1]]


def _question_copy(question: Question, *, study: Study) -> Question:
    """A copy of a cached question whose relations the caller may load or set without
    touching the cached one (``copy.copy`` of a model copies its relation cache)."""
    fresh = copy.copy(question)
    fresh.study = study
    try:
        rule = question.overlap_rule
    except ObjectDoesNotExist:
        return fresh
    own_rule = copy.copy(rule)
    own_rule.question = fresh  # and fresh.overlap_rule is own_rule
    return fresh
