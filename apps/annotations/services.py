"""Every write to assignments and annotations: fill queues, submit, skip, undo.

Annotations are append-only: each submission appends a :class:`Revision`; a client-generated
idempotency key makes retries, double clicks and second tabs harmless.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction
from django.db.models import Count, Exists, F, Max, OuterRef, Q
from django.utils import timezone
from numpy.typing import ArrayLike, NDArray

from analytics.pipeline import quality_schedule
from analytics.selectors import excluded_annotator_ids
from apps.adjudication.models import OverlapRule
from apps.adjudication.selectors import flagged_annotator_ids, overlap_rule, rule_readings
from apps.annotations.models import Annotation, AnnotatorProgress, Assignment, Revision
from apps.annotations.ordering import queue_order_follow
from apps.annotations.selectors import (
    QUEUE_QUESTIONS,
    answered_latest_first,
    assignments_to_answer,
    queue_questions_cached,
)
from apps.annotations.values import clean_value
from apps.models_registry.models import Suggestion
from apps.recruitment.access import participant_check_answering
from apps.studies.kinds import queue_kinds
from apps.studies.models import Label, Membership, Question, Study
from apps.studies.selectors import (
    covering_questions,
    items_of_any,
    question_covers,
    study_annotators,
)
from core.limits import time_spent_check
from core.locking import locked_get_or_create
from core.row_updates import rows_update
from core.types import Account


def _choose_annotators(
    *, n_annotators: int, k: int | list[int], existing: list[set[int]], seed: int
) -> list[list[int]]:
    """Pick, per item, the annotators still needed so loads stay even and pairs share items
    (``k`` annotators per item, or ``k[i]`` for item ``i``).

    Greedy: each pick takes the annotator with the lowest load, ties broken by the fewest items
    already shared with the annotators chosen for this item, then by a seeded random jitter.
    """
    rng = np.random.default_rng(seed)
    load = np.zeros(n_annotators)
    shared = np.zeros((n_annotators, n_annotators))
    for taken in existing:
        idx = list(taken)
        load[idx] += 1
        shared[np.ix_(idx, idx)] += 1
    picks: list[list[int]] = []
    big = len(existing) * n_annotators + 1.0
    wanted = k if isinstance(k, list) else [k] * len(existing)
    for chosen_set, k_item in zip(existing, wanted, strict=True):
        chosen = list(chosen_set)
        new: list[int] = []
        for _ in range(max(0, min(k_item, n_annotators) - len(chosen))):
            score = load * big + shared[chosen].sum(axis=0) + rng.random(n_annotators) * 0.5
            score[chosen] = np.inf
            pick = int(np.argmin(score))
            load[pick] += 1
            shared[pick, chosen] += 1
            shared[chosen, pick] += 1
            chosen.append(pick)
            new.append(pick)
        picks.append(new)
    return picks


@transaction.atomic
def assignments_fill(*, study: Study, overlap_for: Mapping[int, int] | None = None) -> int:
    """Give every item its ``k`` annotators (all when ``overlap`` is empty), plus repeats;
    ``overlap_for`` raises the ``k`` of some items (item id -> k; predicted-hard items).

    Existing assignments are kept; only missing ones are added, so this is safe to call again
    after items or annotators are added. Each annotator's queue follows the study's item order,
    so annotators share finished items early. A share ``repeat_rate`` of each annotator's new
    items is queued again as round 2, a quarter of the study later, for test-retest agreement.
    Returns the number of assignments created.
    """
    Study.objects.select_for_update().filter(pk=study.pk).first()  # one fill at a time
    # Recruited participants (apps.recruitment) get work packages of their own, not a fill.
    annotators = study_annotators(study=study).exclude(participation__study=study)
    annotator_ids = list(annotators.values_list("id", flat=True))
    if not annotator_ids:
        return 0
    index = {user_id: i for i, user_id in enumerate(annotator_ids)}
    questions = list(study.questions.all())
    # only items some question applies to (an item no question is scoped to is nobody's work)
    asked = items_of_any(questions) if questions else Q()
    items = list(study.items.filter(asked).order_by("position", "id").values_list("id", flat=True))
    existing: dict[int, set[int]] = {item_id: set() for item_id in items}
    for item_id, user_id in Assignment.objects.filter(study=study, round=1).values_list(
        "item_id", "annotator_id"
    ):
        if user_id in index and item_id in existing:  # (an item a narrowed scope left out)
            existing[item_id].add(index[user_id])
    k = min(study.overlap or len(annotator_ids), len(annotator_ids))
    raised = overlap_for or {}
    picks = _choose_annotators(
        n_annotators=len(annotator_ids),
        k=[max(k, raised.get(item_id, k)) for item_id in items],
        existing=[existing[item_id] for item_id in items],
        seed=study.pk,
    )
    new = [
        Assignment(study=study, item_id=item_id, annotator_id=annotator_ids[a], position=pos)
        for pos, (item_id, chosen) in enumerate(zip(items, picks, strict=True))
        for a in chosen
    ]
    if study.repeat_rate > 0:
        new += _repeats(study=study, new=new, gap=max(5, len(items) // 4))
    Assignment.objects.bulk_create(new, batch_size=2000, ignore_conflicts=True)
    if new:  # at their natural places: an active order places them after the commit
        queue_order_follow(study_id=study.pk)
    return len(new)


def repeats_expected(*, study: Study, items: int) -> int:
    """How many of ``items`` new items one annotator is shown again (round 2): the repeat
    rate's share, rounded, at most ``STUDY_MAX_REPEATS`` (the number the study form states)."""
    return min(round(study.repeat_rate * items), settings.STUDY_MAX_REPEATS)


def _repeats(*, study: Study, new: list[Assignment], gap: int) -> list[Assignment]:
    """Round-2 copies of ``new``: per annotator exactly :func:`repeats_expected` of their new
    items, drawn at random (seeded), ``gap`` places later; never an item whose stimulus lasts
    longer than ``REPEAT_MAX_SECONDS`` (a 266 s trace was asked twice). Drawing each
    assignment with the rate's probability gave one annotator 6 repeats of an expected 4."""
    too_long = _long_item_ids(study=study, seconds=settings.REPEAT_MAX_SECONDS)
    rng = random.Random(f"repeat-{study.pk}")
    by_annotator: dict[int, list[Assignment]] = {}
    for assignment in new:
        by_annotator.setdefault(assignment.annotator_id, []).append(assignment)
    repeats = []
    for own in by_annotator.values():
        count = repeats_expected(study=study, items=len(own))
        eligible = [a for a in own if a.item_id not in too_long]
        for a in rng.sample(eligible, min(count, len(eligible))):
            repeats.append(
                Assignment(
                    study=study,
                    item_id=a.item_id,
                    annotator_id=a.annotator_id,
                    round=2,
                    position=a.position + gap,
                )
            )
    return repeats


def _long_item_ids(*, study: Study, seconds: float) -> set[int]:
    """The study's items whose stimulus lasts longer than ``seconds`` (0: none): a known
    ``duration`` in their metadata, or the length of the gold signal they name."""
    if not seconds:
        return set()
    from apps.continuous.models import GoldSignal  # a question kind's model: read, not owned

    rows = list(study.items.values_list("id", "metadata"))
    signals = {
        signal.key: signal.duration
        for signal in GoldSignal.objects.filter(
            key__in={(m or {}).get("signal") for _, m in rows} - {None}
        )
    }
    long_ids = set()
    for item_id, metadata in rows:
        metadata = metadata or {}
        duration = metadata.get("duration")
        if not isinstance(duration, int | float):
            duration = signals.get(str(metadata.get("signal")), 0.0)
        if duration > seconds:
            long_ids.add(item_id)
    return long_ids


def _extra_annotator(*, study: Study, item_id: int, left_out: set[int]) -> int | None:
    """Who takes an extra answer of an item: an annotator of the study (not a recruited
    participant, not ``left_out``) without a first-round assignment of it, with the fewest."""
    candidates = (
        study_annotators(study=study)
        .exclude(participation__study=study)
        .exclude(pk__in=left_out)
        .exclude(pk__in=Assignment.objects.filter(item_id=item_id, round=1).values("annotator_id"))
        .annotate(load=Count("assignments", filter=Q(assignments__study=study)))
        .order_by("load", "pk")
    )
    return candidates.values_list("pk", flat=True).first()


def _uncounted(question: Question) -> set[int]:
    """Annotators whose answers adaptive overlap does not count: excluded or flagged."""
    return excluded_annotator_ids(study=question.study) | flagged_annotator_ids(question=question)


def _rule_asks_more(rule: OverlapRule, n: ArrayLike, disagreement: ArrayLike) -> NDArray:
    """Whether items with ``n`` counted answers and this disagreement (by the rule's measure)
    get one more annotator."""
    n = np.asarray(n)
    return (rule.base_k <= n) & (n < rule.k_max) & (np.nan_to_num(disagreement) > rule.threshold)


def assignment_extend_disputed(*, question: Question, item_id: int) -> Assignment | None:
    """Adaptive overlap: queue a disputed item for one more annotator (served first).

    With the question's rule (:class:`apps.adjudication.models.OverlapRule`), an item whose
    ``n`` counted round-1 answers (excluded and flagged annotators' answers not counted) satisfy
    ``base_k <= n < k_max``, with no counted annotator's assignment of it still open, and
    whose disagreement by the rule's measure (AAD-RMSE in the label space, entropy of the
    Dawid-Skene posterior, or the spread of the traces' kappa_SDA:
    :func:`apps.adjudication.selectors.rule_readings`) exceeds ``threshold`` gets one more
    first-round assignment, marked ``extra``. Returns it, or ``None`` when the rule asks for
    nothing (or nobody is left to ask). Call inside the transaction that completed an answer;
    the rule is read through ``question`` (no query when loaded with its ``overlap_rule``).
    """
    rule = overlap_rule(question=question)
    if rule is None:
        return None
    study = question.study
    Study.objects.select_for_update().filter(pk=study.pk).first()  # one extension at a time
    left_out = _uncounted(question)
    waiting = (
        Assignment.objects.filter(item_id=item_id, round=1, completed_at__isnull=True)
        .exclude(annotator_id__in=left_out)
        .exists()
    )
    if waiting:
        return None
    _, n, disagreement = rule_readings(rule=rule, left_out=left_out, item_ids=[item_id])
    if n.size == 0 or not _rule_asks_more(rule, n[0], disagreement[0]):
        return None
    annotator_id = _extra_annotator(study=study, item_id=item_id, left_out=left_out)
    if annotator_id is None:
        return None
    position = study.items.filter(pk=item_id).values_list("position", flat=True).first() or 0
    return Assignment.objects.create(
        study=study, item_id=item_id, annotator_id=annotator_id, position=position, extra=True
    )


def assignments_extend_disputed(*, question: Question) -> list[Assignment]:
    """:func:`assignment_extend_disputed` for every item the question's rule asks more of now
    (a rule set or changed mid-study); returns the extra assignments made."""
    rule = overlap_rule(question=question)
    if rule is None:
        return []
    item_ids, n, disagreement = rule_readings(rule=rule, left_out=_uncounted(question))
    made = [
        assignment_extend_disputed(question=question, item_id=int(item_id))
        for item_id in item_ids[_rule_asks_more(rule, n, disagreement)]
    ]
    return [assignment for assignment in made if assignment is not None]


def assignment_check_annotator(*, annotator: Account, assignment: Assignment) -> None:
    """Refuse unless ``assignment`` is the annotator's own, they still annotate its study (a
    removed member keeps their assignments' answers, not the right to add to them), it is
    running and, for a recruited participant, their package is open
    (:func:`participant_check_answering`). Loaded by
    :func:`~apps.annotations.selectors.assignments_to_answer`, it is checked without a query."""
    if assignment.annotator_id != annotator.pk:
        raise PermissionDenied("This assignment belongs to another annotator.")
    annotating = getattr(assignment, "annotating", None)
    if annotating is None:
        annotating = Membership.objects.filter(
            study_id=assignment.study_id, user=annotator, role=Membership.Role.ANNOTATOR
        ).exists()
    if not annotating:
        raise PermissionDenied("You no longer annotate this study.")
    if assignment.study.status != Study.Status.RUNNING:
        raise ValidationError({"study": "The study is not running; annotations are closed."})
    participant_check_answering(user=assignment.annotator, study=assignment.study)


def _annotation_for_update(*, question: Question, assignment: Assignment) -> Annotation:
    """Get or create the annotation row and lock it, safe against concurrent first submits.

    One locking read when the row exists; otherwise the insert (in a savepoint) holds it. An
    unfinished assignment's answer is usually the first: then the insert is tried first (a
    partial answer or an undo left a row: the insert fails and the row is read). The row
    comes back with ``question`` attached, so nothing reads it again.
    """
    lookup = {
        "question": question,
        "item_id": assignment.item_id,
        "annotator_id": assignment.annotator_id,
        "round": assignment.round,
    }
    annotation = locked_get_or_create(
        Annotation, likely_new=assignment.completed_at is None, **lookup
    )
    annotation.question = question
    return annotation


def _revision_append(
    *,
    annotation: Annotation,
    value: Any,
    label: Label | None,
    idempotency_key: uuid.UUID,
    time_spent_ms: int | None,
    source: str,
) -> tuple[Revision, bool]:
    """Append a revision to a locked annotation, or return the one this key already made.

    Returns the revision and whether it is new (``False``: the key's earlier revision). A new
    annotation has no revisions, so only an existing one is asked for its latest number and
    for a revision with this key.
    """
    number = 1
    if annotation.current_revision_id is not None:
        seen = annotation.revisions.aggregate(
            last=Max("number"), repeat=Max("pk", filter=Q(idempotency_key=idempotency_key))
        )
        if seen["repeat"] is not None:
            previous = Revision.objects.select_related("label").get(pk=seen["repeat"])
            if previous.value != value:
                raise ValidationError(
                    {"idempotency_key": "This key was already used for a different answer."}
                )
            previous.annotation = annotation
            return previous, False
        number = (seen["last"] or 0) + 1
    revision = Revision.objects.create(
        annotation=annotation,
        number=number,
        value=value,
        label=label,
        idempotency_key=idempotency_key,
        time_spent_ms=time_spent_ms,
        source=source,
    )
    annotation.current_revision = revision
    annotation.analysis_pending = True
    rows_update([annotation], ["current_revision", "analysis_pending"])
    quality_schedule(question_id=annotation.question_id)
    return revision, True


def _assignment_refresh_completion(
    *, assignment: Assignment, answered: Collection[Question] = ()
) -> None:
    """Mark the assignment complete once every queue question that applies to its item has a
    live answer (an item no queue question applies to, such as a clip only traced, is
    complete with its first answer, as every item of a study without queue questions is).

    ``answered``: questions given a live answer by revisions appended in this transaction.
    When they hold every queue question covering the item (:func:`~apps.studies.selectors.
    study_questions_cached`, as the answer read them) the assignment is complete without a
    query; otherwise the database says.
    """
    if answered and _every_queue_question(assignment=assignment, answered=answered):
        done = True
    else:
        live = Annotation.objects.filter(
            question=OuterRef("pk"),
            item_id=assignment.item_id,
            annotator_id=assignment.annotator_id,
            round=assignment.round,
            current_revision__value__isnull=False,
        )
        queued = list(
            Question.objects.filter(study_id=assignment.study_id, kind__in=queue_kinds()).annotate(
                answered=Exists(live)
            )
        )
        setattr(assignment.study, QUEUE_QUESTIONS, queued)  # the next item's query reuses them
        unanswered = [question for question in queued if not question.answered]
        done = not covering_questions(unanswered, assignment.item)
    if done != (assignment.completed_at is not None):
        assignment.completed_at = timezone.now() if done else None
        rows_update([assignment], ["completed_at"])


def _every_queue_question(*, assignment: Assignment, answered: Collection[Question]) -> bool:
    """Whether ``answered`` holds every queue question of the assignment's study that applies
    to its item (the study's queue questions, from the per-process cache, are kept on the study
    object for the next item's query, as the database path does)."""
    queued = queue_questions_cached(study=assignment.study)
    given = {question.pk for question in answered}
    return all(question.pk in given for question in covering_questions(queued, assignment.item))


def annotations_submit(
    *,
    annotator: Account,
    assignment: Assignment,
    answers: Mapping[Question, Any],
    idempotency_key: uuid.UUID,
    time_spent_ms: int | None = None,
    source: str = Revision.Source.UI,
    suggestions: Mapping[int, tuple[int, int, bool]] | None = None,
) -> tuple[list[Revision], bool]:
    """Record one annotator's answers to an assigned item, one revision per question.

    Returns the revisions and ``created``: ``False`` when the ``idempotency_key`` was recorded
    before, and the revisions are the ones it made the first time (decided under the
    annotation's row lock, so two first sends racing each other get one ``True``). Answering
    again with a new key appends revisions (the latest counts). All or nothing: one bad answer
    stores none of them. The checks read before the write transaction opens: SQLite's
    ``IMMEDIATE`` transactions hold the database's one write lock from their first statement,
    so every other writer waits for what runs inside. An ``assignment`` loaded by
    :func:`~apps.annotations.selectors.assignments_to_answer` (the API's and the page's) is
    checked as loaded; any other is read again with its checks.

    ``suggestions`` (question id -> ``(run id, label id, shown)``) is what the page showed of
    a model's suggestions (:mod:`apps.models_registry.suggestions`, read from its signed
    ticket): each new revision of such a question gets its
    :class:`~apps.models_registry.models.Suggestion` row (one more write, only then).
    """
    if not hasattr(assignment, "annotating"):
        assignment = assignments_to_answer().get(pk=assignment.pk)
    assignment_check_annotator(annotator=annotator, assignment=assignment)
    if not answers:
        raise ValidationError({"answers": "Answer at least one question."})
    time_spent_check(time_spent_ms)
    cleaned = []
    for question, raw in answers.items():
        if question.study_id != assignment.study_id:
            raise ValidationError(
                {"question": f"{question.key!r} is not a question of this study."}
            )
        if not question_covers(question, assignment.item):
            raise ValidationError(
                {
                    "question": f"{question.key!r} is not asked about item "
                    f"{assignment.item.external_id!r} (the question's scope leaves it out)."
                }
            )
        cleaned.append((question, *clean_value(question, raw, assignment=assignment)))
    with transaction.atomic():
        appended = [
            _revision_append(
                annotation=_annotation_for_update(question=question, assignment=assignment),
                value=value,
                label=label,
                idempotency_key=idempotency_key,
                time_spent_ms=time_spent_ms,
                source=source,
            )
            for question, value, label in cleaned
        ]
        if suggestions:
            _suggestions_record(appended, suggestions)
        # a replayed key's revision may no longer be the current one (undone since): only
        # the revisions appended now are known to be live
        live = [
            question
            for (question, value, _), (_, created) in zip(cleaned, appended, strict=True)
            if created and value is not None
        ]
        _assignment_refresh_completion(assignment=assignment, answered=live)
        if assignment.round == 1 and assignment.completed_at is not None:
            for question, _, _ in cleaned:  # adaptive overlap may ask one more annotator
                assignment_extend_disputed(question=question, item_id=assignment.item_id)
    return [revision for revision, _ in appended], all(created for _, created in appended)


def _suggestions_record(
    appended: list[tuple[Revision, bool]], suggestions: Mapping[int, tuple[int, int, bool]]
) -> None:
    """Record, with each new revision, the suggestion its page showed or held out."""
    rows = [
        Suggestion(revision=revision, run_id=run_id, label_id=label_id, shown=shown)
        for revision, created in appended
        if created and revision.annotation.question_id in suggestions
        for run_id, label_id, shown in [suggestions[revision.annotation.question_id]]
    ]
    if rows:
        Suggestion.objects.bulk_create(rows)


@transaction.atomic
def assignment_skip(*, annotator: Account, assignment: Assignment) -> Assignment:
    """Move an unfinished item behind the annotator's other unskipped items."""
    assignment = (
        Assignment.objects.select_for_update().select_related("study").get(pk=assignment.pk)
    )
    assignment_check_annotator(annotator=annotator, assignment=assignment)
    if assignment.completed_at is None:
        Assignment.objects.filter(pk=assignment.pk).update(skip_count=F("skip_count") + 1)
        assignment.refresh_from_db(fields=["skip_count"])
    return assignment


@transaction.atomic
def annotation_undo_last(
    *,
    annotator: Account,
    study: Study,
    idempotency_key: uuid.UUID,
    assignment_id: int | None = None,
) -> Assignment | None:
    """Retract the annotator's latest answered item and put it back at the front of the queue.

    The retraction is a revision with no value; the earlier revisions stay in the history.
    Re-sending the same key undoes nothing more; each new key goes one step further back.
    ``assignment_id``, the answer the page offered to undo, must still be the latest: a stale
    page (another tab undid or answered meanwhile) undoes nothing (``ValidationError``).
    Returns the reopened assignment, or ``None``.
    """
    repeat = (
        Revision.objects.filter(
            idempotency_key=idempotency_key, annotation__annotator=annotator, value__isnull=True
        )
        .select_related("annotation")
        .first()
    )
    if repeat is not None:
        return Assignment.objects.filter(
            item_id=repeat.annotation.item_id,
            annotator=annotator,
            round=repeat.annotation.round,
        ).first()
    latest = (
        answered_latest_first(annotator=annotator, study=study)
        .select_for_update()
        .select_related("study")
        .first()
    )
    if assignment_id is not None and (latest is None or latest.pk != assignment_id):
        raise ValidationError(
            {
                "assignment": "That answer was already undone, or you answered since: "
                "nothing more was undone. The undo button now names your latest answer."
            }
        )
    if latest is None:
        return None
    assignment_check_annotator(annotator=annotator, assignment=latest)
    live = Annotation.objects.filter(
        item_id=latest.item_id,
        annotator=annotator,
        round=latest.round,
        question__study=study,
        current_revision__value__isnull=False,
    )
    for annotation in live.select_for_update():
        _revision_append(
            annotation=annotation,
            value=None,
            label=None,
            idempotency_key=idempotency_key,
            time_spent_ms=None,
            source=Revision.Source.UI,
        )
    latest.skip_count = 0
    latest.save(update_fields=["skip_count"])
    _assignment_refresh_completion(assignment=latest)
    return latest


@transaction.atomic
def progress_recount() -> int:
    """Recount every annotator's progress counters from their assignments; return how many
    (study, annotator) counts were wrong.

    The database keeps the counters (:class:`~apps.annotations.models.AnnotatorProgress`)
    on every write; only rows written with its triggers off (a data-only restore with
    ``--disable-triggers``) can leave them behind. On PostgreSQL the assignments are locked
    against writes meanwhile, so no answer lands between the count and the new counters.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            table = connection.ops.quote_name(Assignment._meta.db_table)
            cursor.execute(f"LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE")
    counted = {
        (row["study_id"], row["annotator_id"]): (row["total"], row["done"])
        for row in Assignment.objects.order_by()
        .values("study_id", "annotator_id")
        .annotate(total=Count("id"), done=Count("completed_at"))
    }
    kept = {
        (study, annotator): (total, done)
        for study, annotator, total, done in AnnotatorProgress.objects.values_list(
            "study_id", "annotator_id", "total", "done"
        )
        if total or done
    }
    AnnotatorProgress.objects.all().delete()
    AnnotatorProgress.objects.bulk_create(
        [
            AnnotatorProgress(study_id=study, annotator_id=annotator, total=total, done=done)
            for (study, annotator), (total, done) in counted.items()
        ],
        batch_size=5000,
    )
    return sum(kept.get(key) != counted.get(key) for key in counted.keys() | kept.keys())
