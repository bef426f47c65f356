"""Studies, their questions and answer scales, and who takes part in them."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from apps.studies.kinds import kind_choices


class Study(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        RUNNING = "running", "Running"
        CLOSED = "closed", "Closed"

    name = models.CharField(max_length=200)
    instructions = models.TextField(blank=True, help_text="Markdown; rendered safely.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    overlap = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Annotators per item (k). Empty: every annotator labels every item.",
    )
    repeat_rate = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of items shown again later to the same annotator (test-retest).",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="created_studies"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Raised (in the database, never by a save of this row) whenever a question, label or
    # adaptive-overlap rule of the study is written: the key of the per-process cache of the
    # study's questions (apps.studies.selectors.study_questions_cached).
    questions_version = models.PositiveIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "studies"
        permissions = [("manage_studies", "Can create and manage studies")]

    def __str__(self) -> str:
        return self.name

    @property
    def is_running(self) -> bool:
        return self.status == self.Status.RUNNING


class Membership(models.Model):
    """A user's role in one study: managers run it, annotators label it, reviewers read the
    answers and adjudicate disputed items (apps.adjudication) but cannot change the study."""

    class Role(models.TextChoices):
        MANAGER = "manager", "Manager"
        ANNOTATOR = "annotator", "Annotator"
        REVIEWER = "reviewer", "Reviewer"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices)
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "user"], name="one_role_per_study_and_user")
        ]
        ordering = ["study_id", "role", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} — {self.role} of {self.study}"


class Question(models.Model):
    """One thing asked about each item; its kind decides how it is answered and analysed."""

    class Kind(models.TextChoices):
        """The built-in kinds' names; ``kind`` accepts every registered kind
        (``settings.QUESTION_KINDS``, :mod:`apps.studies.kinds`)."""

        CATEGORICAL = "categorical", "Categorical labels"
        CONTINUOUS = "continuous", "Continuous slider trace"
        PAIRWISE = "pairwise", "Pairwise preference"
        ARENA = "arena", "Model arena"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="questions")
    key = models.SlugField(
        max_length=50, help_text="Stable identifier used in imports and exports."
    )
    prompt = models.CharField(max_length=500)
    kind = models.CharField(max_length=12, choices=kind_choices, default=Kind.CATEGORICAL)
    ordered = models.BooleanField(
        default=False, help_text="Labels form an ordered (ordinal / Likert) scale."
    )
    position = models.PositiveIntegerField(default=0)
    settings = models.JSONField(
        default=dict, blank=True, help_text="Kind-specific settings (continuous, pairwise)."
    )
    scope = models.JSONField(
        default=dict,
        blank=True,
        help_text="The items the question applies to (apps.studies.scope): item kinds, "
        "metadata tags, external ids; empty: every item.",
    )
    instructions = models.TextField(
        blank=True,
        help_text="Markdown shown on this question's pages (the study's when empty).",
    )

    class Meta:
        ordering = ["study_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "key"], name="question_key_unique_in_study")
        ]

    def __str__(self) -> str:
        return f"{self.study}: {self.key}"


# Keys the annotator queue keeps for itself (skip, undo); labels may not use them as shortcuts.
RESERVED_SHORTCUTS = frozenset({"s", "u"})


def shortcut_problem(shortcut: str) -> str | None:
    """Why ``shortcut`` cannot be a label's key on the queue, or ``None`` if it can."""
    if shortcut and not shortcut.isprintable():
        return "Use a printable key."
    if shortcut.lower() in RESERVED_SHORTCUTS:
        return f"{shortcut!r} is kept for skip (s) and undo (u)."
    return None


class Label(models.Model):
    """One answer of a categorical scale, with its shortcut key and optional AAD coordinates."""

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="labels")
    key = models.SlugField(max_length=50)
    name = models.CharField(max_length=100)
    shortcut = models.CharField(max_length=1, blank=True)
    position = models.PositiveIntegerField(default=0)
    valence = models.FloatField(null=True, blank=True)
    arousal = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["question_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["question", "key"], name="label_key_unique"),
            models.UniqueConstraint(
                fields=["question", "shortcut"],
                condition=~models.Q(shortcut=""),
                name="label_shortcut_unique",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if (self.valence is None) != (self.arousal is None):
            raise ValidationError("Give both valence and arousal, or neither.")
        if problem := shortcut_problem(self.shortcut):
            raise ValidationError({"shortcut": problem})
