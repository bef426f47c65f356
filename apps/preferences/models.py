"""Pairwise-preference judgements (append-only) and the per-annotator session that orders them.

A :class:`Judgement` is one answer of one annotator to one pair of items of a ``pairwise``
question; judgements are never updated or deleted. A :class:`PairSession` holds what is needed to
rebuild that annotator's :class:`~apps.preferences.scheduling.PairScheduler` from the stored
judgements (seed and item list); its row lock serialises the storing of the annotator's answers.

The question's ``settings`` are checked by :func:`clean_pairwise_settings`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from apps.items.models import Item
from apps.studies.kinds import own_settings
from apps.studies.models import Question


@dataclass(frozen=True)
class PairwiseSettings:
    """The settings of a pairwise question, with their defaults.

    Attributes
    ----------
    strict : bool
        Strict preference (A or B); False allows "equal" (weak preference).
    calibration_triplets : int
        Triplets whose three pairs are all asked first, to measure transitivity (T).
    audit_rate : float
        Share of sort steps that ask an already implied pair instead, in [0, 1).
    kappa_floor : float
        Transitivity kappa below which pruning stops for an annotator: every pair not yet
        asked is then asked.
    batch_size : int
        0: each annotator ranks all their items. Otherwise an annotator with more items ranks
        a batch of this many, drawn when they start (:func:`~apps.preferences.scheduling.
        batch_draw`): the items in fewest batches so far, then those whose pooled position
        is least certain (:func:`~apps.preferences.selectors.batch_uncertainty`), so that
        batches overlap evenly and favour the items the pooled ranking knows least.
    """

    strict: bool = False
    calibration_triplets: int = 10
    audit_rate: float = 0.1
    kappa_floor: float = 0.4
    batch_size: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# The ranges of the numeric settings, (low, high, high included), quoted by the editor's help.
AUDIT_RATE_RANGE = (0.0, 1.0, False)
KAPPA_FLOOR_RANGE = (-3.0, 1.0, True)


def range_text(bounds: tuple[float, float, bool]) -> str:
    """``[low, high]`` or ``[low, high)``: how a setting's range reads in help and errors."""
    low, high, closed = bounds
    return f"[{low:g}, {high:g}{']' if closed else ')'}"


def clean_pairwise_settings(raw: Any) -> PairwiseSettings:
    """Validate a pairwise question's ``settings`` and fill in the defaults.

    Parameters
    ----------
    raw : dict or None
        ``Question.settings``; unknown keys are refused so that typos do not pass silently
        (the quality overrides are left to :func:`apps.studies.kinds.clean_question_settings`).

    Returns
    -------
    PairwiseSettings

    Raises
    ------
    django.core.exceptions.ValidationError
        Field errors keyed by setting name.
    """
    if not isinstance(raw or {}, dict):
        raise ValidationError({"settings": "Pairwise settings must be an object."})
    raw = own_settings(raw)
    fields = PairwiseSettings.__dataclass_fields__
    errors: dict[str, str] = {}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        errors["settings"] = f"Unknown pairwise settings: {', '.join(unknown)}."
    values = {name: raw.get(name, field.default) for name, field in fields.items()}
    if not isinstance(values["strict"], bool):
        errors["strict"] = "Give true (A or B only) or false (A, B or equal)."
    triplets = values["calibration_triplets"]
    if isinstance(triplets, bool) or not isinstance(triplets, int) or triplets < 0:
        errors["calibration_triplets"] = "Give a whole number of triplets, 0 or more."
    batch = values["batch_size"]
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 0 or batch == 1:
        errors["batch_size"] = "Give a whole number of items, 2 or more (0: every item)."
    for name, bounds in (("audit_rate", AUDIT_RATE_RANGE), ("kappa_floor", KAPPA_FLOOR_RANGE)):
        low, high, closed = bounds
        value = values[name]
        number = isinstance(value, int | float) and not isinstance(value, bool)
        in_range = number and low <= value and (value <= high if closed else value < high)
        if not (in_range and math.isfinite(value)):
            errors[name] = f"Give a number in {range_text(bounds)}."
        else:
            values[name] = float(value)
    if errors:
        raise ValidationError(errors)
    return PairwiseSettings(**values)


class PairSession(models.Model):
    """One annotator's work on one pairwise question: what rebuilds their scheduler.

    Created on the annotator's first visit. ``items`` freezes the item ids to rank (their
    round-1 assignments at that moment, in queue order) and ``settings`` the question's settings:
    items assigned or settings changed later do not affect a ranking under way, so replaying the
    judgements always reproduces the same schedule.
    ``pruning_stopped_at`` is the number of judgements after which the annotator fell below the
    question's kappa floor (:meth:`~apps.preferences.scheduling.PairScheduler.below_floor`):
    with the adaptive scheduler the session then ends early; in sessions started before it
    (``adaptive`` False) every pair not yet asked is asked from then on.
    ``audit_rule`` is the scheduler's way of choosing audits
    (:class:`~apps.preferences.scheduling.PairScheduler`): 2 for new sessions; sessions started
    before it existed keep rule 1, with which their judgements were asked.
    ``figures`` keeps what the manager's pages read of the scheduler (remaining pairs, error
    rate, warning), written with every answer, so those pages replay no scheduler
    (:func:`~apps.preferences.selectors.annotator_figures`).
    """

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="pair_sessions")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="pair_sessions"
    )
    seed = models.PositiveIntegerField()
    items = models.JSONField(help_text="Item ids to rank, in the order given to the scheduler.")
    settings = models.JSONField(help_text="The question's settings when the session started.")
    pruning_stopped_at = models.PositiveIntegerField(null=True, blank=True)
    audit_rule = models.PositiveSmallIntegerField(
        default=2, help_text="How the scheduler draws audits (1: sessions started before rule 2)."
    )
    adaptive = models.BooleanField(
        default=True,
        help_text="The scheduler verifies answers as the annotator's measured reliability "
        "warrants (False: sessions started before it, which trust every answer).",
    )
    completed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    figures = models.JSONField(
        null=True,
        blank=True,
        help_text="The scheduler's figures after the latest answer (SchedulerFigures).",
    )

    class Meta:
        ordering = ["question_id", "annotator_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["question", "annotator"], name="one_pair_session_per_annotator"
            )
        ]

    def __str__(self) -> str:
        return f"{self.annotator} on {self.question.key}"

    @property
    def pairwise_settings(self) -> PairwiseSettings:
        return clean_pairwise_settings(self.settings)


class PairPool(models.Model):
    """What a batched pairwise question's batch draws share: their lock and the pooled fit.

    ``draws`` counts the batches stored: a draw reads it before the evidence it draws from
    and stores its batch only if it is unchanged, this row locked (``select_for_update``), else
    draws again (:func:`apps.preferences.services.pair_next`), so two annotators starting at
    once never both take the items the other took. ``items`` and ``se`` (int64 ids and float64
    standard errors, raw bytes, nan for an item never compared) are the pooled Bradley-Terry
    fit (:func:`apps.preferences.selectors.question_scores`) as last stored, off the request
    path, on ``n_judgements`` kept judgements at ``fitted_at`` (None: never fitted), with its
    ridge penalty ``alpha`` (0 unless the comparison graph was not strongly connected); the
    draw favours the items whose standard error is largest
    (:func:`~apps.preferences.selectors.batch_uncertainty`).
    """

    question = models.OneToOneField(Question, on_delete=models.CASCADE, related_name="pair_pool")
    draws = models.PositiveIntegerField(default=0, help_text="Batches drawn so far.")
    items = models.BinaryField(default=bytes, help_text="Item ids of the pooled fit (int64).")
    se = models.BinaryField(default=bytes, help_text="Their standard errors (float64).")
    n_judgements = models.PositiveIntegerField(default=0)
    alpha = models.FloatField(default=0.0, help_text="The fit's ridge penalty (0: none).")
    fitted_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"Batches of {self.question.key}"


class JudgementQuerySet(models.QuerySet["Judgement"]):
    def kept(self) -> JudgementQuerySet:
        """The judgements not retracted (undone) by their annotator."""
        return self.filter(retraction__isnull=True)

    def data(self) -> JudgementQuerySet:
        """The judgements that are data: every one but the hidden attention checks."""
        return self.exclude(phase=Judgement.Phase.CHECK)

    def checks(self) -> JudgementQuerySet:
        """The answers to hidden attention checks (gold pairs)."""
        return self.filter(phase=Judgement.Phase.CHECK)


class Judgement(models.Model):
    """One immutable answer to a pair: ``outcome`` 1 prefers ``item_a``, -1 ``item_b``, 0 a tie.

    An annotator's undo adds a :class:`Retraction` of the judgement; the judgement stays.
    ``side_a`` is the side ``item_a`` was shown on ("A", the left, or "B"); empty for judgements
    stored before sides were recorded.

    ``phase`` is the scheduler's step the pair was asked for, or ``check``: a hidden attention
    check (a recruited participant's answer to a gold pair with a known order,
    :mod:`apps.preferences.checks`). A check is scored against its gold answer and is no data:
    :meth:`JudgementQuerySet.data` leaves it out of the scheduler's replay, the quality
    statistics, the scores and the exports.
    """

    class Outcome(models.IntegerChoices):
        A = 1, "A is better"
        EQUAL = 0, "Equal"
        B = -1, "B is better"

    class Phase(models.TextChoices):
        CALIBRATION = "calibration", "Calibration"
        SORT = "sort", "Sort"
        AUDIT = "audit", "Audit"
        VERIFY = "verify", "Verification"
        CHECK = "check", "Attention check"

    class Side(models.TextChoices):
        A = "A", "A (left)"
        B = "B", "B (right)"

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="judgements")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="judgements"
    )
    sequence = models.PositiveIntegerField(help_text="1, 2, ... per annotator and question.")
    item_a = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    item_b = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    outcome = models.SmallIntegerField(choices=Outcome.choices)
    phase = models.CharField(max_length=11, choices=Phase.choices)
    contradicts = models.BooleanField(
        default=False, help_text="The answer disagrees with what earlier answers implied."
    )
    time_spent_ms = models.PositiveIntegerField(null=True, blank=True)
    side_a = models.CharField(
        max_length=1,
        choices=Side.choices,
        blank=True,
        default="",
        help_text="The side item_a was shown on (empty: stored before sides were recorded).",
    )
    idempotency_key = models.UUIDField()
    created_at = models.DateTimeField(auto_now_add=True)

    objects = JudgementQuerySet.as_manager()

    class Meta:
        ordering = ["question_id", "annotator_id", "sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["question", "annotator", "sequence"], name="judgement_sequence_unique"
            ),
            models.UniqueConstraint(
                fields=["question", "annotator", "idempotency_key"],
                name="judgement_idempotency_unique",
            ),
            models.CheckConstraint(
                condition=models.Q(outcome__in=[-1, 0, 1]), name="judgement_outcome_valid"
            ),
            models.CheckConstraint(
                condition=~models.Q(item_a=models.F("item_b")), name="judgement_two_items"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.annotator} #{self.sequence}: {self.item_a_id} vs {self.item_b_id}"

    def as_tuple(self) -> tuple[int, int, int]:
        """``(item_a_id, item_b_id, outcome)``, the shape the metrics and the scheduler take."""
        return self.item_a_id, self.item_b_id, self.outcome


class Retraction(models.Model):
    """An annotator's undo of one of their judgements (append-only: the judgement stays).

    Only the annotator's latest judgement not yet retracted can be retracted, so the kept
    judgements are always a prefix of the schedule and replay to the state before the undone
    answer (:func:`apps.preferences.services.judgement_retract`).
    """

    judgement = models.OneToOneField(Judgement, on_delete=models.CASCADE, related_name="retraction")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"Retraction of {self.judgement}"
