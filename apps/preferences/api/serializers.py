"""Serializers of pairwise preferences: they parse and render, the services decide."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.items.api.serializers import ItemSerializer
from apps.items.models import Item
from apps.preferences.models import Judgement
from apps.studies.models import Question
from apps.studies.selectors import studies_for_user
from core.limits import id_filter_field, time_spent_field


class NextPairSerializer(serializers.Serializer):
    """The pair to judge: show ``item_a`` on the left, ``item_b`` on the right."""

    item_a = ItemSerializer()
    item_b = ItemSerializer()
    remaining_estimate = serializers.IntegerField(help_text="About how many judgements are left.")
    strict = serializers.BooleanField(help_text="True: answer A or B only (no tie).")


class JudgementSerializer(serializers.ModelSerializer):
    """A judgement; to a recruited participant (``context["participant"]``) without its
    ``phase``, which would tell a hidden attention check (phase ``check``) from other pairs."""

    retracted = serializers.SerializerMethodField(
        help_text="Undone by the annotator (the judgement stays, out of every computation)."
    )
    phase = serializers.ChoiceField(
        choices=Judgement.Phase.choices,
        allow_null=True,
        read_only=True,
        help_text="The scheduler's step the pair was asked for, or check: a hidden attention "
        "check (a gold pair; no data). Null to recruited participants.",
    )

    def get_retracted(self, judgement: Judgement) -> bool:
        return hasattr(judgement, "retraction")

    def to_representation(self, instance: Judgement) -> dict[str, Any]:
        data = super().to_representation(instance)
        if self.context.get("participant"):
            data["phase"] = None
        return data

    class Meta:
        model = Judgement
        fields = [
            "id",
            "question",
            "annotator",
            "sequence",
            "item_a",
            "item_b",
            "outcome",
            "phase",
            "contradicts",
            "time_spent_ms",
            "side_a",
            "retracted",
            "idempotency_key",
            "created_at",
        ]
        read_only_fields = fields


class PairwiseQuestionField(serializers.PrimaryKeyRelatedField):
    """The id of a pairwise question of one of the requesting user's studies.

    Questions of other studies read as "does not exist": ids never reveal other studies.
    """

    def get_queryset(self) -> Any:
        return Question.objects.filter(
            kind=Question.Kind.PAIRWISE,
            study__in=studies_for_user(user=self.context["request"].user),
        ).select_related("study")


class JudgementCreateSerializer(serializers.Serializer):
    question = PairwiseQuestionField(
        queryset=Question.objects.all(), help_text="A pairwise question of one of your studies."
    )
    item_a = serializers.PrimaryKeyRelatedField(queryset=Item.objects.all())
    item_b = serializers.PrimaryKeyRelatedField(queryset=Item.objects.all())
    outcome = serializers.ChoiceField(
        choices=Judgement.Outcome.choices,
        help_text="1: item_a is better, -1: item_b is better, 0: equal (weak preference only).",
    )
    idempotency_key = serializers.UUIDField(
        help_text="Made by the client once per answer: resending it stores nothing new and "
        "returns the first judgement."
    )
    time_spent_ms = time_spent_field()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        study_id = attrs["question"].study_id
        errors = {
            name: "This item is not in the question's study."
            for name in ("item_a", "item_b")
            if attrs[name].study_id != study_id
        }
        if not errors and attrs["item_a"] == attrs["item_b"]:
            errors["item_b"] = "Compare two different items."
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class JudgementUndoSerializer(serializers.Serializer):
    judgement = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="The judgement to undo, which must be your latest one kept; resending an id "
        "already undone undoes nothing more. Default: your latest judgement.",
    )


class JudgementFilterSerializer(serializers.Serializer):
    study = id_filter_field("A study id.")
    question = id_filter_field("A question id.")


class AnnotatorConsistencySerializer(serializers.Serializer):
    username = serializers.CharField()
    n_items = serializers.IntegerField()
    asked = serializers.IntegerField(help_text="Judgements asked so far.")
    all_pairs = serializers.IntegerField(help_text="n(n-1)/2.")
    minimum = serializers.IntegerField(help_text="ceil(log2 n!), the fewest any sort needs.")
    remaining = serializers.IntegerField(help_text="About how many judgements are left.")
    kappa = serializers.FloatField(
        allow_null=True, help_text="Transitivity kappa (null before a complete triplet)."
    )
    complete_triplets = serializers.IntegerField(source="consistency.n_complete")
    contradictions = serializers.IntegerField()
    pruning = serializers.BooleanField(
        help_text="False once the annotator fell below the floor (new sessions then stop early)."
    )
    flagged = serializers.BooleanField(
        help_text="The manager is warned: below the floor, kappa under it, or noisy answers."
    )
    error_rate = serializers.FloatField(
        help_text="Share of failed checks (triplets, re-asks): the scheduler's error estimate."
    )
    a_share = serializers.FloatField(
        allow_null=True,
        help_text="Share of decisive answers choosing the item shown as A (left); sides are "
        "random, so about 0.5 is expected (null: no decisive answer with a recorded side).",
    )
    side_bias = serializers.CharField(
        help_text='"left" or "right" when the A share differs from 0.5 (binomial p < 0.01).'
    )
    completed = serializers.BooleanField(help_text="The ranking is complete.")


class ItemScoreSerializer(serializers.Serializer):
    item = serializers.IntegerField(source="item.pk")
    external_id = serializers.CharField(source="item.external_id")
    rank = serializers.IntegerField(allow_null=True)
    bt_log_strength = serializers.FloatField(allow_null=True)
    bt_se = serializers.FloatField(allow_null=True)
    count_scores = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="Annotator -> Amidei count score (null: item not judged by them).",
    )
    absolute_scale = serializers.DictField(child=serializers.FloatField(allow_null=True))


class ScoresSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="Items in the score table (every page).")
    next = serializers.URLField(
        allow_null=True, help_text="The next page of items (null on the last one)."
    )
    previous = serializers.URLField(allow_null=True, help_text="The previous page of items.")
    bt_alpha = serializers.FloatField(
        help_text="Ridge penalty of the Bradley-Terry fit: 0, or small when the comparison "
        "graph is not strongly connected."
    )
    bt_se_exact = serializers.BooleanField(
        help_text="False when the standard errors are approximated (Gaussian belief "
        "propagation, over 2,000 items; within 2 % on random comparison graphs)."
    )
    n_judgements = serializers.IntegerField()
    weights = serializers.DictField(
        child=serializers.FloatField(),
        help_text="Annotator -> weight of their judgements in the pooled Bradley-Terry fit, "
        "(1 - 2e)^2 for their measured error rate e.",
    )
    items = ItemScoreSerializer(
        many=True, help_text="One page of the items, best first (by rank; unranked last)."
    )
    annotators = AnnotatorConsistencySerializer(many=True)
