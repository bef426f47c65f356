"""API of the model arena: an annotator's next pair and votes, the managers' ranking."""

from __future__ import annotations

from dataclasses import asdict

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.generics import get_object_or_404
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from apps.annotations.models import Revision
from apps.arena.api.serializers import (
    ArenaRankingSerializer,
    ArenaTaskSerializer,
    ArenaVoteCreateSerializer,
    ArenaVoteSerializer,
)
from apps.arena.forms import VoteForm
from apps.arena.models import item_responses
from apps.arena.selectors import arena_questions, arena_results, arena_state, votes_of
from apps.arena.services import arena_vote_record
from apps.studies.api.permissions import STUDY_PK, InStudyMixin, IsStudyAnnotator, IsStudyManager
from apps.studies.models import Question

QUESTION_KEY = OpenApiParameter(
    "question_key",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="The key of an arena question of the study.",
)


@extend_schema(parameters=[STUDY_PK, QUESTION_KEY])
class StudyArenaViewSet(InStudyMixin, GenericViewSet):
    """Per arena question of a study: an annotator's next pair and votes, the managers'
    ranking."""

    permission_classes = [IsAuthenticated, IsStudyAnnotator]
    lookup_field = "question_key"
    lookup_value_regex = r"[-a-zA-Z0-9_]+"

    def _question(self) -> Question:
        return get_object_or_404(arena_questions(study=self.study), key=self.kwargs["question_key"])

    @extend_schema(
        responses={
            200: ArenaTaskSerializer,
            204: OpenApiResponse(description="Nothing left to judge."),
        }
    )
    @action(detail=True, methods=["get"])
    def next(self, request: Request, study_pk: str, question_key: str) -> Response:
        """The pair of responses to judge next (chosen where the ranking is least certain),
        anonymised as A and B; 204 when you have judged every pair asked of you."""
        state = arena_state(question=self._question(), annotator=request.user)
        task = state.task
        if task is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        responses = item_responses(task.item.metadata)
        form = VoteForm.for_task(task.item.pk, task.model_a, task.model_b)
        data = {
            "item": task.item.external_id,
            "prompt": task.item.text,
            "response_a": responses[task.model_a],
            "response_b": responses[task.model_b],
            "ticket": form.initial["ticket"],
            "progress": state.progress,
        }
        return Response(ArenaTaskSerializer(data).data)

    @extend_schema(
        request=ArenaVoteCreateSerializer,
        responses={
            201: OpenApiResponse(ArenaVoteSerializer, "Recorded."),
            200: OpenApiResponse(
                ArenaVoteSerializer,
                "Replay: this idempotency key was recorded before with the same vote; nothing "
                "new is stored.",
            ),
            400: OpenApiResponse(
                description="Stored nothing: invalid input, a ticket not signed here, a pair "
                "you already judged on this prompt, a reused key with another vote, or a "
                "closed study."
            ),
            403: OpenApiResponse(
                description="Not an annotator of this study, or the prompt is not assigned to you."
            ),
        },
    )
    @action(detail=True, methods=["post"], serializer_class=ArenaVoteCreateSerializer)
    def vote(self, request: Request, study_pk: str, question_key: str) -> Response:
        """Vote on the pair a ``next`` ticket names: A better, a tie or B better."""
        question = self._question()
        serializer = ArenaVoteCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        form = VoteForm(
            {
                "ticket": data["ticket"],
                "idempotency_key": data["idempotency_key"],
                "outcome": data["outcome"],
            }
        )
        form.is_valid()
        if "ticket" in form.errors or "item_id" not in form.cleaned_data:
            return Response(
                {"ticket": [str(message) for message in form.errors.get("__all__", ["Invalid."])]},
                status=status.HTTP_400_BAD_REQUEST,
            )
        shown = form.cleaned_data
        revision, created = arena_vote_record(
            question=question,
            annotator=request.user,
            item_id=shown["item_id"],
            model_a=shown["model_a"],
            model_b=shown["model_b"],
            outcome=int(data["outcome"]),
            idempotency_key=data["idempotency_key"],
            time_spent_ms=data.get("time_spent_ms", shown["time_spent_ms"]),
            source=Revision.Source.API,
        )
        body = {
            "revision": revision.pk,
            "item": revision.annotation.item.external_id,
            "outcome": int(data["outcome"]),
            "votes_on_prompt": len(votes_of(revision.value)),
            "created_at": revision.created_at,
        }
        return Response(
            ArenaVoteSerializer(body).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(responses={200: ArenaRankingSerializer})
    @action(detail=True, methods=["get"], permission_classes=[IsAuthenticated, IsStudyManager])
    def ranking(self, request: Request, study_pk: str, question_key: str) -> Response:
        """The models ranked (pooled Bradley-Terry, annotators weighted by their measured
        reliability, 95 % intervals from a bootstrap over prompts). Managers only."""
        found = arena_results(question=self._question())
        data = {
            "n_votes": found.n_votes,
            "n_prompts": found.n_prompts,
            "n_boot": found.ranking.n_boot if found.ranking else 0,
            "models": [asdict(row) for row in found.rows],
            "unvoted": found.unvoted,
            "annotators": [asdict(row) for row in found.annotators],
        }
        return Response(ArenaRankingSerializer(data).data)
