"""Reads of studies and roles, always scoped to what the user may see."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import Count, F, QuerySet

from apps.studies.kinds import question_kind, queue_kinds
from apps.studies.models import Membership, Question, Study
from core.types import Account, Visitor


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


def annotator_tasks(
    *, study: Study, annotator: Account, questions: Sequence[Question] | None = None
) -> list[dict[str, Any]]:
    """The annotator's tasks in a study: the queue once (all queue questions share it), then
    each question answered on its own page, each ``{"question", "queue", "progress"}`` with
    the progress its own page shows (:meth:`~apps.studies.kinds.QuestionKind.progress`): the
    one definition the home card, the study overview and the task pages share."""
    queued = set(queue_kinds())
    tasks: list[dict[str, Any]] = []
    for question in study.questions.all() if questions is None else questions:
        queue = question.kind in queued
        if queue and any(task["queue"] for task in tasks):
            continue
        progress = question_kind(question.kind).progress(question=question, annotator=annotator)
        tasks.append({"question": question, "queue": queue, "progress": progress})
    return tasks


def annotators_tasks(*, study: Study, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` of :func:`apps.annotations.selectors.study_progress` (one page of them), each
    with its annotator's ``tasks`` (:func:`annotator_tasks`): the overview's progress of every
    kind, counted as each task's page counts it. Costs a few queries per annotator and
    question, so callers pass one page of rows."""
    rows = list(rows)
    users = get_user_model().objects.in_bulk([row["annotator_id"] for row in rows])
    questions = list(study.questions.all())
    return [
        row
        | {
            "tasks": annotator_tasks(
                study=study, annotator=users[row["annotator_id"]], questions=questions
            )
        }
        for row in rows
    ]
