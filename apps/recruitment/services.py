"""Every write of recruitment: the link's settings, participants through their phases, gold.

A participant moves ``arrived -> consented -> training -> qualified -> working -> done``, or
ends early as ``declined``, ``screened_out`` (training below the threshold) or ``timed_out``
(package unfinished at the time limit; its unfinished items go back to the pool).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import random
import secrets
from collections.abc import Iterable, Mapping
from datetime import timedelta
from itertools import zip_longest
from typing import Any, NamedTuple

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone
from numpy.typing import NDArray

from apps.annotations.models import Assignment
from apps.continuous.models import GoldSignal
from apps.continuous.services import gold_signal_save
from apps.items.models import Item
from apps.recruitment.gold import GoldImportError, GoldSpec
from apps.recruitment.models import GoldAnswer, Participant, Recruitment, TrainingAnswer
from apps.recruitment.scoring import gold_value_clean, training_answer_score
from apps.recruitment.selectors import (
    package_groups,
    package_of,
    recruitment_capacity,
    round_robin_shares,
)
from apps.studies.models import Membership, Question, Study
from apps.studies.selectors import question_items

Status = Participant.Status
RECRUITMENT_FIELDS = [
    "is_open",
    "platform",
    "prolific_study_id",
    "completion_code",
    "screen_out_code",
    "completion_url",
    "items_per_participant",
    "max_participants",
    "time_limit_minutes",
    "check_rate",
    "qualification_threshold",
    "trace_threshold",
    "attention_floor",
    "consent_text",
    "questionnaire",
]


@transaction.atomic
def recruitment_update(*, study: Study, **fields: Any) -> Recruitment:
    """Create or change a study's recruitment settings (validated as a whole)."""
    if unknown := set(fields) - set(RECRUITMENT_FIELDS):
        raise ValidationError(f"Unknown recruitment fields: {', '.join(sorted(unknown))}")
    recruitment = Recruitment.objects.filter(study=study).first() or Recruitment(study=study)
    for name, value in fields.items():
        setattr(recruitment, name, value)
    recruitment.full_clean()
    recruitment.save()
    return recruitment


def _set_status(participant: Participant, status: str, **fields: Any) -> Participant:
    participant.status = status
    for name, value in fields.items():
        setattr(participant, name, value)
    participant.save(update_fields=["status", *fields])
    return participant


def _locked(participant: Participant) -> Participant:
    """The participant's row, locked: two tabs cannot move one participant twice."""
    return (
        Participant.objects.select_for_update(of=("self",))
        .select_related("study__recruitment")
        .get(pk=participant.pk)
    )


class Entry(NamedTuple):
    """A visit through the link: the participant, and the resume code to show a new one."""

    participant: Participant
    resume_code: str  # "" for a returning participant: their code was shown on arrival


class ParticipantIdTakenError(Exception):
    """Another browser holds this platform id, and this request proves no right to it."""


class StudyFullError(Exception):
    """No work is left for one more participant: they are sent back with the screen-out code."""


RESUME_ALPHABET = "ABCDEFGHJKMNPQRSTVWXYZ23456789"  # no 0/O, 1/I/L, U: read aloud safely


def _resume_code() -> str:
    """A fresh resume code such as ``K7QD-M2XW`` (40 bits)."""
    chars = [secrets.choice(RESUME_ALPHABET) for _ in range(8)]
    return f"{''.join(chars[:4])}-{''.join(chars[4:])}"


def _resume_hash(code: str) -> str:
    return hashlib.sha256(code.strip().upper().encode()).hexdigest()


def _may_continue(
    participant: Participant, *, same_browser: bool, session_id: str, resume_code: str
) -> bool:
    """Whether a visit with ``participant``'s platform id is that participant: the browser
    they arrived in, the same attempt on the platform (Prolific's ``SESSION_ID``, MTurk's
    ``assignmentId``), or their resume code. The id alone is not enough: anyone who learns it
    could take over the work and the completion code."""
    same_attempt = bool(participant.platform_session_id and session_id) and hmac.compare_digest(
        participant.platform_session_id, session_id[:64]
    )
    resumed = bool(resume_code and participant.resume_hash) and hmac.compare_digest(
        participant.resume_hash, _resume_hash(resume_code)
    )
    return same_browser or same_attempt or resumed


def participants_release_reservations(*, study: Study, now: Any = None) -> int:
    """End the visits of arrivals who have not consented within
    ``RECRUITMENT_RESERVATION_MINUTES``: their places go to others. Returns how many."""
    since = (now or timezone.now()) - timedelta(minutes=settings.RECRUITMENT_RESERVATION_MINUTES)
    stale = Participant.objects.filter(study=study, status=Status.ARRIVED, arrived_at__lt=since)
    return stale.update(status=Status.EXPIRED, ended_at=now or timezone.now())


@transaction.atomic
def participant_enter(
    *,
    recruitment: Recruitment,
    platform_id: str,
    study_id: str = "",
    session_id: str = "",
    resume_code: str = "",
    same_browser: bool = False,
) -> Entry:
    """The participant with this platform id, created on first arrival, and the resume code to
    show them (``""`` when they return).

    A returning id gets the same participant only from the browser it arrived in, with the same
    platform attempt or with its resume code (:func:`_may_continue`); else
    :class:`ParticipantIdTakenError`. New participants are admitted one at a time (the
    recruitment row is locked) while the link is open and the study running; when
    ``max_participants`` already hold a place (arrivals that never consent give theirs up after
    ``RECRUITMENT_RESERVATION_MINUTES``) or no work is left for one more
    (:func:`~apps.recruitment.selectors.recruitment_capacity`), :class:`StudyFullError` before
    any account is made: the platform's "study full" screen-out, as either way there is no
    place. The account is pseudonymous (no platform id in its username)
    and has no usable password; it is an annotator of this study only.
    """
    recruitment = (
        Recruitment.objects.select_for_update(of=("self",))
        .select_related("study")
        .get(pk=recruitment.pk)
    )
    study = recruitment.study
    existing = Participant.objects.filter(
        study=study, platform=recruitment.platform, platform_id=platform_id
    ).first()
    if existing is not None and not _may_continue(
        existing, same_browser=same_browser, session_id=session_id, resume_code=resume_code
    ):
        raise ParticipantIdTakenError
    if existing is not None and existing.status != Status.EXPIRED:
        return Entry(existing, "")
    if not recruitment.is_open or not study.is_running:
        raise ValidationError("This study is not taking participants at the moment.")
    participants_release_reservations(study=study)
    capacity = recruitment_capacity(recruitment=recruitment)
    holding = Participant.objects.filter(study=study).exclude(status=Status.EXPIRED).count()
    if holding >= recruitment.max_participants or capacity <= 0:
        raise StudyFullError
    if existing is not None:  # an expired reservation comes back while there is room
        revived = _set_status(existing, Status.ARRIVED, arrived_at=timezone.now(), ended_at=None)
        return Entry(revived, "")
    code = _resume_code()
    participant = Participant(
        study=study,
        platform=recruitment.platform,
        platform_id=platform_id,
        platform_study_id=study_id[:64],
        platform_session_id=session_id[:64],
        resume_hash=_resume_hash(code),
    )
    participant.full_clean(exclude=["user"])
    user = get_user_model()(username=f"p{study.pk}-{secrets.token_hex(5)}")
    user.set_unusable_password()
    user.save()
    participant.user = user
    participant.save()
    # Not membership_add: that refills every queue, and participants' work comes in packages.
    Membership.objects.create(study=study, user=user, role=Membership.Role.ANNOTATOR)
    return Entry(participant, code)


@transaction.atomic
def participant_consent(
    *, participant: Participant, agree: bool, answers: Mapping[str, Any] | None = None
) -> Participant:
    """Record consent (with the questionnaire's answers) or its refusal, which ends the visit."""
    participant = _locked(participant)
    if participant.status != Status.ARRIVED:
        return participant
    if not agree:
        return _set_status(participant, Status.DECLINED, ended_at=timezone.now())
    return _set_status(
        participant, Status.CONSENTED, answers=dict(answers or {}), consented_at=timezone.now()
    )


def training_golds(*, study: Study) -> list[GoldAnswer]:
    """The study's training questions, in item order."""
    return list(
        GoldAnswer.objects.filter(item__study=study, use=GoldAnswer.Use.TRAINING).select_related(
            "item", "question"
        )
    )


@transaction.atomic
def participant_training_answer(
    *, participant: Participant, gold: GoldAnswer, value: Any
) -> TrainingAnswer:
    """Store a training answer and whether it matches the gold one; the first answer counts."""
    participant = _locked(participant)
    if participant.status not in (Status.CONSENTED, Status.TRAINING):
        raise ValidationError("Training is over for you.")
    if gold.item.study_id != participant.study_id or gold.use != GoldAnswer.Use.TRAINING:
        raise ValidationError("That is not a training item of this study.")
    scored = training_answer_score(
        gold=gold, value=value, recruitment=participant.study.recruitment
    )
    answer, _ = TrainingAnswer.objects.get_or_create(
        participant=participant,
        gold=gold,
        defaults={"value": scored.value, "correct": scored.correct, "score": scored.score},
    )
    if participant.status == Status.CONSENTED:
        _set_status(participant, Status.TRAINING)
    return answer


@transaction.atomic
def participant_training_finish(*, participant: Participant) -> Participant:
    """Qualify or screen out once every training question is answered.

    The score is the share of right answers; at least ``qualification_threshold`` qualifies
    (a study without training items qualifies everyone). Screened-out participants get the
    screen-out code.
    """
    participant = _locked(participant)
    if participant.status not in (Status.CONSENTED, Status.TRAINING):
        return participant
    total = GoldAnswer.objects.filter(
        item__study=participant.study, use=GoldAnswer.Use.TRAINING
    ).count()
    answers = participant.training_answers.aggregate(
        n=Count("id"), right=Count("id", filter=Q(correct=True))
    )
    if answers["n"] < total:
        raise ValidationError("Answer every training item first.")
    score = answers["right"] / total if total else 1.0
    recruitment = participant.study.recruitment
    if score >= recruitment.qualification_threshold:
        return _set_status(participant, Status.QUALIFIED, training_score=score)
    return _set_status(
        participant,
        Status.SCREENED_OUT,
        training_score=score,
        code_issued=recruitment.screen_out_code,
        ended_at=timezone.now(),
    )


def _package_items(*, recruitment: Recruitment, rng: random.Random) -> list[int]:
    """Item ids of a new package: regular items least assigned so far, shared between the
    kinds of work of the study (:func:`~apps.recruitment.selectors.package_groups`: in a
    mixed study, sentences to label and compare and clips to trace), checks mixed in.

    Gold pairs are no items of the package: the comparison page mixes them among the pairs
    (:mod:`apps.preferences.checks`).
    """
    study = recruitment.study
    gold = GoldAnswer.objects.filter(item=OuterRef("pk"))
    regular = (
        Item.objects.filter(study=study)
        .exclude(Exists(gold))
        .annotate(taken=Count("assignments", filter=Q(assignments__round=1)))
    )
    if study.overlap:
        regular = regular.filter(taken__lt=study.overlap)
    groups = package_groups(regular.order_by("taken", "position", "id"), study=study)
    shares = round_robin_shares([len(g) for g in groups], recruitment.items_per_participant)
    picked = [group[:share] for group, share in zip(groups, shares, strict=True)]
    chosen = [item_id for taken in zip_longest(*picked) for item_id in taken if item_id is not None]
    if not chosen:
        return []
    checks = list(
        GoldAnswer.objects.filter(item__study=study, use=GoldAnswer.Use.CHECK)
        .exclude(question__kind=Question.Kind.PAIRWISE)
        .values_list("item_id", flat=True)
        .distinct()
    )
    n_checks = min(len(checks), round(len(chosen) * recruitment.check_rate))
    for item_id in rng.sample(sorted(checks), n_checks):
        chosen.insert(rng.randint(0, len(chosen)), item_id)
    return chosen


@transaction.atomic
def participant_start_work(*, participant: Participant) -> Participant:
    """Give a qualified participant their work package (once) and start the clock.

    Abandoned packages of the study are released first, so their items can be handed out
    again. Packages are made one at a time per study (the recruitment row is locked). When no
    work is left (others took it meanwhile), the visit ends with the screen-out code
    (``full``) instead of a button that can never give work.
    """
    participant = _locked(participant)
    if participant.status != Status.QUALIFIED:
        return participant
    recruitment = Recruitment.objects.select_for_update().get(pk=participant.study.recruitment.pk)
    participants_release_expired(study=participant.study)
    items = _package_items(recruitment=recruitment, rng=random.Random(f"package-{participant.pk}"))
    if not items:
        return _ended(participant, Status.FULL, recruitment.screen_out_code)
    Assignment.objects.bulk_create(
        Assignment(
            study=participant.study, item_id=item_id, annotator_id=participant.user_id, position=n
        )
        for n, item_id in enumerate(items)
    )
    return _set_status(participant, Status.WORKING, started_at=timezone.now())


def _ended(participant: Participant, status: str, code: str) -> Participant:
    return _set_status(participant, status, code_issued=code, ended_at=timezone.now())


@transaction.atomic
def participant_finish(*, participant: Participant) -> Participant:
    """Close a finished package (every item answered) and issue the completion code."""
    participant = _locked(participant)
    if participant.status != Status.WORKING:
        return participant
    if not package_of(participant=participant).complete:
        raise ValidationError("Some items of your package are still unanswered.")
    return _ended(participant, Status.DONE, participant.study.recruitment.completion_code)


def _time_out(participants: Iterable[Participant]) -> int:
    """Release the unfinished items of ``participants`` (locked rows) and end their visits."""
    count = 0
    for participant in participants:
        Assignment.objects.filter(
            study=participant.study_id, annotator_id=participant.user_id, completed_at__isnull=True
        ).delete()
        _ended(participant, Status.TIMED_OUT, participant.study.recruitment.screen_out_code)
        count += 1
    return count


@transaction.atomic
def participants_release_expired(*, study: Study, now: Any = None) -> int:
    """Time out working participants past the time limit; their unfinished items go back.

    Returns how many were timed out. Their answers so far stay.
    """
    recruitment = Recruitment.objects.get(study=study)
    deadline = (now or timezone.now()) - timedelta(minutes=recruitment.time_limit_minutes)
    expired = (
        Participant.objects.select_for_update(of=("self",))
        .select_related("study__recruitment")
        .filter(study=study, status=Status.WORKING, started_at__lt=deadline)
    )
    return _time_out(expired)


@transaction.atomic
def gold_answers_store(*, study: Study, gold: Mapping[str, list[GoldSpec]]) -> int:
    """Create or replace the gold answers of imported items, by external id.

    Each answer goes through :func:`gold_answer_set` (a pair's other item must be an item of
    the study by now, so this runs after every item of the import is stored). Answers it
    refuses raise :class:`~apps.recruitment.gold.GoldImportError` naming each one's line,
    after all were tried; the caller's transaction then writes nothing. Rows without a gold
    answer leave an item's gold as it was. Returns the answers written.
    """
    items = dict(
        Item.objects.filter(study=study, external_id__in=list(gold)).values_list(
            "external_id", "id"
        )
    )
    count = 0
    refused: list[tuple[int, str]] = []
    for external_id, specs in gold.items():
        for spec in specs:
            try:
                gold_answer_set(
                    item=Item(pk=items[external_id], study=study),
                    question=spec.question,
                    value=spec.value,
                    reason=spec.reason,
                    use=spec.use,
                )
            except ValidationError as exc:
                refused += [(spec.line, f"{spec.question.key}: {m}") for m in exc.messages]
            else:
                count += 1
    if refused:
        raise GoldImportError(refused)
    return count


@transaction.atomic
def gold_answer_set(
    *, item: Item, question: Question, value: Any, reason: str = "", use: str = GoldAnswer.Use.CHECK
) -> GoldAnswer:
    """Create or replace the known answer to ``question`` about ``item``.

    ``value`` is checked per kind (:func:`~apps.recruitment.scoring.gold_value_clean`):
    a label, a calibration pair's known order, or a gold trace (the item's known signal).
    Each may be a hidden attention check: a label or a gold trace is an item mixed into
    packages, a pair is mixed among the scheduler's pairs (:mod:`apps.preferences.checks`).
    """
    if question.study_id != item.study_id:
        raise ValidationError({"question": "The question belongs to another study."})
    if question.scope and not question_items(question).filter(pk=item.pk).exists():
        raise ValidationError(
            {"question": f"{question.key!r} is not asked about this item (its scope)."}
        )
    if use not in GoldAnswer.Use.values:
        raise ValidationError({"use": f"Use one of {', '.join(GoldAnswer.Use.values)}."})
    cleaned = gold_value_clean(item=item, question=question, value=value)
    gold, _ = GoldAnswer.objects.update_or_create(
        item=item, question=question, defaults={"value": cleaned, "reason": reason, "use": use}
    )
    return gold


MAX_SIGNAL_RATE_HZ = 10_000.0


@transaction.atomic
def item_gold_signal_set(
    *, item: Item, values: NDArray[np.float64], rate_hz: float, description: str = ""
) -> GoldSignal:
    """Store ``values`` (at ``rate_hz``) as the true signal of ``item``: a gold trace.

    The signal is kept under the key ``item-<id>`` (replaced by a new upload) and the item's
    metadata names it (``{"signal": key}``): it is the item's known answer, which the
    calibration report, trace training and attention checks compare traces with. It does not
    change what the item shows: audio and video play as before; only an item without media
    is shown as the green screen that follows the signal
    (:func:`~apps.continuous.selectors.green_signal_for_item`).
    Nothing is written when the signal or the rate is refused (field errors).
    """
    if not (math.isfinite(rate_hz) and 0 < rate_hz <= MAX_SIGNAL_RATE_HZ):
        raise ValidationError({"rate_hz": f"Give a rate in (0, {MAX_SIGNAL_RATE_HZ:g}] Hz."})
    signal = gold_signal_save(
        key=f"item-{item.pk}", rate_hz=rate_hz, values=values, description=description
    )
    item.metadata = {**(item.metadata or {}), "signal": signal.key}
    item.save(update_fields=["metadata"])
    return signal


GOLD_USE_NONE = "none"
"""The use that takes an item's known answer away (it becomes a regular item again)."""


@transaction.atomic
def gold_use_set(
    *, item: Item, question: Question, use: str, reason: str = "", value: Any = None
) -> GoldAnswer | None:
    """Make ``item`` a hidden check or a training item of ``question``, or neither (``none``).

    ``value`` is the known answer (:func:`gold_answer_set` checks it); without one, a gold
    trace's is read from the item's signal and any other item keeps the answer it has, so the
    manager's page can change a check into training, or the reason, without restating it.
    ``none`` removes the known answer; the item goes back among the regular items. Returns
    the gold answer, or ``None`` after a removal.
    """
    if use == GOLD_USE_NONE:
        GoldAnswer.objects.filter(item=item, question=question).delete()
        return None
    if value is None:
        if question.kind == Question.Kind.CONTINUOUS:
            value = {}  # the signal named by the item's metadata
        elif (known := GoldAnswer.objects.filter(item=item, question=question).first()) is None:
            raise ValidationError(
                {"value": "This item has no known answer to this question yet; give one."}
            )
        else:
            value = known.value
    return gold_answer_set(item=item, question=question, value=value, reason=reason, use=use)
