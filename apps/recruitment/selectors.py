"""Reads of recruitment: where a participant belongs next, packages, gold accuracy, payments."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet
from django.db.models.fields.json import KT
from django.urls import reverse
from django.utils import timezone

from analytics.metrics.uncertainty import Interval, wilson_interval
from apps.annotations.models import Annotation, Assignment
from apps.continuous.models import GoldSignal
from apps.continuous.selectors import calibration_report, next_trace_assignment, trace_progress
from apps.items.models import Item
from apps.preferences.models import Judgement, PairSession
from apps.recruitment.models import GoldAnswer, Participant, Recruitment, TrainingAnswer
from apps.studies.kinds import queue_kinds
from apps.studies.models import Question, Study
from apps.studies.selectors import items_of_any, question_item_filter
from core.types import Visitor

Status = Participant.Status


def package_pools(*, study: Study) -> list[Q]:
    """The item pools a package draws work from, one per kind of work (conditions on
    ``Item``): the items of the label queue (those a queue question applies to), then each
    trace and pairwise question's items (its scope). A study whose questions have no scope
    has one pool of every item, drawn as before scoping existed."""
    questions = list(study.questions.order_by("position", "id"))
    queued = [q for q in questions if q.kind in queue_kinds()]
    pools = [items_of_any(queued)] if queued else []
    return pools + [question_item_filter(q) for q in questions if q.kind not in queue_kinds()]


def package_groups(items: QuerySet[Item], *, study: Study) -> list[list[int]]:
    """``items`` (ids, in the queryset's order) split by the pools of work they belong to
    (:func:`package_pools`): items of the same pools form one group (sentences labelled and
    compared; clips traced); items of no pool are left out. Groups in order of their first
    item. One query per pool with a scope, plus one."""
    ordered = list(items.values_list("id", flat=True))
    members = [
        None if not pool else set(items.filter(pool).values_list("id", flat=True))
        for pool in package_pools(study=study)
    ]
    groups: dict[tuple[int, ...], list[int]] = {}
    for item_id in ordered:
        signature = tuple(
            n for n, member in enumerate(members) if member is None or item_id in member
        )
        if signature:
            groups.setdefault(signature, []).append(item_id)
    return list(groups.values())


def round_robin_shares(sizes: list[int], total: int) -> list[int]:
    """How many items each group gives a package of ``total``: one from each group in turn
    while it has any left, so groups share the package evenly and a short group's share goes
    to the others.

    >>> round_robin_shares([10, 10], 5), round_robin_shares([1, 10], 5)
    ([3, 2], [1, 4])
    """
    shares = [0] * len(sizes)
    left = total
    while left > 0 and any(share < size for share, size in zip(shares, sizes, strict=True)):
        for n, size in enumerate(sizes):
            if left > 0 and shares[n] < size:
                shares[n] += 1
                left -= 1
    return shares


@dataclass(frozen=True)
class PackagePart:
    """One group of a package as the manager's page states it: how many of its items a
    package takes, of how many regular items, and the questions asked about them."""

    share: int
    items: int
    questions: list[Question]


def package_plan(*, recruitment: Recruitment) -> list[PackagePart]:
    """What a new package holds (:func:`package_groups`, :func:`round_robin_shares`, over all
    the regular items, answered or not): the manager's page states it, so that a mixed study
    shows that its participants trace and compare as well as label."""
    study = recruitment.study
    regular = (
        Item.objects.filter(study=study)
        .exclude(Exists(GoldAnswer.objects.filter(item=OuterRef("pk"))))
        .order_by("position", "id")
    )
    groups = package_groups(regular, study=study)
    shares = round_robin_shares([len(g) for g in groups], recruitment.items_per_participant)
    questions = list(study.questions.order_by("position", "id"))
    covered = {
        q.pk: None
        if not q.scope
        else set(regular.filter(question_item_filter(q)).values_list("pk", flat=True))
        for q in questions
    }
    return [
        PackagePart(
            share=share,
            items=len(group),
            questions=[q for q in questions if _asked_in(covered[q.pk], group)],
        )
        for group, share in zip(groups, shares, strict=True)
    ]


def _asked_in(covered: set[int] | None, group: list[int]) -> bool:
    """Whether a question covering ``covered`` (``None``: every item) asks about ``group``."""
    return covered is None or not covered.isdisjoint(group)


def packages_left(*, recruitment: Recruitment, limit: int) -> int | None:
    """How many more work packages the study can hand out, counted up to ``limit``; ``None``:
    no end (no overlap set).

    Packages are made as :func:`apps.recruitment.services._package_items` makes them: up to
    ``items_per_participant`` distinct regular items shared between the groups of work
    (:func:`package_groups`, :func:`round_robin_shares`), least-answered first, each item
    until it has ``overlap`` first-round assignments. Simulated package by package on the
    vectors of open slots per item of each group (the items a package takes among equally
    open ones do not change the count), so the cost is ``limit`` partial sorts of the open
    items.
    """
    study = recruitment.study
    if not study.overlap:
        return None
    regular = (
        Item.objects.filter(study=study)
        .exclude(Exists(GoldAnswer.objects.filter(item=OuterRef("pk"))))
        .annotate(taken=Count("assignments", filter=Q(assignments__round=1)))
        .filter(taken__lt=study.overlap)
        .order_by("position", "id")
    )
    taken = dict(regular.values_list("id", "taken"))
    slots = [
        np.array([study.overlap - taken[item_id] for item_id in group], dtype=np.int64)
        for group in package_groups(regular, study=study)
    ]
    size = recruitment.items_per_participant
    packages = 0
    while packages < limit and any(group.any() for group in slots):
        shares = round_robin_shares([int(np.count_nonzero(g)) for g in slots], size)
        for group, share in zip(slots, shares, strict=True):
            if share:
                open_ = np.flatnonzero(group)
                if open_.size > share:
                    open_ = open_[np.argpartition(-group[open_], share - 1)[:share]]
                group[open_] -= 1
        packages += 1
    return packages


def recruitment_capacity(*, recruitment: Recruitment) -> int:
    """How many more participants the link can admit and pay: places under
    ``max_participants`` and packages left for them, once every admitted participant who is
    not working yet has claimed one. Arrivals whose reservation expired hold nothing."""
    participants = Participant.objects.filter(study=recruitment.study).exclude(
        status=Participant.Status.EXPIRED
    )
    places = recruitment.max_participants - participants.count()
    if places <= 0:
        return 0
    waiting = participants.filter(status__in=Participant.WAITING).count()
    left = packages_left(recruitment=recruitment, limit=waiting + places)
    return places if left is None else max(min(places, left - waiting), 0)


def recruitment_open_by_token(*, token: str) -> Recruitment | None:
    """The recruitment a link names, with its study."""
    return Recruitment.objects.select_related("study").filter(token=token).first()


def participant_of(*, user: Visitor, study: Study) -> Participant | None:
    """The user's participation in ``study``, if the user is a recruited participant there."""
    if not user.is_authenticated:
        return None
    return (
        Participant.objects.select_related("study__recruitment")
        .filter(user=user, study=study)
        .first()
    )


def participant_of_user(*, user: Visitor) -> Participant | None:
    """The participation of a recruited participant's account (any study), else ``None``."""
    if not user.is_authenticated:
        return None
    return Participant.objects.filter(user=user).first()


@dataclass(frozen=True)
class WorkStep:
    """One kind of work in a participant's package, on its own page: the label queue
    (``question`` ``None``: every queue question, each on the items it applies to), one
    trace question's clips, or one pairwise question's ranking. ``done`` of ``total`` items
    (a ranking: 1 of 1 once finished)."""

    question: Question | None
    url: str
    done: int
    total: int
    finished: bool


@dataclass(frozen=True)
class Package:
    """A participant's work package: answered and total items, and whether time is up.

    ``steps`` are its kinds of work (:func:`package_steps`); the package is complete when
    every item is answered and every step finished (the traces and the rankings too)."""

    done: int
    total: int
    deadline: datetime | None
    steps: tuple[WorkStep, ...] = ()

    @property
    def complete(self) -> bool:
        return self.total > 0 and self.done == self.total and all(s.finished for s in self.steps)

    @property
    def expired(self) -> bool:
        return self.deadline is not None and timezone.now() > self.deadline

    @property
    def next_step(self) -> WorkStep | None:
        """The first unfinished kind of work, where the participant goes next."""
        return next((step for step in self.steps if not step.finished), None)


def package_deadline(
    participant: Participant, *, recruitment: Recruitment | None = None
) -> datetime | None:
    """When the participant's package must be finished (``None`` before it is given).

    ``recruitment`` is the study's, when the caller has it at hand (else it is read).
    """
    if participant.started_at is None:
        return None
    minutes = (recruitment or participant.study.recruitment).time_limit_minutes
    return participant.started_at + timedelta(minutes=minutes)


def _ranking_finished(*, question: Question, annotator_id: int) -> bool:
    """A pairwise session finished with at least one answer that is not "equal" (a ranking
    of ties alone earns no code: :func:`apps.preferences.services._mark_completed`)."""
    finished = PairSession.objects.filter(
        question=question, annotator_id=annotator_id, completed_at__isnull=False
    ).exists()
    return finished and (
        Judgement.objects.filter(question=question, annotator_id=annotator_id)
        .kept()
        .data()
        .exclude(outcome=0)
        .exists()
    )


def package_steps(*, participant: Participant) -> list[WorkStep]:
    """The kinds of work in the participant's package, in the order they are done: the label
    queue (its items: those a queue question applies to), then each trace question (its
    traceable items in scope), then each pairwise question (its items in scope, two or more),
    in question order. Kinds with nothing in the package are left out."""
    from apps.annotations.selectors import annotator_progress, queue_questions_of

    study, user = participant.study, participant.user
    steps: list[WorkStep] = []
    queued = queue_questions_of(study=study)
    if queued:
        progress = annotator_progress(annotator=user, study=study, questions=queued)
        if progress["total"]:
            url = reverse("annotations:queue", args=[study.pk])
            done, total = progress["done"], progress["total"]
            steps.append(WorkStep(None, url, done, total, done == total))
    for question in study.questions.filter(kind__in=list(WORK_PAGES)).order_by("position", "id"):
        url = reverse(WORK_PAGES[question.kind], args=[study.pk, question.key])
        if question.kind == Question.Kind.CONTINUOUS:
            traced = trace_progress(annotator=user, question=question)
            if traced["total"]:
                finished = next_trace_assignment(annotator=user, question=question) is None
                steps.append(WorkStep(question, url, traced["done"], traced["total"], finished))
            continue
        items = Assignment.objects.filter(
            question_item_filter(question, prefix="item__"),
            study=study,
            annotator=user,
            round=1,
        ).count()
        if items >= 2:
            finished = _ranking_finished(question=question, annotator_id=user.pk)
            steps.append(WorkStep(question, url, int(finished), 1, finished))
    return steps


def package_of(*, participant: Participant) -> Package:
    counts = Assignment.objects.filter(
        study=participant.study_id, annotator_id=participant.user_id
    ).aggregate(total=Count("id"), done=Count("id", filter=Q(completed_at__isnull=False)))
    return Package(
        done=counts["done"],
        total=counts["total"],
        deadline=package_deadline(participant),
        steps=tuple(package_steps(participant=participant)),
    )


def participant_page(*, participant: Participant) -> str:
    """The address of the page a participant belongs on now (their phase decides)."""
    study_id = participant.study_id
    if participant.status == Status.ARRIVED:
        return reverse("recruitment:consent", args=[study_id])
    if participant.status in (Status.CONSENTED, Status.TRAINING):
        return reverse("recruitment:training", args=[study_id])
    if participant.status == Status.QUALIFIED:
        return reverse("recruitment:qualified", args=[study_id])
    if participant.status == Status.WORKING:
        package = package_of(participant=participant)
        if not (package.complete or package.expired):
            step = package.next_step
            return step.url if step is not None else work_page(study=participant.study)
    return reverse("recruitment:end", args=[study_id])


# The page of each question kind answered outside the queue, by URL name (study id, key).
WORK_PAGES: dict[str, str] = {
    Question.Kind.CONTINUOUS.value: "continuous:record_next",
    Question.Kind.PAIRWISE.value: "preferences:compare",
}


def work_page(*, study: Study) -> str:
    """Where a participant works on their package when no step is left unfinished but items
    are (:func:`package_steps`): the annotator queue when the study has queue questions, else
    the page of its first trace or pairwise question."""
    if not study.questions.filter(kind__in=queue_kinds()).exists():
        question = study.questions.filter(kind__in=list(WORK_PAGES)).order_by("position").first()
        if question is not None:
            return reverse(WORK_PAGES[question.kind], args=[study.pk, question.key])
    return reverse("annotations:queue", args=[study.pk])


def participant_redirect(*, user: Visitor, study: Study, here: str) -> str | None:
    """For a work page (``here``): where a recruited participant must go instead, else
    ``None``: for everyone who is not a participant of ``study``, and for a participant with
    an unfinished package inside the time limit whose work page is ``here``.
    """
    participant = participant_of(user=user, study=study)
    if participant is None:
        return None
    page = participant_page(participant=participant)
    return None if page == here else page


def training_next(*, participant: Participant) -> GoldAnswer | None:
    """The first training question the participant has not answered."""
    answered = TrainingAnswer.objects.filter(participant=participant).values("gold_id")
    return (
        GoldAnswer.objects.filter(item__study=participant.study_id, use=GoldAnswer.Use.TRAINING)
        .exclude(pk__in=answered)
        .select_related("item", "question")
        .first()
    )


def training_versus(*, gold: GoldAnswer) -> Item | None:
    """The other item of a calibration pair (pairwise gold answers), else ``None``."""
    if gold.question.kind != Question.Kind.PAIRWISE:
        return None
    return Item.objects.filter(
        study_id=gold.item.study_id, external_id=gold.value["versus"]
    ).first()


def gold_signal_items(*, study: Study) -> QuerySet[Item]:
    """The study's items whose metadata names a stored signal (gold traces), in item order.

    A queryset, so a list pages it in the database; :func:`gold_signals_of` then pairs the
    items of one page with their signals.
    """
    return (
        study.items.alias(signal_key=KT("metadata__signal"))
        .filter(Exists(GoldSignal.objects.filter(key=OuterRef("signal_key"))))
        .order_by("position", "id")
    )


def gold_signals_of(*, items: Iterable[Item]) -> list[tuple[Item, GoldSignal]]:
    """Each of ``items`` (from :func:`gold_signal_items`) with its signal, in the items' order:
    one query, which leaves the samples unread (a list shows their count and rate)."""
    items = list(items)
    signals = GoldSignal.objects.defer("values").in_bulk(
        [item.metadata["signal"] for item in items], field_name="key"
    )
    return [
        (item, signals[item.metadata["signal"]])
        for item in items
        if item.metadata["signal"] in signals
    ]


def training_progress(*, participant: Participant) -> dict[str, int]:
    total = GoldAnswer.objects.filter(
        item__study=participant.study_id, use=GoldAnswer.Use.TRAINING
    ).count()
    return {"done": participant.training_answers.count(), "total": total}


@dataclass(frozen=True)
class GoldAccuracy:
    """One annotator's answers to attention-check items: right ones, all, and the interval."""

    annotator_id: int
    username: str
    correct: int
    checked: int
    interval: Interval


def gold_accuracy(*, study: Study, question: Question | None = None) -> dict[int, GoldAccuracy]:
    """Per annotator (id), accuracy on the study's attention-check gold answers (only those
    of ``question`` when given).

    A label check counts each live answer (latest revision, not retracted) to its question,
    in any round, right when it is the gold label. A trace check counts each current finished
    trace of its item, right when its kappa_SDA with the true signal (lag-corrected, as in
    :func:`~apps.continuous.selectors.calibration_report`) reaches the study's
    ``trace_threshold``; an undefined kappa_SDA is a failed check. A pair check counts each
    kept answer to its pair served as a check (:mod:`apps.preferences.checks`), right when
    its outcome, in the gold's orientation (sides swapped back), is the known one. The
    interval is Wilson's (:func:`wilson_interval`). Annotators without such answers are
    absent.
    """
    checks = GoldAnswer.objects.filter(item__study=study, use=GoldAnswer.Use.CHECK)
    if question is not None:
        checks = checks.filter(question=question)
    checks = checks.select_related("question")
    by_kind: dict[str, list[GoldAnswer]] = defaultdict(list)
    for gold in checks:
        by_kind[gold.question.kind].append(gold)
    tally: dict[int, list] = defaultdict(lambda: ["", 0, 0])
    for annotator_id, username, right in (
        *_label_check_outcomes(study=study, checks=by_kind[Question.Kind.CATEGORICAL]),
        *_trace_check_outcomes(study=study, checks=by_kind[Question.Kind.CONTINUOUS]),
        *_pair_check_outcomes(study=study, checks=by_kind[Question.Kind.PAIRWISE]),
    ):
        entry = tally[annotator_id]
        entry[0] = username
        entry[1] += right
        entry[2] += 1
    return {
        annotator_id: GoldAccuracy(annotator_id, username, right, n, wilson_interval(right, n))
        for annotator_id, (username, right, n) in sorted(tally.items(), key=lambda kv: kv[1][0])
    }


def _label_check_outcomes(
    *, study: Study, checks: list[GoldAnswer]
) -> Iterator[tuple[int, str, bool]]:
    """(annotator id, name, right) of each live answer to a label check of ``checks``."""
    gold = {(g.item_id, g.question_id): g.value for g in checks}
    if not gold:
        return
    rows = Annotation.objects.filter(
        question__study=study,
        item_id__in={item_id for item_id, _ in gold},
        current_revision__value__isnull=False,
    ).values_list("annotator_id", "annotator__username", "item_id", "question_id",
                  "current_revision__value")  # fmt: skip
    for annotator_id, username, item_id, question_id, value in rows:
        expected = gold.get((item_id, question_id))
        if expected is not None:
            yield annotator_id, username, value == expected


def _pair_check_outcomes(
    *, study: Study, checks: list[GoldAnswer]
) -> Iterator[tuple[int, str, bool]]:
    """(annotator id, name, right) of each kept answer to a gold pair of ``checks`` served
    as an attention check: right when the outcome of the gold's item against ``versus``
    (the stored outcome, negated when the gold's item was ``item_b``) is the known one."""
    if not checks:
        return
    versus = dict(
        Item.objects.filter(
            study=study, external_id__in=[g.value["versus"] for g in checks]
        ).values_list("external_id", "pk")
    )
    known: dict[tuple[int, int, int], tuple[int, int]] = {}  # (question, pair) -> item, outcome
    for gold in checks:
        other = versus.get(gold.value["versus"])
        if other is not None:
            lo, hi = sorted((gold.item_id, other))
            known.setdefault((gold.question_id, lo, hi), (gold.item_id, gold.value["outcome"]))
    rows = (
        Judgement.objects.checks()
        .kept()
        .filter(question_id__in={question_id for question_id, _, _ in known})
        .values_list("annotator_id", "annotator__username", "question_id", "item_a_id",
                     "item_b_id", "outcome")
    )  # fmt: skip
    for annotator_id, username, question_id, item_a, item_b, outcome in rows:
        lo, hi = sorted((item_a, item_b))
        gold_pair = known.get((question_id, lo, hi))
        if gold_pair is not None:
            item, expected = gold_pair
            yield annotator_id, username, (outcome if item_a == item else -outcome) == expected


def _trace_check_outcomes(
    *, study: Study, checks: list[GoldAnswer]
) -> Iterator[tuple[int, str, bool]]:
    """(annotator id, name, right) of each current trace of a gold-trace check of ``checks``:
    right when its kappa_SDA with the truth reaches the study's ``trace_threshold``."""
    if not checks:
        return
    recruitment = Recruitment.objects.filter(study=study).first() or Recruitment(study=study)
    items: dict[Question, set[int]] = defaultdict(set)
    for gold in checks:
        items[gold.question].add(gold.item_id)
    for question, item_ids in items.items():
        for row in calibration_report(question=question):
            for figures in row.items:
                if figures.item_id in item_ids:
                    right = bool(figures.kappa_sda >= recruitment.trace_threshold)
                    yield row.annotator_id, row.username, right


@dataclass(frozen=True)
class ParticipantRow:
    """A participant as the manager's page and the payment file show them."""

    participant: Participant
    done: int
    total: int
    seconds: int
    accuracy: GoldAccuracy | None
    flagged: bool
    bonus_eligible: bool


def participants_overview(*, study: Study) -> Iterator[ParticipantRow]:
    """Every participant with items answered, time spent, gold accuracy and flags.

    Time spent runs from arrival to the end of the visit (or now). A participant is flagged
    when their accuracy on attention checks is below the study's ``attention_floor``; bonus
    eligible when done, with at least one check answered and not flagged.
    """
    recruitment = Recruitment.objects.get(study=study)
    accuracy = gold_accuracy(study=study)
    progress = {
        row["annotator_id"]: row
        for row in Assignment.objects.filter(study=study, annotator__participation__study=study)
        .values("annotator_id")
        .annotate(total=Count("id"), done=Count("id", filter=Q(completed_at__isnull=False)))
    }
    now = timezone.now()
    participants: QuerySet[Participant] = Participant.objects.filter(study=study).select_related(
        "user"
    )
    for participant in participants:
        counts = progress.get(participant.user_id, {"done": 0, "total": 0})
        gold = accuracy.get(participant.user_id)
        flagged = gold is not None and bool(gold.interval.estimate < recruitment.attention_floor)
        seconds = int(((participant.ended_at or now) - participant.arrived_at).total_seconds())
        yield ParticipantRow(
            participant=participant,
            done=counts["done"],
            total=counts["total"],
            seconds=seconds,
            accuracy=gold,
            flagged=flagged,
            bonus_eligible=participant.status == Status.DONE and gold is not None and not flagged,
        )


PAYMENT_HEADER: list[object] = [
    "platform",
    "platform_id",
    "status",
    "items_done",
    "items_total",
    "minutes",
    "code",
    "gold_correct",
    "gold_checked",
    "gold_accuracy",
    "bonus_eligible",
]


def payment_rows(*, study: Study) -> Iterator[list[object]]:
    """The payment file: a header, then one line per participant."""
    yield PAYMENT_HEADER
    for row in participants_overview(study=study):
        p, gold = row.participant, row.accuracy
        yield [
            p.platform,
            p.platform_id,
            p.status,
            row.done,
            row.total,
            round(row.seconds / 60, 1),
            p.code_issued,
            gold.correct if gold else None,
            gold.checked if gold else None,
            round(float(gold.interval.estimate), 3) if gold else None,
            "yes" if row.bonus_eligible else "no",
        ]


def gold_answers_of(*, study: Study) -> QuerySet[GoldAnswer]:
    """The study's known answers (checks and training) in item order, each with its item's
    ``item_external_id`` and its ``question_key`` (no item or question rows built): the
    manager's list of gold items."""
    return GoldAnswer.objects.filter(item__study=study).annotate(
        item_external_id=F("item__external_id"), question_key=F("question__key")
    )


GOLD_KINDS = (Question.Kind.CATEGORICAL, Question.Kind.PAIRWISE, Question.Kind.CONTINUOUS)


def gold_use_questions(*, study: Study) -> list[Question]:
    """The study's questions that take known answers (labels, pairs, gold traces), in order."""
    return list(study.questions.filter(kind__in=GOLD_KINDS).order_by("position", "id"))
