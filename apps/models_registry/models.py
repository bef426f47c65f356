"""Registered model runs: per-annotator predictions, mean explanation vectors, evaluations.

A :class:`ModelRun` is one version of an annotator-specific model ("individual tendency
learning", Zhang et al. 2025) evaluated on one question: it predicts, for an item and an
annotator, the label that annotator would give (categorical question, :class:`Prediction`) or
the trace they would record (continuous question, :class:`TracePrediction`). Its optional
feature and attention vectors are stored already averaged per annotator (Eqs. 5-6 only need
the mean), as float32.
Evaluations are appended, never overwritten, so a run's figures keep their history.
"""

from __future__ import annotations

import numpy as np
from django.conf import settings
from django.db import models
from numpy.typing import NDArray

from apps.continuous.models import VALUE_DTYPE, pack, unpack
from apps.items.models import Item
from apps.studies.models import Label, Question, Study


class ModelRun(models.Model):
    """One registered version of a model's outputs for one question."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="model_runs")
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="model_runs")
    name = models.CharField(max_length=200)
    version = models.CharField(max_length=100)
    metadata = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="model_runs"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # The evaluation outbox (apps/models_registry/services.py): set when an evaluation is asked
    # for (registration, Recompute), cleared when a background evaluation claims the run.
    evaluation_requested_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Set while an evaluation runs; a claim older than EVALUATION_TIMEOUT counts as abandoned.
    evaluation_started_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["question_id", "-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["question", "name", "version"], name="model_run_version_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.version}"

    @property
    def evaluating(self) -> bool:
        """Whether an evaluation is asked for or running (the pages say "evaluating…")."""
        return self.evaluation_requested_at is not None or self.evaluation_started_at is not None


class Prediction(models.Model):
    """f(x_i, k): the label the model predicts annotator k gives item i."""

    run = models.ForeignKey(ModelRun, on_delete=models.CASCADE, related_name="predictions")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    label = models.ForeignKey(Label, on_delete=models.CASCADE, related_name="+")

    class Meta:
        ordering = ["run_id", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "item", "annotator"], name="one_prediction_per_item_annotator"
            )
        ]

    def __str__(self) -> str:
        return f"prediction of run {self.run_id} for item {self.item_id}, user {self.annotator_id}"


class ItemPrediction(models.Model):
    """A model's label for an item, the same for every annotator, with its probabilities.

    What a general model (a classifier, a model endpoint) says of an item, as opposed to the
    annotator-specific :class:`Prediction`. ``probabilities`` maps each label key of the question
    to the model's probability (absent when the model gives only a label); the queue's active
    order reads their entropy, the suggestions read ``label``.
    """

    run = models.ForeignKey(ModelRun, on_delete=models.CASCADE, related_name="item_predictions")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    label = models.ForeignKey(Label, on_delete=models.CASCADE, related_name="+")
    probabilities = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["run_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "item"], name="one_item_prediction_per_item")
        ]

    def __str__(self) -> str:
        return f"item prediction of run {self.run_id} for item {self.item_id}"


class TracePrediction(models.Model):
    """f(x_i, k) of a continuous question: the trace the model predicts annotator k records
    for item i, at the question's analysis rate."""

    run = models.ForeignKey(ModelRun, on_delete=models.CASCADE, related_name="trace_predictions")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    values = models.BinaryField(help_text="float32 little-endian samples.")
    n_samples = models.PositiveIntegerField()

    class Meta:
        ordering = ["run_id", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "item", "annotator"], name="one_trace_prediction_per_cell"
            )
        ]

    def __str__(self) -> str:
        return f"trace of run {self.run_id} for item {self.item_id}, user {self.annotator_id}"

    def array(self) -> NDArray[np.float64]:
        return unpack(self.values, VALUE_DTYPE)


class AnnotatorVector(models.Model):
    """An annotator's mean feature (Eq. 5) or mean attention (Eq. 6) vector in one run."""

    class Kind(models.TextChoices):
        FEATURE = "feature", "Feature"
        ATTENTION = "attention", "Attention over regions/frames"

    run = models.ForeignKey(ModelRun, on_delete=models.CASCADE, related_name="vectors")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    kind = models.CharField(max_length=9, choices=Kind.choices)
    values = models.BinaryField(help_text="float32 little-endian mean vector.")
    dim = models.PositiveIntegerField()
    n_items = models.PositiveIntegerField(
        help_text="Per-item vectors averaged; 0 when the upload was already averaged."
    )

    class Meta:
        ordering = ["run_id", "kind", "annotator_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "annotator", "kind"], name="one_vector_per_run_annotator_kind"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} vector of user {self.annotator_id} in run {self.run_id}"

    @staticmethod
    def packed(vector: NDArray[np.float64]) -> bytes:
        """Bytes stored in :attr:`values` for a vector."""
        return pack(vector, VALUE_DTYPE)

    def array(self) -> NDArray[np.float64]:
        """The stored vector as float64."""
        return unpack(self.values, VALUE_DTYPE)


class ModelRunEvaluation(models.Model):
    """DIC, BAE, traditional metrics and reference rows of a run at one moment.

    ``n_annotations`` and ``fingerprint`` describe the human answers the figures were computed
    from, so a recompute can tell when nothing changed.
    """

    run = models.ForeignKey(ModelRun, on_delete=models.CASCADE, related_name="evaluations")
    computed_at = models.DateTimeField(auto_now_add=True)
    n_annotations = models.PositiveIntegerField()
    fingerprint = models.CharField(max_length=64, blank=True)
    figures = models.JSONField(default=dict)

    class Meta:
        ordering = ["run_id", "-computed_at", "-id"]
        get_latest_by = ["computed_at", "id"]

    def __str__(self) -> str:
        return f"evaluation of {self.run} at {self.computed_at:%Y-%m-%d %H:%M}"


class Suggestion(models.Model):
    """What the annotator's page did with a model's suggestion for one answer (issue 28).

    One row per revision answered on a queue page whose question suggests from a model run
    (``Question.settings["suggestion_run"]``): the run's label for the item and whether it was
    ``shown`` (``False``: the item was held out for this annotator, so the label was withheld
    and the answer measures agreement with the model without its influence). Written with the
    revision, never changed (a deleted run leaves ``run`` empty and the record in place).
    """

    revision = models.OneToOneField(
        "annotations.Revision", on_delete=models.CASCADE, related_name="suggestion"
    )
    run = models.ForeignKey(
        ModelRun, on_delete=models.SET_NULL, null=True, blank=True, related_name="suggestions"
    )
    label = models.ForeignKey(Label, on_delete=models.PROTECT, related_name="+")
    shown = models.BooleanField()

    class Meta:
        ordering = ["revision_id"]

    def __str__(self) -> str:
        state = "shown" if self.shown else "held out"
        return f"suggestion {self.label_id} ({state}) for revision {self.revision_id}"


class ModelEndpoint(models.Model):
    """A categorical question's HTTP model endpoint, called off the request path (issue 28).

    The endpoint's labels fill :class:`ItemPrediction` rows of ``run`` (a :class:`ModelRun`
    named after ``model`` and ``version``), which a question can suggest from
    (``settings["suggestion_run"]``) like any run. ``api_key`` is write-only: no page or API
    response renders it back (``api_key_env`` names an environment variable instead).
    ``calls_made`` counts every HTTP request (retries included) against ``max_calls``.
    ``requested_at`` / ``started_at`` are the outbox and the claim of the background job
    (:func:`apps.models_registry.services.model_endpoint_predict_pending`), like a run's
    evaluation.
    """

    class Kind(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible chat completions"
        JSON = "json", "Plain JSON"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="model_endpoints")
    question = models.OneToOneField(
        Question, on_delete=models.CASCADE, related_name="model_endpoint"
    )
    kind = models.CharField(max_length=6, choices=Kind.choices, default=Kind.JSON)
    url = models.URLField(max_length=1000)
    model = models.CharField(
        max_length=200, help_text="Model name: sent to chat completions; names the run."
    )
    version = models.CharField(max_length=100, default="1")
    api_key = models.CharField(max_length=500, blank=True)
    api_key_env = models.CharField(max_length=100, blank=True)
    timeout = models.FloatField(default=10.0)
    retries = models.PositiveSmallIntegerField(default=2)
    max_calls = models.PositiveIntegerField(default=1000)
    logprobs = models.BooleanField(
        default=False,
        help_text="OpenAI format: ask for the label tokens' log-probabilities and store them as "
        "the label probabilities (some servers refuse the field).",
    )
    calls_made = models.PositiveIntegerField(default=0, editable=False)
    run = models.ForeignKey(
        ModelRun, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)
    requested_at = models.DateTimeField(null=True, blank=True, editable=False)
    started_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["question_id"]

    def __str__(self) -> str:
        return f"endpoint {self.model} {self.version} of question {self.question_id}"

    @property
    def budget_left(self) -> int:
        return max(0, self.max_calls - self.calls_made)

    @property
    def predicting(self) -> bool:
        """Whether predictions are asked for or being fetched."""
        return self.requested_at is not None or self.started_at is not None


class EndpointCall(models.Model):
    """One HTTP request to a model endpoint for one item, and how it went."""

    class Outcome(models.TextChoices):
        OK = "ok", "ok"
        TIMEOUT = "timeout", "timed out"
        HTTP = "http", "HTTP error"
        MALFORMED = "malformed", "malformed answer"
        UNREACHABLE = "unreachable", "unreachable"
        REFUSED = "refused", "refused (address not allowed)"

    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.CASCADE, related_name="calls")
    run = models.ForeignKey(ModelRun, on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    attempt = models.PositiveSmallIntegerField(help_text="1 for the first try, 2+ for retries.")
    outcome = models.CharField(max_length=11, choices=Outcome.choices)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    detail = models.CharField(max_length=300, blank=True)
    seconds = models.FloatField()
    at = models.DateTimeField()

    class Meta:
        ordering = ["endpoint_id", "id"]
        indexes = [models.Index(fields=["run", "item"], name="endpoint_call_run_item")]

    def __str__(self) -> str:
        return f"call {self.attempt} of {self.endpoint_id} for item {self.item_id}: {self.outcome}"
