"""Live quality state: the sufficient statistics of each question, kept up to date."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.items.models import Item
from apps.studies.models import Question, Study


class QualityState(models.Model):
    """Sufficient statistics of one question (see :mod:`analytics.sufficient_stats`).

    ``annotator_ids`` and ``value_keys`` fix the axes of the stored arrays; both only grow.
    The row is locked while an update is applied, which serialises updates of one question
    across processes and channel workers.
    """

    question = models.OneToOneField(Question, on_delete=models.CASCADE, related_name="quality")
    annotator_ids = models.JSONField(default=list)
    value_keys = models.JSONField(default=list)
    stats = models.BinaryField(default=bytes)
    n_applied = models.PositiveBigIntegerField(default=0, help_text="Revisions applied so far.")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"quality state of {self.question}"


class QualitySnapshot(models.Model):
    """Indicators, matrices and flags of a question at one time (history for trend lines).

    At most one row per question is started every ``QUALITY_SNAPSHOT_INTERVAL`` seconds; within
    that window the newest row is updated in place, so the latest row is always current.
    """

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="snapshots")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    indicators = models.JSONField(default=dict)
    matrices = models.JSONField(default=dict)
    flags = models.JSONField(default=list)
    n_annotations = models.PositiveBigIntegerField(default=0)
    state_version = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The updated_at of the QualityState these figures were derived from: a "
        "snapshot is never replaced by one derived from an older state.",
    )

    class Meta:
        ordering = ["question_id", "-created_at", "-id"]
        get_latest_by = "created_at"
        indexes = [models.Index(fields=["question", "-created_at"], name="snapshot_recent")]

    def __str__(self) -> str:
        return f"snapshot of {self.question} at {self.created_at:%Y-%m-%d %H:%M:%S}"


class Flag(models.Model):
    """An annotator (or, with no annotator, the whole question) flagged on one indicator."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        CONFIRMED = "confirmed", "Confirmed"
        DISMISSED = "dismissed", "Dismissed"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="quality_flags")
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="quality_flags")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="quality_flags",
    )
    indicator = models.CharField(max_length=40)
    reason = models.CharField(max_length=500)
    figures = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    active = models.BooleanField(
        default=True, help_text="Whether the latest figures still break the rule."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["study_id", "question_id", "annotator_id", "indicator"]
        constraints = [
            models.UniqueConstraint(
                fields=["question", "annotator", "indicator"], name="one_flag_per_indicator"
            )
        ]

    def __str__(self) -> str:
        return f"{self.indicator} flag on {self.annotator or 'the study'} ({self.status})"


class FlagEvent(models.Model):
    """One change of a flag (raised, figures worsened, confirmed, dismissed); never edited."""

    flag = models.ForeignKey(Flag, on_delete=models.CASCADE, related_name="events")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    from_status = models.CharField(max_length=10, blank=True)
    to_status = models.CharField(max_length=10, choices=Flag.Status.choices)
    note = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["flag_id", "created_at", "id"]

    def __str__(self) -> str:
        return f"{self.flag}: {self.from_status or 'new'} -> {self.to_status}"


class Exclusion(models.Model):
    """A manager's decision to leave an annotator's answers out of curated exports."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="exclusions")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="exclusions"
    )
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="exclusions_made"
    )
    reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="exclusions_revoked",
    )

    class Meta:
        ordering = ["study_id", "-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "annotator"],
                condition=models.Q(revoked_at__isnull=True),
                name="one_active_exclusion",
            )
        ]

    def __str__(self) -> str:
        return f"{self.annotator} excluded from {self.study}"


class ItemDisagreement(models.Model):
    """AAD-RMSE of one item's round-1 answers (Du & Hoste Eq. 4), kept current per touched item.

    A rebuild keeps only the most disputed items (``analytics.publishing.KEPT_DISAGREEMENTS``);
    every item touched later is added, so the top of the table stays the study's top.
    """

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    aad_rmse = models.FloatField(null=True)
    n = models.PositiveIntegerField(default=0, help_text="Round-1 answers behind the figure.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["question", "item"], name="one_disagreement_per_item")
        ]
        indexes = [models.Index(fields=["question", "-aad_rmse"], name="disagreement_top")]

    def __str__(self) -> str:
        return f"{self.item} / {self.question}: {self.aad_rmse}"
