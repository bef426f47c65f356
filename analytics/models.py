"""Live quality state: the sufficient statistics of each question, kept up to date."""

from __future__ import annotations

from django.db import models

from apps.studies.models import Question


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
