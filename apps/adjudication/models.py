"""Adjudications of disputed items and the adaptive-overlap rule of a categorical question.

An :class:`Adjudication` is append-only like every answer: settling an item again adds a row,
the latest counts, and the earlier ones stay as its history (who decided what, when and why).
"""

from __future__ import annotations

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from apps.items.models import Item
from apps.studies.models import Label, Question


class Adjudication(models.Model):
    """A manager's or reviewer's final word on one item of a categorical question: a label,
    or "genuinely ambiguous" (no label, a note saying why)."""

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="adjudications")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="adjudications")
    adjudicator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="adjudications"
    )
    label = models.ForeignKey(
        Label, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    ambiguous = models.BooleanField(default=False, help_text="Genuinely ambiguous: no label.")
    note = models.TextField(blank=True, help_text="Why (required for an ambiguous item).")
    suggestion = models.JSONField(
        default=dict, blank=True, help_text="The aggregate shown when deciding (majority, DS)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["question_id", "item_id", "-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ambiguous=True, label__isnull=True)
                | models.Q(ambiguous=False, label__isnull=False),
                name="adjudication_label_xor_ambiguous",
            )
        ]
        indexes = [
            models.Index(fields=["question", "item", "-created_at"], name="adjudication_latest")
        ]

    def __str__(self) -> str:
        verdict = "ambiguous" if self.ambiguous else self.label
        return f"{self.item} / {self.question.key}: {verdict} by {self.adjudicator}"

    def clean(self) -> None:
        if self.ambiguous and self.label_id is not None:
            raise ValidationError("An ambiguous item has no final label.")
        if not self.ambiguous and self.label_id is None:
            raise ValidationError({"label": "Pick the final label or mark the item ambiguous."})
        if self.ambiguous and not self.note.strip():
            raise ValidationError({"note": "Say why the item is genuinely ambiguous."})
        if self.label_id is not None and self.label.question_id != self.question_id:
            raise ValidationError({"label": "That label belongs to another question."})
        if self.item.study_id != self.question.study_id:
            raise ValidationError({"item": "That item belongs to another study."})


class OverlapRule(models.Model):
    """Adaptive overlap of one question: after ``base_k`` counted answers, an item whose
    disagreement exceeds ``threshold`` is queued for one more annotator, up to ``k_max``.
    Excluded and flagged annotators' answers are not counted.

    ``measure`` is how an item's disagreement is read: the AAD-RMSE of its answers in the
    label space or the entropy (bits) of its Dawid-Skene posterior, for categorical questions;
    the spread of its traces' pairwise kappa_SDA (1 - their mean), for continuous ones.
    """

    class Measure(models.TextChoices):
        AAD_RMSE = "aad_rmse", "AAD-RMSE of the answers"
        DS_ENTROPY = "ds_entropy", "Entropy of the Dawid-Skene posterior (bits)"
        KAPPA_SDA_SPREAD = "kappa_sda_spread", "Trace kappa_SDA spread (1 - mean pairwise)"

    #: The measures each question kind may use.
    MEASURES_OF_KIND = {
        Question.Kind.CATEGORICAL: (Measure.AAD_RMSE, Measure.DS_ENTROPY),
        Question.Kind.CONTINUOUS: (Measure.KAPPA_SDA_SPREAD,),
    }

    question = models.OneToOneField(Question, on_delete=models.CASCADE, related_name="overlap_rule")
    base_k = models.PositiveSmallIntegerField(validators=[MinValueValidator(2)], default=2)
    k_max = models.PositiveSmallIntegerField(validators=[MinValueValidator(2)], default=5)
    measure = models.CharField(max_length=20, choices=Measure.choices, default=Measure.AAD_RMSE)
    threshold = models.FloatField(
        validators=[MinValueValidator(0.0)],
        default=0.5,
        help_text="Disagreement above which an item gets one more annotator.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return (
            f"{self.question}: k {self.base_k}..{self.k_max}, "
            f"{self.get_measure_display()} > {self.threshold}"
        )

    def clean(self) -> None:
        if self.k_max < self.base_k:
            raise ValidationError({"k_max": "k_max cannot be below the base k."})
        allowed = self.MEASURES_OF_KIND.get(self.question.kind, ())
        if self.measure not in allowed:
            names = ", ".join(str(m.label) for m in allowed) or "none"
            raise ValidationError(
                {"measure": f"A {self.question.kind} question's rule measures {names}."}
            )
        if self.measure == self.Measure.DS_ENTROPY:
            most = float(np.log2(max(2, self.question.labels.count())))
            if self.threshold >= most:
                raise ValidationError(
                    {
                        "threshold": f"The entropy of {self.question.labels.count()} labels is "
                        f"below {most:.3g} bits: pick a threshold under it."
                    }
                )
        if self.measure == self.Measure.KAPPA_SDA_SPREAD and self.threshold >= 2:
            raise ValidationError({"threshold": "A kappa_SDA spread lies between 0 and 2."})


class DisagreementForecast(models.Model):
    """The latest text model of a categorical question that predicts the AAD-RMSE of the items
    nobody has answered yet from their text, with its cross-validated error
    (:func:`analytics.metrics.disagreement_prediction.predict_disagreement`)."""

    question = models.OneToOneField(
        Question, on_delete=models.CASCADE, related_name="disagreement_forecast"
    )
    model = models.CharField(max_length=40, default="tfidf-ridge")
    n_train = models.PositiveIntegerField(help_text="Annotated text items trained on.")
    folds = models.PositiveSmallIntegerField()
    cv_mse = models.FloatField(help_text="Cross-validated mean squared error.")
    cv_accuracy = models.FloatField(help_text="Cross-validated 4-level accuracy.")
    baseline_mse = models.FloatField(help_text="The majority-level baseline's MSE, same folds.")
    baseline_accuracy = models.FloatField(help_text="The majority-level baseline's accuracy.")
    levels = models.JSONField(default=list, help_text="The disagreement levels (AAD-RMSE).")
    fingerprint = models.CharField(
        max_length=64, help_text="SHA-256 of the training data: unchanged data is not retrained."
    )
    trained_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.question}: MSE {self.cv_mse:.3f} on {self.n_train} items"


class PredictedDisagreement(models.Model):
    """The predicted AAD-RMSE of one item nobody has answered (enough) yet."""

    forecast = models.ForeignKey(
        DisagreementForecast, on_delete=models.CASCADE, related_name="predictions"
    )
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="predicted_disagreement")
    value = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["forecast", "item"], name="one_prediction_per_item")
        ]

    def __str__(self) -> str:
        return f"{self.item}: {self.value:.3f}"
