"""Assignments (who labels what, in which order) and append-only annotations.

An :class:`Annotation` is the answer of one annotator to one question about one item in one round
(round 2 is the test-retest repeat). Its content lives in immutable :class:`Revision` rows: an
edit appends a revision and ``current_revision`` points at the latest; nothing is overwritten.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.items.models import Item
from apps.studies.models import Label, Question, Study


class Assignment(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="assignments")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments"
    )
    round = models.PositiveSmallIntegerField(default=1, help_text="2 = test-retest repeat.")
    position = models.PositiveIntegerField(help_text="Order in this annotator's queue.")
    # The position the assignment had before an active order (apps.annotations.ordering) moved
    # it; empty while it stands at its natural place (the order it was queued in).
    natural_position = models.PositiveIntegerField(null=True, blank=True, editable=False)
    skip_count = models.PositiveIntegerField(default=0)
    extra = models.BooleanField(
        default=False, help_text="Queued by adaptive overlap for a disputed item: served first."
    )
    completed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["annotator_id", "skip_count", "position", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["item", "annotator", "round"], name="one_assignment_per_item_round"
            )
        ]
        indexes = [
            # The open assignments in the order the queue serves them
            # (apps.annotations.selectors.assignment_next): the next one is the index's first
            # entry, whatever the annotator's queue holds. Partial, not led by completed_at:
            # PostgreSQL does not take ``completed_at IS NULL`` for an equality, so an index on
            # (..., completed_at, skip_count, ...) gave it no order and it sorted every open
            # assignment of the annotator on each answer (3.3 ms for 2,000; 0.1 ms now).
            models.Index(
                fields=["study", "annotator", "skip_count", "-extra", "position", "round", "id"],
                condition=models.Q(completed_at__isnull=True),
                name="assignment_open_queue_idx",
            ),
            # The answered ones, latest last (the undo's latest answer, read backwards). Partial:
            # with planner statistics of finished assignments (each its own completed_at, as
            # after an import's ANALYZE), SQLite took ``completed_at IS NULL`` for a selective
            # equality on an index holding every assignment and served the next item through
            # it, sorting the annotator's open assignments on every answer.
            models.Index(
                fields=["study", "annotator", "completed_at", "id"],
                condition=models.Q(completed_at__isnull=False),
                name="assignment_answered_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.annotator} → {self.item} (round {self.round})"


class AnnotatorProgress(models.Model):
    """How many of one annotator's assignments in a study there are (``total``) and how many
    are answered (``done``: ``completed_at`` set): the queue's progress, read in one row.

    Kept by the database itself: triggers on the assignments' table (migration
    ``0006_annotator_progress``) add and subtract on every insert, delete and update of an
    assignment, whichever path writes it (a service, ``bulk_create`` skipping conflicts, a
    queryset ``update``, a cascading delete, a raw statement), in the writing transaction. A
    count of the assignments read them all on every answer (3 ms at 20,000 on PostgreSQL).
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    total = models.IntegerField(default=0)
    done = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "annotator"], name="one_progress_per_queue")
        ]

    def __str__(self) -> str:
        return f"{self.annotator} in {self.study}: {self.done}/{self.total}"


class Annotation(models.Model):
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="annotations")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="annotations")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="annotations"
    )
    round = models.PositiveSmallIntegerField(default=1)
    current_revision = models.OneToOneField(
        "Revision", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # The revision the live quality state reflects, and whether a newer one awaits analysis:
    # an outbox inside the row, written in the submit transaction, so no update is ever lost.
    analysed_revision = models.ForeignKey(
        "Revision", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    analysis_pending = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["question", "item", "annotator", "round"],
                name="one_annotation_per_question_item_round",
            )
        ]
        indexes = [
            models.Index(
                fields=["question"],
                condition=models.Q(analysis_pending=True),
                name="annotation_analysis_pending",
            ),
            models.Index(fields=["question", "item"], name="annotation_question_item"),
        ]

    def __str__(self) -> str:
        return f"{self.annotator} on {self.item} / {self.question.key} (round {self.round})"


class Revision(models.Model):
    """One immutable version of an annotation. ``value`` is ``None`` for a retraction (undo)."""

    class Source(models.TextChoices):
        UI = "ui", "Web page"
        API = "api", "REST API"
        IMPORT = "import", "Import"

    annotation = models.ForeignKey(Annotation, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    value = models.JSONField(null=True)
    label = models.ForeignKey(
        Label, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    time_spent_ms = models.PositiveIntegerField(null=True, blank=True)
    idempotency_key = models.UUIDField()
    source = models.CharField(max_length=6, choices=Source.choices, default=Source.UI)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["annotation_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["annotation", "number"], name="revision_number_unique"),
            models.UniqueConstraint(
                fields=["annotation", "idempotency_key"], name="revision_idempotency_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"revision {self.number} of annotation {self.annotation_id}"

    @property
    def is_retraction(self) -> bool:
        return self.value is None


class QueueOrder(models.Model):
    """The order a study's label queue is in, as last applied (issue 28).

    A categorical question may ask for an *active* order of the queue
    (``Question.settings["queue_order"]``): by a model run's uncertainty or by the predicted
    disagreement. :func:`apps.annotations.ordering.queue_order_apply` reorders the open
    assignments off the request path and records here what it did, which the question's page
    shows: the order in force, or why it fell back to the natural order. ``requested_at`` is
    an outbox (set when an input of the order changed, cleared when it is applied), so a
    request is not lost in the ``worker`` mode of the quality pipeline.
    """

    class Mode(models.TextChoices):
        NATURAL = "natural", "Natural order"
        UNCERTAINTY = "uncertainty", "Model uncertainty (entropy), highest first"
        DISAGREEMENT = "disagreement", "Predicted disagreement, highest first"

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="queue_order")
    question = models.ForeignKey(
        Question, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    mode = models.CharField(max_length=12, choices=Mode.choices, default=Mode.NATURAL)
    asked = models.CharField(
        max_length=12, choices=Mode.choices, default=Mode.NATURAL, help_text="As set."
    )
    fallback = models.CharField(max_length=200, blank=True, help_text="Why the order is natural.")
    n_ordered = models.PositiveIntegerField(default=0, help_text="Items served by score.")
    n_natural = models.PositiveIntegerField(default=0, help_text="Items in the randomised share.")
    n_unscored = models.PositiveIntegerField(default=0, help_text="Items without a score yet.")
    requested_at = models.DateTimeField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.study}: {self.get_mode_display()}"
