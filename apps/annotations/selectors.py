"""Reads of queues, progress and current annotations."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import BooleanField, Count, Prefetch, Q, QuerySet
from django.db.models.expressions import RawSQL

from apps.annotations.models import Annotation, AnnotatorProgress, Assignment, Revision
from apps.items.models import Item
from apps.studies.kinds import queue_kinds
from apps.studies.models import Label, Membership, Question, Study
from apps.studies.selectors import covering_questions, items_of_any, study_questions_cached
from core.compiled_queries import CompiledQuery
from core.types import Account

QUEUE_QUESTIONS = "_queue_questions"
"""Where a study object keeps its queue questions once read in a request (an answer's
completion check reads them; the next item, in the same request, reuses them)."""


def queue_questions_of(*, study: Study) -> list[Question]:
    """The study's questions answered in the label queue, in order (one query, none when
    this study object has them already)."""
    known = getattr(study, QUEUE_QUESTIONS, None)
    return list(study.questions.filter(kind__in=queue_kinds())) if known is None else known


def queue_questions_cached(*, study: Study) -> list[Question]:
    """:func:`queue_questions_of` from the per-process cache
    (:func:`apps.studies.selectors.study_questions_cached`: ``study`` must have been read in
    this request), kept on ``study`` for the queue's reads that follow (none when this study
    object has them already)."""
    known = getattr(study, QUEUE_QUESTIONS, None)
    if known is not None:
        return known
    kinds = set(queue_kinds())
    queued = [q for q in study_questions_cached(study=study) if q.kind in kinds]
    setattr(study, QUEUE_QUESTIONS, queued)
    return queued


def queue_item_filter(
    *, study: Study, questions: list[Question] | None = None, prefix: str = "item__"
) -> Q:
    """The assignments (``prefix``: the path to their item) that belong in the label queue:
    those of items at least one queue question applies to (``questions``: the study's queue
    questions, if the caller has them). An item no queue question covers (a clip only traced)
    is not shown in the queue. ``Q()`` when every item is in it: a queue question without a
    scope, or a study without queue questions (its assignments are its traces' or rankings')."""
    if questions is None:
        questions = queue_questions_of(study=study)
    return items_of_any(questions, prefix=prefix) if questions else Q()


def assignments_to_answer() -> QuerySet[Assignment]:
    """Assignments with everything :func:`apps.annotations.services.assignment_check_annotator`
    reads, in the same query: the study with its recruitment, the annotator with their
    participation, and ``annotating``, whether the annotator still annotates the study.

    ``annotating`` is the same ``EXISTS`` as ``Exists(Membership.objects.filter(study=
    OuterRef("study_id"), user=OuterRef("annotator_id"), role=ANNOTATOR))`` written as SQL:
    Django takes 0.35 ms of CPU to build that subquery on every answer, this 0.05 ms."""
    return Assignment.objects.select_related(
        "study__recruitment", "annotator__participation", "item"
    ).annotate(annotating=RawSQL(_annotating_sql(), (Membership.Role.ANNOTATOR,), BooleanField()))


def assignment_to_answer(*, pk: int, annotator: int, study: int | None = None) -> Assignment | None:
    """The annotator's assignment ``pk`` (in the study, if given) as
    :func:`assignments_to_answer` reads it (``None``: not theirs, or none), from SQL built
    once (:mod:`core.compiled_queries`)."""
    ids = {"pk": pk, "annotator": annotator} | ({} if study is None else {"study": study})
    return _ASSIGNMENT_TO_ANSWER.first(**ids)


def _columns(model: type[Any], prefix: str = "") -> dict[str, str]:
    """The model's quoted column names by field name (``prefix``: a table or alias and its
    dot before each), for the SQL this module writes once."""
    qn = connection.ops.quote_name
    return {f.name: f"{prefix}{qn(str(f.column))}" for f in model._meta.concrete_fields}


@cache
def _annotating_sql() -> str:
    """``EXISTS`` (a membership as annotator of the assignment's study) in SQL, the table and
    column names taken from the models. It names the assignment table itself: the queryset
    is read on its own, never as a subquery (which would alias the table)."""
    qn = connection.ops.quote_name
    column = _columns(Membership)
    outer = _columns(Assignment, prefix=f"{qn(Assignment._meta.db_table)}.")
    return (
        f"EXISTS (SELECT 1 FROM {qn(Membership._meta.db_table)} WHERE {column['study']} = "
        f"{outer['study']} AND {column['user']} = {outer['annotator']} AND "
        f"{column['role']} = %s)"
    )


_ASSIGNMENT_TO_ANSWER = CompiledQuery(
    lambda pk, annotator, study=None: assignments_to_answer().filter(
        pk=pk, annotator_id=annotator, **({} if study is None else {"study_id": study})
    )
)


def assignment_next(
    *, annotator: Account, study: Study, questions: list[Question] | None = None
) -> Assignment | None:
    """The annotator's next unfinished assignment in the label queue (:func:`queue_item_filter`;
    ``questions``: the study's queue questions, if the caller has them), with its item:
    unskipped first, then the extra items of adaptive overlap, then in queue order (the order
    of the index ``assignment_open_queue_idx``, whose first entry it is)."""
    in_queue = queue_item_filter(study=study, questions=questions)
    if not in_queue:  # no scope: the query's shape is always the same
        return _NEXT_IN_QUEUE.first(study=study.pk, annotator=annotator.pk)
    return _open_in_queue_order(study.pk, annotator.pk, in_queue).first()


def _open_in_queue_order(study: int, annotator: int, in_queue: Q) -> QuerySet[Assignment]:
    return (
        Assignment.objects.filter(
            in_queue, study_id=study, annotator_id=annotator, completed_at__isnull=True
        )
        .select_related("item")
        .order_by("skip_count", "-extra", "position", "round", "id")
    )


_NEXT_IN_QUEUE = CompiledQuery(
    lambda study, annotator: _open_in_queue_order(study, annotator, Q())[:1]
)


def queue_entry(
    *,
    annotator: Account,
    study: Study,
    assignment: Assignment | None,
    questions: list[Question] | None = None,
) -> dict[str, Any] | None:
    """``{"assignment": assignment, "questions": keys, "progress": ...}``: an assignment to
    work on, the keys of the queue questions to answer about its item (those whose scope
    covers it) and the annotator's progress (one query), or ``None`` for no assignment."""
    if assignment is None:
        return None
    if questions is None:
        questions = queue_questions_of(study=study)
    progress = annotator_progress(annotator=annotator, study=study, questions=questions)
    asked = [question.key for question in covering_questions(questions, assignment.item)]
    return {"assignment": assignment, "questions": asked, "progress": progress}


def queue_next(*, annotator: Account, study: Study) -> dict[str, Any] | None:
    """:func:`queue_entry` of the annotator's next assignment (with its item): two queries
    (the assignment, the progress); the queue questions, whose scopes choose the items, are
    the study object's or the per-process cache's (``study`` read in this request)."""
    questions = queue_questions_cached(study=study)
    assignment = assignment_next(annotator=annotator, study=study, questions=questions)
    return queue_entry(annotator=annotator, study=study, assignment=assignment, questions=questions)


@dataclass(frozen=True)
class AnswerShown:
    """An answered item as the undo names it: "‘Positive’ on item 12"."""

    assignment_id: int
    item: str
    labels: list[str]

    def __str__(self) -> str:
        return f"{', '.join(f'‘{name}’' for name in self.labels)} on item {self.item}"


def answer_shown(*, assignment: Assignment) -> AnswerShown | None:
    """The assignment's latest labels, the retracted ones included (``None`` if never answered).

    For an answered item these are its current labels; for an item reopened by an undo, the
    labels the undo retracted. One query (see :func:`_answers_shown`), and one for the item's
    external id unless the assignment comes with its item.
    """
    return _answers_shown(
        annotator_id=assignment.annotator_id,
        study_id=assignment.study_id,
        of=[Shown.of(assignment)],
    ).get(assignment.pk)


def queue_answers_shown(
    *,
    annotator: Account,
    study: Study,
    shown: Assignment | None,
    questions: list[Question] | None = None,
) -> tuple[AnswerShown | None, AnswerShown | None]:
    """``(undo, earlier)`` for the queue page, in two queries (``shown`` comes with its item).

    ``undo`` is what the annotator's next undo retracts: :func:`answer_shown` of their latest
    answered item (``None``: nothing to undo); each undo reopens that item, so the one after
    goes a step further back. ``earlier`` is :func:`answer_shown` of ``shown``, the unfinished
    item on the page: the labels an undo retracted from it (``None`` if never answered).
    """
    in_queue = queue_item_filter(study=study, questions=questions)
    if not in_queue:  # no scope: the query's shape is always the same
        answered = _LATEST_ANSWERED.first(study=study.pk, annotator=annotator.pk)
    else:
        answered = _latest_answered(study.pk, annotator.pk, in_queue).first()
    of = [Shown.of(answered)] if answered else []
    if shown is not None:
        of.append(Shown.of(shown))
    answers = _answers_shown(annotator_id=annotator.pk, study_id=study.pk, of=of)
    return (
        answers.get(answered.pk) if answered else None,
        answers.get(shown.pk) if shown is not None else None,
    )


class Shown(NamedTuple):
    """An assignment whose labels a page names."""

    assignment_id: int
    item_id: int
    round: int
    item: str  # the item's external id

    @classmethod
    def of(cls, assignment: Assignment) -> Shown:
        """The assignment's (its item read, unless it came with it)."""
        return cls(assignment.pk, assignment.item_id, assignment.round, assignment.item.external_id)


def _answers_shown(*, annotator_id: int, study_id: int, of: list[Shown]) -> dict[int, AnswerShown]:
    """:class:`AnswerShown` of the annotator's assignments ``of`` that have labels, by
    assignment id, in one query.

    A revision belongs to the assignment of its annotation's item, annotator and round; per
    annotation the latest revision with a label counts, in question order. The query is SQL
    written once (:func:`_labels_sql`): the ORM's join of the revisions to the assignments
    through their item took 1.5 ms of CPU to build on each page answer, and PostgreSQL 1.2 ms to
    plan.
    """
    if not of:
        return {}
    by_key = {(entry.item_id, entry.round): entry for entry in of}
    items = sorted({entry.item_id for entry in of})
    with connection.cursor() as cursor:
        cursor.execute(_labels_sql(len(items)), [annotator_id, study_id, *items])
        rows = cursor.fetchall()
    labels: dict[int, dict[int, str]] = defaultdict(dict)
    for item_id, round_, annotation_id, name in rows:
        if (entry := by_key.get((item_id, round_))) is not None:
            labels[entry.assignment_id].setdefault(annotation_id, name)
    return {
        entry.assignment_id: AnswerShown(
            assignment_id=entry.assignment_id,
            item=entry.item,
            labels=list(labels[entry.assignment_id].values()),
        )
        for entry in of
        if labels.get(entry.assignment_id)
    }


@cache
def _labels_sql(n_items: int) -> str:
    """The labelled revisions of one annotator's annotations of ``n_items`` items in a study:
    ``(item_id, round, annotation_id, label name)``, in question order, the latest revision of
    each annotation first (parameters: annotator, study, the items)."""
    qn = connection.ops.quote_name
    rev, ann = _columns(Revision, prefix="r."), _columns(Annotation, prefix="a.")
    que, lab = _columns(Question, prefix="q."), _columns(Label, prefix="l.")
    table = {m: qn(m._meta.db_table) for m in (Revision, Annotation, Question, Label)}
    return (
        f"SELECT {ann['item']}, {ann['round']}, {ann['id']}, {lab['name']} "
        f"FROM {table[Revision]} r "
        f"JOIN {table[Annotation]} a ON {ann['id']} = {rev['annotation']} "
        f"JOIN {table[Question]} q ON {que['id']} = {ann['question']} "
        f"JOIN {table[Label]} l ON {lab['id']} = {rev['label']} "
        f"WHERE {ann['annotator']} = %s AND {que['study']} = %s "
        f"AND {ann['item']} IN ({', '.join(['%s'] * n_items)}) "
        f"ORDER BY {que['position']}, {ann['id']}, {rev['number']} DESC"
    )


def answered_latest_first(
    *, annotator: Account, study: Study, questions: list[Question] | None = None
) -> QuerySet[Assignment]:
    """The annotator's answered items of the label queue (:func:`queue_item_filter`), the
    latest answer first: the order undos take (a clip finished on the trace page is not
    undone from the queue)."""
    in_queue = queue_item_filter(study=study, questions=questions)
    return _answered_latest_first(study.pk, annotator.pk, in_queue)


def _answered_latest_first(study: int, annotator: int, in_queue: Q) -> QuerySet[Assignment]:
    return Assignment.objects.filter(
        in_queue, study_id=study, annotator_id=annotator, completed_at__isnull=False
    ).order_by("-completed_at", "-id")


def _latest_answered(study: int, annotator: int, in_queue: Q) -> QuerySet[Assignment]:
    """The latest answered assignment first, with what :class:`Shown` reads of it."""
    return (
        _answered_latest_first(study, annotator, in_queue)
        .select_related("item")
        .only("item_id", "round", "item__external_id")
    )


#: :func:`_latest_answered` of an unscoped queue (the ORM took 0.8 ms of CPU to build this
#: read on each page answer).
_LATEST_ANSWERED = CompiledQuery(
    lambda study, annotator: _latest_answered(study, annotator, Q())[:1]
)


def annotator_progress(
    *, annotator: Account, study: Study, questions: list[Question] | None = None
) -> dict[str, int]:
    """``{"done": n, "total": n, "percent": p}`` for one annotator's label queue (the items
    :func:`queue_item_filter` keeps).

    Without a scope to apply, one row: the counters the database keeps on every write of an
    assignment (:class:`~apps.annotations.models.AnnotatorProgress`), read in SQL written
    once (the ORM took 0.3 ms of CPU to build a read on the answer's hot path). A queue
    narrowed by question scopes counts its assignments of the covered items.
    """
    in_queue = queue_item_filter(study=study, questions=questions)
    if not in_queue:  # every assignment of the annotator is in the queue
        with connection.cursor() as cursor:
            cursor.execute(_progress_sql(), [study.pk, annotator.pk])
            total, done = cursor.fetchone() or (0, 0)
    else:
        counts = Assignment.objects.filter(in_queue, study=study, annotator=annotator).aggregate(
            total=Count("id"), done=Count("id", filter=Q(completed_at__isnull=False))
        )
        total, done = counts["total"], counts["done"]
    return {"done": done, "total": total, "percent": round(100 * done / total) if total else 0}


@cache
def _progress_sql() -> str:
    column = _columns(AnnotatorProgress)
    return (
        f"SELECT {column['total']}, {column['done']} "
        f"FROM {connection.ops.quote_name(AnnotatorProgress._meta.db_table)} "
        f"WHERE {column['study']} = %s AND {column['annotator']} = %s"
    )


def study_has_answers(*, study: Study) -> bool:
    """Whether anyone answered a queue or trace question of the study (what the downloads
    of the overview hold)."""
    return Annotation.objects.filter(question__study=study).exists()


def study_progress(*, study: Study) -> QuerySet:
    """Per annotator: username, assigned, done, repeats and median-free mean time spent."""
    return (
        Assignment.objects.filter(study=study)
        .values("annotator_id", "annotator__username")
        .annotate(
            total=Count("id"),
            done=Count("id", filter=Q(completed_at__isnull=False)),
            repeats=Count("id", filter=Q(round=2)),
            skipped=Count("id", filter=Q(skip_count__gt=0, completed_at__isnull=True)),
        )
        .order_by("annotator__username")
    )


def item_coverage(*, study: Study) -> QuerySet:
    """Per item: assigned annotators and finished first-round assignments."""
    return study.items.annotate(
        assigned=Count("assignments", filter=Q(assignments__round=1), distinct=True),
        done=Count(
            "assignments",
            filter=Q(assignments__round=1, assignments__completed_at__isnull=False),
            distinct=True,
        ),
    ).order_by("position", "id")


def current_annotations(*, study: Study) -> QuerySet[Annotation]:
    """Live annotations (latest revision not a retraction) of a study, for export and analytics."""
    return (
        Annotation.objects.filter(question__study=study, current_revision__value__isnull=False)
        .select_related("question", "item", "annotator", "current_revision")
        .order_by("id")
    )


def revisions_of_study(*, study: Study) -> QuerySet[Revision]:
    """Every revision ever made in a study (the full audit history), oldest first."""
    return (
        Revision.objects.filter(annotation__question__study=study)
        .select_related("annotation__question", "annotation__item", "annotation__annotator")
        .order_by("annotation_id", "number")
    )


def item_history(*, item: Item) -> QuerySet[Annotation]:
    """Every annotation of an item (all questions, annotators and rounds) with its whole
    revision history, oldest revision first: what a manager reads to settle a disagreement."""
    return (
        Annotation.objects.filter(item=item)
        .select_related("question", "annotator", "current_revision")
        .prefetch_related(
            Prefetch(
                "revisions", queryset=Revision.objects.select_related("label").order_by("number")
            )
        )
        .order_by("question__position", "question_id", "annotator__username", "round")
    )
