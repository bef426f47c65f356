"""Reads of studies and roles, always scoped to what the user may see."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Sequence
from functools import reduce
from operator import or_
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import ObjectDoesNotExist
from django.db.models import BooleanField, Count, ExpressionWrapper, F, Q, QuerySet

from apps.studies.kinds import question_kind, queue_kinds
from apps.studies.models import Membership, Question, Study
from apps.studies.scope import ITEM_KINDS, scope_filter, scope_matches
from core.compiled_queries import CompiledQuery
from core.types import Account, Visitor

if TYPE_CHECKING:
    from apps.items.models import Item


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
    return _with_role(user.pk)


def _with_role(user: int) -> QuerySet[Study]:
    return Study.objects.filter(memberships__user_id=user).annotate(role=F("memberships__role"))


def study_with_role(*, user: Visitor, pk: int | str) -> Study | None:
    """The study ``pk`` as :func:`studies_with_role` reads it (``None``: no role in it, or no
    such study), from SQL built once (:mod:`core.compiled_queries`): every page of a study
    reads it, and the ORM took 0.5 ms of CPU to build the query each time.

    ``pk`` may be the URL's string (a regular-expression route, the API's router): anything
    but ASCII digits names no study.
    """
    if isinstance(pk, str):
        if not (pk.isascii() and pk.isdigit()):
            return None
        pk = int(pk)
    if not user.is_authenticated:
        return None
    return _STUDY_WITH_ROLE.first(pk=pk, user=user.pk)


_STUDY_WITH_ROLE = CompiledQuery(lambda pk, user: _with_role(user).filter(pk=pk)[:1])


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


# ----------------------------------------------------------------- questions scoped to items


def question_item_filter(question: Question, *, prefix: str = "") -> Q:
    """The items ``question`` applies to, as a condition on ``Item`` (``prefix``: the path to
    the item from the model filtered, e.g. ``"item__"`` from an assignment).

    The one definition of a question's items (:mod:`apps.studies.scope`): the label queue,
    the comparison scheduler, the trace pages, recruited packages, progress and the editor's
    counts all filter with it. ``Q()`` for a question without a scope (every item).
    """
    return scope_filter(question.scope, prefix=prefix)


def question_items(question: Question) -> QuerySet[Item]:
    """The study's items ``question`` applies to, in queue order."""
    from apps.items.models import Item

    return Item.objects.filter(question_item_filter(question), study_id=question.study_id).order_by(
        "position", "id"
    )


def items_of_any(questions: Iterable[Question], *, prefix: str = "") -> Q:
    """Items at least one of ``questions`` applies to; ``Q()`` (every item) when one of them
    has no scope, and no item at all when ``questions`` is empty."""
    conditions = [question_item_filter(question, prefix=prefix) for question in questions]
    if not conditions:
        return Q(pk__in=[])
    if any(not condition for condition in conditions):
        return Q()
    return reduce(or_, conditions)


def question_covers(question: Question, item: Item) -> bool:
    """Whether ``question`` applies to ``item`` (no query: the test of
    :func:`question_item_filter` on the loaded item)."""
    return scope_matches(
        question.scope, kind=item.kind, metadata=item.metadata, external_id=item.external_id
    )


def covering_questions(questions: Sequence[Question], item: Item) -> list[Question]:
    """Those of ``questions`` that apply to ``item``, in their order."""
    return [question for question in questions if question_covers(question, item)]


CALIBRATION = "calibration"
"""What :func:`question_coverage` calls text items naming a known signal (``metadata
["signal"]``): the trace recorder's green calibration screens, not sentences."""


def question_coverage(question: Question) -> dict[str, int]:
    """How many of the study's items ``question`` applies to, in all and by item kind, text
    items with a known signal counted apart as ``calibration`` (``{"total": n, "text": n,
    "audio": n, "calibration": n, ...}``, kinds without items left out): the question editor
    shows it and warns when one question covers several kinds."""
    rows = (
        question_items(question)
        .order_by()
        .annotate(
            green=ExpressionWrapper(
                Q(kind="text", metadata__has_key="signal"), output_field=BooleanField()
            )
        )
        .values_list("kind", "green")
        .annotate(n=Count("id"))
    )
    counts: dict[str, int] = {}
    for kind, green, n in rows:
        name = CALIBRATION if green else kind
        counts[name] = counts.get(name, 0) + n
    order = [*ITEM_KINDS, CALIBRATION]
    return {"total": sum(counts.values())} | {k: counts[k] for k in order if k in counts}


def instructions_for(*, study: Study, questions: Sequence[Question]) -> str:
    """The instructions (Markdown) of a page that asks ``questions``: their own, in order,
    or the study's when none of them has any."""
    own = [question.instructions.strip() for question in questions if question.instructions]
    return "\n\n".join(own) if own else study.instructions


def coverage_mixed(counts: dict[str, int]) -> bool:
    """Whether a question's items (:func:`question_coverage`) are of several kinds, which is
    rarely meant: green calibration screens beside audio or video clips are the one mix taken
    as meant (a trace question calibrates on them)."""
    kinds = {kind for kind, n in counts.items() if kind != "total" and n}
    if kinds & {"audio", "video"}:
        kinds -= {CALIBRATION}
    return len(kinds) > 1


def questions_covering(*, study: Study) -> list[Question]:
    """The study's questions with their labels, each with ``coverage``
    (:func:`question_coverage`), ``mixed`` (:func:`coverage_mixed`) and ``scope_text`` (its
    scope in words) set, for the
    overview's list of questions (one query per question)."""
    from apps.studies.kinds import question_kind
    from apps.studies.scope import scope_text

    questions = list(study.questions.prefetch_related("labels"))
    for question in questions:
        question.coverage = question_coverage(question)  # type: ignore[attr-defined]
        question.mixed = coverage_mixed(question.coverage)  # type: ignore[attr-defined]
        problem = question_kind(question.kind).scope_problem(question)
        question.scope_problem = problem  # type: ignore[attr-defined]
        question.scope_text = scope_text(question.scope)  # type: ignore[attr-defined]
    return questions


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
