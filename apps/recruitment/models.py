"""Recruited participants: a study's recruitment link, its participants, and gold answers.

A study opened to recruitment has one :class:`Recruitment` (the link's settings); everyone who
arrives through the link with a platform id (Prolific, MTurk, a panel's own id) becomes one
:class:`Participant`, unique per study and platform id, with a pseudonymous account that has no
password. :class:`GoldAnswer` holds a known answer for an item: ``training`` items are answered
with immediate feedback before the work, ``check`` items are mixed into the work unannounced.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from apps.items.models import Item
from apps.recruitment.questionnaire import questionnaire_validate
from apps.studies.models import Question, Study

PLATFORM_ID = RegexValidator(r"^[A-Za-z0-9_-]{1,64}\Z", "Use 1 to 64 letters, digits, '-' or '_'.")


def _link_token() -> str:
    return secrets.token_urlsafe(12)


class Platform(models.TextChoices):
    PROLIFIC = "prolific", "Prolific"
    MTURK = "mturk", "Amazon Mechanical Turk"
    GENERIC = "generic", "Own panel (pid parameter)"


class Recruitment(models.Model):
    """How a study takes participants from a recruitment link, and what they must pass."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="recruitment")
    token = models.CharField(max_length=32, unique=True, default=_link_token, editable=False)
    is_open = models.BooleanField(
        default=False, help_text="Accept new participants through the link."
    )
    platform = models.CharField(max_length=10, choices=Platform.choices, default=Platform.PROLIFIC)
    prolific_study_id = models.CharField(
        max_length=64,
        blank=True,
        validators=[PLATFORM_ID],
        help_text="Prolific's id of the study; when set, links naming another STUDY_ID are "
        "refused.",
    )
    completion_code = models.CharField(
        max_length=64,
        blank=True,
        validators=[PLATFORM_ID],
        help_text="Shown when the work is done.",
    )
    screen_out_code = models.CharField(
        max_length=64,
        blank=True,
        validators=[PLATFORM_ID],
        help_text="Shown to participants screened out by training or timed out.",
    )
    completion_url = models.URLField(
        max_length=500,
        blank=True,
        help_text="Where participants return afterwards; {code} is replaced by their code.",
    )
    items_per_participant = models.PositiveIntegerField(
        default=20, validators=[MinValueValidator(1)], help_text="Regular items in a package."
    )
    max_participants = models.PositiveIntegerField(
        default=50, validators=[MinValueValidator(1)], help_text="The link admits no more."
    )
    time_limit_minutes = models.PositiveIntegerField(
        default=60,
        validators=[MinValueValidator(1)],
        help_text="From the start of the package; unfinished items then go to others.",
    )
    check_rate = models.FloatField(
        default=0.1,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Attention-check items per regular item in a package.",
    )
    qualification_threshold = models.FloatField(
        default=0.8,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of training answers that must be right.",
    )
    trace_threshold = models.FloatField(
        default=0.3,
        validators=[MinValueValidator(-1.0), MaxValueValidator(1.0)],
        help_text="kappa_SDA with the true signal from which a training trace counts as right.",
    )
    attention_floor = models.FloatField(
        default=0.7,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Accuracy on attention checks below which a participant is flagged.",
    )
    consent_text = models.TextField(blank=True, help_text="Markdown; empty: no consent page.")
    questionnaire = models.JSONField(
        default=list,
        blank=True,
        validators=[questionnaire_validate],
        help_text="Pre-study questions: a JSON list of typed fields.",
    )

    def __str__(self) -> str:
        return f"recruitment of {self.study}"

    def clean(self) -> None:
        if self.completion_url and not self.completion_url.startswith("https://"):
            raise ValidationError({"completion_url": "Use an https:// address."})


class Participant(models.Model):
    """One person who arrived through the link, with their progress through the phases."""

    class Status(models.TextChoices):
        ARRIVED = "arrived", "Arrived"
        DECLINED = "declined", "Declined consent"
        CONSENTED = "consented", "Consented"
        TRAINING = "training", "In training"
        QUALIFIED = "qualified", "Qualified"
        SCREENED_OUT = "screened_out", "Screened out"
        WORKING = "working", "Working"
        TIMED_OUT = "timed_out", "Timed out"
        DONE = "done", "Done"
        EXPIRED = "expired", "Reservation expired"
        FULL = "full", "No work left"

    ENDED = (
        Status.DECLINED,
        Status.SCREENED_OUT,
        Status.TIMED_OUT,
        Status.DONE,
        Status.EXPIRED,
        Status.FULL,
    )
    WAITING = (Status.ARRIVED, Status.CONSENTED, Status.TRAINING, Status.QUALIFIED)
    """Admitted and not yet working: each will claim a package."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participants")
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="participation"
    )
    platform = models.CharField(max_length=10, choices=Platform.choices)
    platform_id = models.CharField(max_length=64, validators=[PLATFORM_ID])
    platform_study_id = models.CharField(max_length=64, blank=True)
    platform_session_id = models.CharField(max_length=64, blank=True)
    resume_hash = models.CharField(
        max_length=64,
        blank=True,
        help_text="SHA-256 of the resume code shown to the participant: another browser with "
        "the same platform id gets in only with it (or the same platform session id).",
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.ARRIVED)
    answers = models.JSONField(default=dict, blank=True, help_text="Pre-study questionnaire.")
    training_score = models.FloatField(null=True, blank=True)
    code_issued = models.CharField(max_length=64, blank=True)
    arrived_at = models.DateTimeField(auto_now_add=True)
    consented_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True, help_text="Package assigned.")
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study_id", "arrived_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "platform", "platform_id"], name="one_participant_per_platform_id"
            )
        ]

    def __str__(self) -> str:
        return f"{self.get_platform_display()} {self.platform_id} in {self.study}"

    @property
    def has_ended(self) -> bool:
        return self.status in self.ENDED


class GoldAnswer(models.Model):
    """The known answer to one question about one item, with the reason shown in feedback."""

    class Use(models.TextChoices):
        TRAINING = "training", "Training (with feedback)"
        CHECK = "check", "Attention check (hidden)"

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="gold_answers")
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="gold_answers")
    value = models.JSONField(help_text='The answer as the API stores it, e.g. {"label": "joy"}.')
    reason = models.TextField(blank=True)
    use = models.CharField(max_length=8, choices=Use.choices, default=Use.CHECK)

    class Meta:
        ordering = ["item__position", "item_id", "question__position"]
        constraints = [
            models.UniqueConstraint(
                fields=["item", "question"], name="one_gold_answer_per_question"
            )
        ]

    def __str__(self) -> str:
        return f"gold {self.value} for {self.item} / {self.question.key}"


class TrainingAnswer(models.Model):
    """A participant's answer to a training question; the first answer counts."""

    participant = models.ForeignKey(
        Participant, on_delete=models.CASCADE, related_name="training_answers"
    )
    gold = models.ForeignKey(GoldAnswer, on_delete=models.CASCADE, related_name="+")
    value = models.JSONField()
    correct = models.BooleanField()
    score = models.FloatField(
        null=True, blank=True, help_text="Traces: kappa_SDA with the true signal."
    )
    answered_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["participant_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["participant", "gold"], name="one_training_answer")
        ]

    def __str__(self) -> str:
        return f"training answer of {self.participant} to {self.gold}"
