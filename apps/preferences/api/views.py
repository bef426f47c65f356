"""API of pairwise preferences: the next pair, judgements, and the managers' scores."""

from __future__ import annotations

import math
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.generics import get_object_or_404
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.viewsets import GenericViewSet

from annotate_site.api_pagination import CappedLimitOffsetPagination
from apps.items.models import Item
from apps.preferences.api.serializers import (
    JudgementCreateSerializer,
    JudgementFilterSerializer,
    JudgementSerializer,
    JudgementUndoSerializer,
    NextPairSerializer,
    ScoresSerializer,
)
from apps.preferences.models import Judgement
from apps.preferences.selectors import (
    annotator_reports,
    judgements_visible_to,
    pairwise_questions,
    question_judgements,
    question_scores,
)
from apps.preferences.services import judgement_record, judgement_retract, pair_next
from apps.recruitment.selectors import participant_of_user
from apps.studies.api.permissions import STUDY_PK, InStudyMixin, IsStudyAnnotator, IsStudyManager
from apps.studies.models import Question

QUESTION_KEY = OpenApiParameter(
    "question_key",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="The key of a pairwise question of the study.",
)
#: ``?limit=`` and ``?offset=`` of the capped page (documented by hand: an action that is not a
#: list gets no pagination parameters from the schema generator).
PAGE_PARAMETERS = [
    OpenApiParameter(
        "limit",
        OpenApiTypes.INT,
        OpenApiParameter.QUERY,
        description=f"Items per page (default {api_settings.PAGE_SIZE}, at most "
        f"{CappedLimitOffsetPagination.max_limit:,}).",
    ),
    OpenApiParameter(
        "offset", OpenApiTypes.INT, OpenApiParameter.QUERY, description="Items skipped."
    ),
]
JUDGEMENT_FILTERS = {"study": "question__study_id", "question": "question_id"}


def _viewer(request: Request) -> dict[str, bool]:
    """Serializer context: whether the requesting user is a recruited participant (who is
    shown no judgement's phase, so hidden attention checks stay hidden)."""
    return {"participant": participant_of_user(user=request.user) is not None}


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else value


@extend_schema(parameters=[STUDY_PK, QUESTION_KEY])
class StudyPairViewSet(InStudyMixin, GenericViewSet):
    """Per pairwise question of a study: an annotator's next pair, the managers' scores."""

    permission_classes = [IsAuthenticated, IsStudyAnnotator]
    lookup_field = "question_key"
    lookup_value_regex = r"[-a-zA-Z0-9_]+"

    def _question(self) -> Question:
        return get_object_or_404(
            pairwise_questions(study=self.study), key=self.kwargs["question_key"]
        )

    @extend_schema(
        responses={
            200: NextPairSerializer,
            204: OpenApiResponse(description="Your ranking is complete: nothing left to judge."),
            400: OpenApiResponse(description="The study is not running."),
        }
    )
    @action(detail=True, methods=["get"])
    def next(self, request: Request, study_pk: str, question_key: str) -> Response:
        """The pair to judge next (the same one until it is answered); 204 when done.

        Only pairs your earlier answers do not imply are asked, plus calibration and audit
        pairs that measure your consistency.
        """
        state = pair_next(question=self._question(), annotator=request.user)
        if state.pending is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        items = Item.objects.in_bulk(state.pending)
        pair = {
            "item_a": items[state.pending[0]],
            "item_b": items[state.pending[1]],
            "remaining_estimate": state.remaining,
            "strict": state.settings.strict,
        }
        return Response(NextPairSerializer(pair, context=self.get_serializer_context()).data)

    @extend_schema(
        request=JudgementUndoSerializer,
        responses={
            200: OpenApiResponse(JudgementSerializer, "The judgement undone (retracted)."),
            400: OpenApiResponse(
                description="Nothing to undo, not your latest judgement, or the study is not "
                "running."
            ),
        },
    )
    @action(detail=True, methods=["post"], serializer_class=JudgementUndoSerializer)
    def undo(self, request: Request, study_pk: str, question_key: str) -> Response:
        """Undo your latest judgement: its pair is the next one again (``next``).

        Append-only: the judgement stays, marked ``retracted``, and every computation leaves it
        out. Call again to go further back.
        """
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        judgement = judgement_retract(
            question=self._question(),
            annotator=request.user,
            judgement_id=serializer.validated_data.get("judgement"),
        )
        context = {**self.get_serializer_context(), **_viewer(request)}
        return Response(JudgementSerializer(judgement, context=context).data)

    @extend_schema(parameters=PAGE_PARAMETERS, responses={200: ScoresSerializer})
    @action(detail=True, methods=["get"], permission_classes=[IsAuthenticated, IsStudyManager])
    def scores(self, request: Request, study_pk: str, question_key: str) -> Response:
        """Bradley-Terry strengths (pooled), count scores and consistency per annotator.

        Managers only. ``items`` is one capped page of the items, best first (``?limit=`` and
        ``?offset=``, ``next`` links the rest; the scores CSV holds every item in one
        download); ``bt_se_exact`` is false when the standard errors are approximated (over
        2,000 items).
        """
        question = self._question()
        judgements = question_judgements(question=question)  # read once for both
        scores = question_scores(question=question, judgements=judgements)
        page = self.paginate_queryset(scores.rows)  # capped pages, as every list of the API
        items = [
            {
                "item": row.item,
                "rank": row.rank,
                "bt_log_strength": _finite(row.log_strength),
                "bt_se": _finite(row.se),
                "count_scores": dict(zip(scores.annotators, map(_finite, row.counts), strict=True)),
                "absolute_scale": dict(
                    zip(scores.annotators, map(_finite, row.scales), strict=True)
                ),
            }
            for row in page
        ]
        data = {
            "count": self.paginator.count,
            "next": self.paginator.get_next_link(),
            "previous": self.paginator.get_previous_link(),
            "bt_alpha": scores.alpha,
            "bt_se_exact": scores.se_exact,
            "n_judgements": scores.n_judgements,
            "weights": dict(scores.annotator_weights),
            "items": items,
            "annotators": annotator_reports(question=question, judgements=judgements),
        }
        return Response(ScoresSerializer(data).data)


@extend_schema_view(list=extend_schema(parameters=[JudgementFilterSerializer]))
class JudgementViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, GenericViewSet):
    """Pairwise judgements: annotators see their own; managers every one of their studies."""

    serializer_class = JudgementSerializer
    permission_classes = [IsAuthenticated]

    def get_queryset(self) -> QuerySet[Judgement]:
        if getattr(self, "swagger_fake_view", False):
            return Judgement.objects.none()
        return judgements_visible_to(user=self.request.user)

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), **_viewer(self.request)}

    def filter_queryset(self, queryset: QuerySet[Judgement]) -> QuerySet[Judgement]:
        filters = JudgementFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return queryset.filter(
            **{JUDGEMENT_FILTERS[name]: value for name, value in filters.validated_data.items()}
        )

    @extend_schema(
        request=JudgementCreateSerializer,
        responses={
            201: OpenApiResponse(JudgementSerializer, "Recorded."),
            200: OpenApiResponse(
                JudgementSerializer,
                "Replay: this idempotency key was recorded before with the same answer; "
                "nothing new is stored and the first judgement comes back.",
            ),
            400: OpenApiResponse(
                description="Stored nothing: invalid input, a pair that is not your pending "
                "one, a tie in strict mode, or a reused key with a different answer."
            ),
            403: OpenApiResponse(description="You are not an annotator of this study."),
        },
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Answer your pending pair (see ``GET /api/studies/{id}/pairs/{key}/next/``)."""
        serializer = JudgementCreateSerializer(
            data=request.data, context=self.get_serializer_context()
        )
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        judgement, created = judgement_record(
            question=data["question"],
            annotator=request.user,
            item_a=data["item_a"].pk,
            item_b=data["item_b"].pk,
            outcome=data["outcome"],
            idempotency_key=data["idempotency_key"],
            time_spent_ms=data.get("time_spent_ms"),
        )
        return Response(
            JudgementSerializer(judgement, context=self.get_serializer_context()).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )
