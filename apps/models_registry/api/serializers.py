"""Serializers of model runs (registering one from uploads, reading its figures) and of model
endpoints (their configuration, never the key, and their status)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.models_registry.models import EndpointCall, ModelEndpoint, ModelRun, ModelRunEvaluation
from apps.models_registry.selectors import endpoint_status


class ModelRunCreateSerializer(serializers.Serializer):
    """A run to register: names, the question, and its files (format from the extension)."""

    question = serializers.SlugField(
        help_text="Key of a categorical or continuous question of the study."
    )
    name = serializers.CharField(max_length=200)
    version = serializers.CharField(max_length=100)
    metadata = serializers.JSONField(
        required=False, binary=True, help_text="A JSON object (free: hyperparameters, commit...)."
    )
    predictions = serializers.FileField(
        help_text="item, annotator and label (categorical) or trace (continuous) per row "
        "(.csv, .jsonl/.ndjson or .npz)."
    )
    features = serializers.FileField(
        required=False, help_text="annotator, vector[, item]: feature vectors (feature-level BAE)."
    )
    attention = serializers.FileField(
        required=False,
        help_text="annotator, vector[, item]: attention over regions/frames (region-level BAE).",
    )

    def validate_metadata(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise serializers.ValidationError("Give a JSON object.")
        return value


class BaselinesSerializer(serializers.Serializer):
    dic_random = serializers.FloatField(allow_null=True)
    dic_consensus = serializers.FloatField(allow_null=True)
    bae_random = serializers.FloatField(allow_null=True)
    bae_uniform = serializers.FloatField(allow_null=True)


INTERVAL_FIELD = serializers.ListField(
    child=serializers.FloatField(), min_length=2, max_length=2, allow_null=True
)
INTERVAL_HELP = (
    "95 % percentile interval [low, high] from a bootstrap over the `n_items` items "
    "(null for evaluations made before intervals existed, or with too little data)."
)


class EvaluationSerializer(serializers.ModelSerializer):
    """The headline figures of one evaluation (matrices and maps stay on the run page)."""

    dic = serializers.SerializerMethodField(help_text="Zhang et al. Eq. 3; lower is better.")
    dic_interval = serializers.SerializerMethodField(help_text=f"Of `dic`: {INTERVAL_HELP}")
    bae_feature = serializers.SerializerMethodField(
        help_text="Eq. 7 on features; higher is better."
    )
    bae_feature_interval = serializers.SerializerMethodField(
        help_text=f"Of `bae_feature` (the model's vectors held fixed): {INTERVAL_HELP}"
    )
    bae_region = serializers.SerializerMethodField(help_text="Eq. 7 on attention vectors.")
    bae_region_interval = serializers.SerializerMethodField(
        help_text=f"Of `bae_region` (the model's vectors held fixed): {INTERVAL_HELP}"
    )
    n_items = serializers.SerializerMethodField(
        help_text="Items with at least one (annotator, item) cell labelled and predicted: "
        "the units the intervals resample."
    )
    n_cells = serializers.SerializerMethodField(
        help_text="(annotator, item) cells with both a human answer and a prediction."
    )
    accuracy_mean = serializers.SerializerMethodField(help_text="Categorical questions only.")
    accuracy_mean_interval = serializers.SerializerMethodField(
        help_text=f"Of `accuracy_mean`: {INTERVAL_HELP}"
    )
    accuracy = serializers.SerializerMethodField(help_text="Per annotator, in `annotators` order.")
    accuracy_interval = serializers.SerializerMethodField(
        help_text="Per annotator, in `annotators` order: 95 % Wilson interval [low, high] of "
        "`accuracy` over the `accuracy_n` items compared (null where none were, and for "
        "evaluations made before these intervals existed: then the list is empty)."
    )
    accuracy_n = serializers.SerializerMethodField(
        help_text="Per annotator, in `annotators` order: items where the annotator's label and "
        "the prediction were compared (empty for older evaluations)."
    )
    fleiss_kappa = serializers.SerializerMethodField(help_text="Fleiss' kappa of the predictions.")
    fleiss_kappa_interval = serializers.SerializerMethodField(
        help_text="Of `fleiss_kappa`: 95 % percentile interval [low, high] from a bootstrap over "
        "the `fleiss_n_items` items with two or more predictions (null for older evaluations, "
        "traces, or too little data)."
    )
    fleiss_n_items = serializers.SerializerMethodField(
        help_text="Items with two or more predictions: the units `fleiss_kappa_interval` resamples."
    )
    pearson_mean = serializers.SerializerMethodField(help_text="Ordered scales and traces.")
    annotators = serializers.SerializerMethodField(help_text="Annotator user ids.")
    baselines = serializers.SerializerMethodField()

    class Meta:
        model = ModelRunEvaluation
        fields = [
            "id",
            "computed_at",
            "n_annotations",
            "dic",
            "dic_interval",
            "bae_feature",
            "bae_feature_interval",
            "bae_region",
            "bae_region_interval",
            "n_items",
            "n_cells",
            "accuracy_mean",
            "accuracy_mean_interval",
            "accuracy",
            "accuracy_interval",
            "accuracy_n",
            "fleiss_kappa",
            "fleiss_kappa_interval",
            "fleiss_n_items",
            "pearson_mean",
            "annotators",
            "baselines",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_dic(self, obj: ModelRunEvaluation) -> float | None:
        return obj.figures.get("dic")

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_bae_feature(self, obj: ModelRunEvaluation) -> float | None:
        return obj.figures.get("bae", {}).get("feature")

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_bae_region(self, obj: ModelRunEvaluation) -> float | None:
        return obj.figures.get("bae", {}).get("attention")

    @extend_schema_field(INTERVAL_FIELD)
    def get_dic_interval(self, obj: ModelRunEvaluation) -> list[float] | None:
        return obj.figures.get("dic_interval")

    @extend_schema_field(INTERVAL_FIELD)
    def get_bae_feature_interval(self, obj: ModelRunEvaluation) -> list[float] | None:
        return obj.figures.get("bae_interval", {}).get("feature")

    @extend_schema_field(INTERVAL_FIELD)
    def get_bae_region_interval(self, obj: ModelRunEvaluation) -> list[float] | None:
        return obj.figures.get("bae_interval", {}).get("attention")

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_n_items(self, obj: ModelRunEvaluation) -> int | None:
        return obj.figures.get("n_items")

    @extend_schema_field(serializers.IntegerField())
    def get_n_cells(self, obj: ModelRunEvaluation) -> int:
        return int(obj.figures.get("n_cells", 0))

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_accuracy_mean(self, obj: ModelRunEvaluation) -> float | None:
        return obj.figures.get("accuracy_mean")

    @extend_schema_field(serializers.ListField(child=serializers.FloatField(allow_null=True)))
    def get_accuracy(self, obj: ModelRunEvaluation) -> list[float | None]:
        return obj.figures.get("accuracy", [])

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_fleiss_kappa(self, obj: ModelRunEvaluation) -> float | None:
        return obj.figures.get("fleiss_pred")

    @extend_schema_field(INTERVAL_FIELD)
    def get_fleiss_kappa_interval(self, obj: ModelRunEvaluation) -> list[float] | None:
        return obj.figures.get("fleiss_pred_interval")

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_fleiss_n_items(self, obj: ModelRunEvaluation) -> int | None:
        return obj.figures.get("fleiss_n_items")

    @extend_schema_field(INTERVAL_FIELD)
    def get_accuracy_mean_interval(self, obj: ModelRunEvaluation) -> list[float] | None:
        return obj.figures.get("accuracy_mean_interval")

    @extend_schema_field(serializers.ListField(child=INTERVAL_FIELD))
    def get_accuracy_interval(self, obj: ModelRunEvaluation) -> list[list[float] | None]:
        return obj.figures.get("accuracy_interval") or []

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_accuracy_n(self, obj: ModelRunEvaluation) -> list[int]:
        return obj.figures.get("accuracy_n") or []

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_pearson_mean(self, obj: ModelRunEvaluation) -> float | None:
        return obj.figures.get("pearson_mean")

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_annotators(self, obj: ModelRunEvaluation) -> list[int]:
        return obj.figures.get("annotators", [])

    @extend_schema_field(BaselinesSerializer(allow_null=True))
    def get_baselines(self, obj: ModelRunEvaluation) -> dict[str, float | None] | None:
        return obj.figures.get("baselines")


class ModelRunSerializer(serializers.ModelSerializer):
    """A run with its latest evaluation."""

    question = serializers.SlugRelatedField(slug_field="key", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    evaluating = serializers.BooleanField(
        read_only=True,
        help_text="An evaluation is pending or running in the background; `evaluation` is "
        "the previous one (null if none) until it is done.",
    )
    evaluation = serializers.SerializerMethodField()

    class Meta:
        model = ModelRun
        fields = [
            "id",
            "question",
            "name",
            "version",
            "metadata",
            "created_by",
            "created_at",
            "evaluating",
            "evaluation",
        ]
        read_only_fields = fields

    @extend_schema_field(EvaluationSerializer(allow_null=True))
    def get_evaluation(self, obj: ModelRun) -> dict[str, Any] | None:
        latest = obj.evaluations.order_by("-computed_at", "-id").first()
        return EvaluationSerializer(latest).data if latest else None


class EndpointWriteSerializer(serializers.Serializer):
    """A model endpoint's configuration; ``api_key`` is write-only (never sent back)."""

    question = serializers.SlugField(help_text="Key of a categorical question of the study.")
    kind = serializers.ChoiceField(
        choices=ModelEndpoint.Kind.choices,
        help_text="`openai`: an OpenAI-compatible chat-completions URL; `json`: a plain JSON POST "
        '(`{"item": {...}, "labels": [...]}` answered by `{"label": ..., "probabilities": '
        "{...}}`).",
    )
    url = serializers.CharField(max_length=1000, help_text="http:// or https:// only.")
    model = serializers.CharField(
        max_length=200, help_text="Model name (sent to chat completions); names the run."
    )
    version = serializers.CharField(max_length=100, required=False, default="1")
    api_key = serializers.CharField(
        max_length=500,
        required=False,
        allow_blank=True,
        write_only=True,
        help_text="Sent as `Authorization: Bearer ...`; stored, never returned. Omit to keep "
        'the stored key, `""` to remove it.',
    )
    api_key_env = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        default="",
        help_text="Name of an environment variable of the server holding the key (instead of "
        "`api_key`).",
    )
    timeout = serializers.FloatField(required=False, default=10.0, help_text="Seconds per call.")
    retries = serializers.IntegerField(
        required=False,
        default=2,
        help_text="Retries of a call that timed out, could not "
        "connect or got a 429/5xx, with a doubling back-off.",
    )
    max_calls = serializers.IntegerField(
        required=False,
        default=1000,
        help_text="Call budget: HTTP requests (retries included) allowed in all.",
    )
    logprobs = serializers.BooleanField(
        required=False,
        default=False,
        help_text="`openai` format: send `logprobs: true, top_logprobs: <labels>` and store "
        "the label tokens' probabilities (renormalised over the labels found).",
    )


class EndpointFailureSerializer(serializers.Serializer):
    reason = serializers.CharField(help_text="`timed out`, `HTTP 500`, `malformed answer`...")
    outcome = serializers.CharField()
    http_status = serializers.IntegerField(allow_null=True)
    n_items = serializers.IntegerField(help_text="Items whose latest call ended so.")
    example = serializers.CharField(help_text="The detail of one of those calls.")


class EndpointCallSerializer(serializers.ModelSerializer):
    item = serializers.SlugRelatedField(slug_field="external_id", read_only=True)

    class Meta:
        model = EndpointCall
        fields = ["item", "attempt", "outcome", "http_status", "detail", "seconds", "at"]
        read_only_fields = fields


class EndpointStatusSerializer(serializers.Serializer):
    n_items = serializers.IntegerField(help_text="Items the question applies to.")
    predicted = serializers.IntegerField(help_text="Items the run has a label for.")
    failed = serializers.IntegerField(help_text="Items whose calls failed (no label).")
    waiting = serializers.IntegerField(help_text="Items not asked about yet.")
    budget_spent = serializers.BooleanField(
        help_text="No call left and items without a label: raise `max_calls` to go on."
    )
    failures = EndpointFailureSerializer(many=True)
    last_call = EndpointCallSerializer(allow_null=True)


class EndpointSerializer(serializers.ModelSerializer):
    """A model endpoint as managers read it: its configuration (no key), budget and status."""

    question = serializers.SlugRelatedField(slug_field="key", read_only=True)
    api_key_set = serializers.SerializerMethodField(
        help_text="Whether a key is stored (the key itself is never returned)."
    )
    budget_left = serializers.IntegerField(read_only=True)
    predicting = serializers.BooleanField(
        read_only=True, help_text="Calls are asked for or running in the background."
    )
    status = serializers.SerializerMethodField()

    class Meta:
        model = ModelEndpoint
        fields = [
            "id",
            "question",
            "kind",
            "url",
            "model",
            "version",
            "api_key_set",
            "api_key_env",
            "timeout",
            "retries",
            "max_calls",
            "logprobs",
            "calls_made",
            "budget_left",
            "run",
            "predicting",
            "updated_at",
            "status",
        ]
        read_only_fields = fields

    def get_api_key_set(self, obj: ModelEndpoint) -> bool:
        return bool(obj.api_key)

    @extend_schema_field(EndpointStatusSerializer)
    def get_status(self, obj: ModelEndpoint) -> dict[str, Any]:
        found = endpoint_status(endpoint=obj)
        return EndpointStatusSerializer(
            {
                "n_items": found.n_items,
                "predicted": found.predicted,
                "failed": found.failed,
                "waiting": found.waiting,
                "budget_spent": found.budget_spent,
                "failures": found.failures,
                "last_call": found.last_call,
            }
        ).data
