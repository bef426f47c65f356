"""Serializers of the model arena: they parse and render, the services decide."""

from __future__ import annotations

from rest_framework import serializers

from apps.annotations.api.serializers import ProgressSerializer
from apps.preferences.models import Judgement
from core.limits import time_spent_field


class ArenaTaskSerializer(serializers.Serializer):
    """The pair to judge: the prompt and two responses, anonymised as A (left) and B (right)."""

    item = serializers.CharField(help_text="The prompt item's external id.")
    prompt = serializers.CharField(help_text="The prompt (the item's text).")
    response_a = serializers.CharField(help_text="The response to show as A (left).")
    response_b = serializers.CharField(help_text="The response to show as B (right).")
    ticket = serializers.CharField(
        help_text="Signed: which prompt and models were shown, and when. Send it back with "
        "the vote (``vote``)."
    )
    progress = ProgressSerializer()


class ArenaVoteCreateSerializer(serializers.Serializer):
    ticket = serializers.CharField(help_text="The ticket of the pair judged (from ``next``).")
    outcome = serializers.ChoiceField(
        choices=Judgement.Outcome.choices,  # the pairwise kind's outcomes, one enum
        help_text="1: A is better, -1: B is better, 0: a tie.",
    )
    idempotency_key = serializers.UUIDField(
        help_text="Made by the client once per vote: resending it stores nothing new and "
        "returns the first answer."
    )
    time_spent_ms = time_spent_field()


class ArenaVoteSerializer(serializers.Serializer):
    """A recorded vote, in the orientation shown (A is better: ``outcome`` 1)."""

    revision = serializers.IntegerField(help_text="The answer revision that added the vote.")
    item = serializers.CharField(help_text="The prompt item's external id.")
    outcome = serializers.IntegerField()
    votes_on_prompt = serializers.IntegerField(help_text="Your votes on this prompt so far.")
    created_at = serializers.DateTimeField()


class ModelRankSerializer(serializers.Serializer):
    model = serializers.CharField()
    rank = serializers.IntegerField()
    log_strength = serializers.FloatField()
    low = serializers.FloatField(help_text="95 % prompt-bootstrap interval of log_strength.")
    high = serializers.FloatField()
    rank_low = serializers.IntegerField()
    rank_high = serializers.IntegerField()
    p_best = serializers.FloatField()
    votes = serializers.IntegerField()
    wins = serializers.IntegerField()
    ties = serializers.IntegerField()
    losses = serializers.IntegerField()
    prompts = serializers.IntegerField()


class AnnotatorWeightSerializer(serializers.Serializer):
    username = serializers.CharField()
    votes = serializers.IntegerField()
    weight = serializers.FloatField()
    measured = serializers.BooleanField()


class ArenaRankingSerializer(serializers.Serializer):
    n_votes = serializers.IntegerField()
    n_prompts = serializers.IntegerField(help_text="Prompts with at least one vote.")
    n_boot = serializers.IntegerField(help_text="Bootstrap replicates over prompts.")
    models = ModelRankSerializer(many=True)
    unvoted = serializers.ListField(child=serializers.CharField())
    annotators = AnnotatorWeightSerializer(many=True)
